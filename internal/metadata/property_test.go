package metadata

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// A randomized run of controller commands: after every batch the published Image matches the
// controller's image field by field, untouched topics and brokers keep their pointers and the
// previous Image is unchanged (the harness checks all three). At the end, the whole log in
// one ApplyBatch, and a mid-run snapshot followed by the rest of the log, give the same
// Image as the batch-by-batch publisher.
func TestPublisherRandomized(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { randomRun(t, seed, 600) })
	}
}

func randomRun(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	h := newHarness(t)
	topicNames := []string{"a", "b", "c", "__consumer_offsets"}
	var nextIncarnation byte = 1
	anyBroker := func() int32 { return int32(1 + rng.IntN(5)) }
	brokerIDs := func() []int32 {
		var ids []int32
		for _, b := range h.c.Image().Brokers() {
			ids = append(ids, b.ID)
		}
		return ids
	}
	randomPartition := func() (*state.Topic, int32, *state.Partition) {
		names := h.c.Image().TopicNames()
		if len(names) == 0 {
			return nil, 0, nil
		}
		tp := h.c.Image().Topic(names[rng.IntN(len(names))])
		if len(tp.Partitions) == 0 {
			return nil, 0, nil
		}
		i := int32(rng.IntN(len(tp.Partitions)))
		return tp, i, tp.Partitions[i]
	}
	var snapAt int64
	var snap []byte
	for step := range steps {
		if step == steps/2 {
			snapAt, snap = h.offset, h.c.Snapshot()
		}
		switch rng.IntN(13) {
		case 0: // register (new id or a restart)
			id := anyBroker()
			inc := state.UUID{byte(id), nextIncarnation}
			if rng.IntN(2) == 0 {
				nextIncarnation++
			}
			recs, _ := h.c.RegisterBroker(h.now, state.RegisterBrokerRequest{NodeID: id, IncarnationID: inc, ClusterID: testCluster,
				Endpoints: []state.Endpoint{{Name: "PLAINTEXT", Host: fmt.Sprint("h", id), Port: int32(9000 + rng.IntN(100))}}})
			h.apply(recs)
		case 1, 2: // every broker heartbeats; one may ask to be fenced or to shut down
			ids := brokerIDs()
			if len(ids) == 0 {
				continue
			}
			special := ids[rng.IntN(len(ids))]
			for _, id := range ids {
				req := state.HeartbeatRequest{NodeID: id, BrokerEpoch: h.c.Image().Broker(id).Epoch, CurrentMetadataOffset: h.offset}
				if id == special {
					req.WantFence, req.WantShutDown = rng.IntN(6) == 0, rng.IntN(8) == 0
				}
				recs, _ := h.c.Heartbeat(h.now, req)
				h.apply(recs)
			}
		case 3: // time passes; silent brokers expire
			h.now += int64(rng.IntN(12000))
			recs, _, _ := h.c.ExpireSessions(h.now)
			h.apply(recs)
		case 4, 5:
			ct := state.CreatableTopic{Name: topicNames[rng.IntN(len(topicNames))], NumPartitions: int32(1 + rng.IntN(6)), ReplicationFactor: int16(1 + rng.IntN(3))}
			if rng.IntN(2) == 0 {
				ct.Configs = map[string]string{"retention.ms": fmt.Sprint(rng.IntN(1000))}
			}
			recs, _ := h.c.CreateTopics(state.CreateTopicsRequest{Topics: []state.CreatableTopic{ct}})
			h.apply(recs)
		case 6:
			if rng.IntN(3) != 0 {
				continue
			}
			recs, _ := h.c.DeleteTopics(state.DeleteTopicsRequest{Names: []string{topicNames[rng.IntN(len(topicNames))]}})
			h.apply(recs)
		case 7:
			if tp, _, _ := randomPartition(); tp != nil {
				recs, _ := h.c.CreatePartitions(state.CreatePartitionsRequest{Topics: []state.CreatePartitionsTopic{{Name: tp.Name, Count: int32(len(tp.Partitions) + rng.IntN(3))}}})
				h.apply(recs)
			}
		case 8, 9: // the leader shrinks or expands the ISR
			tp, i, p := randomPartition()
			if tp == nil || p.Leader == state.NoLeader {
				continue
			}
			isr := []int32{p.Leader}
			for _, r := range p.Replicas {
				if r != p.Leader && h.c.Image().Broker(r).Active() && rng.IntN(3) != 0 {
					isr = append(isr, r)
				}
			}
			recs, _, _ := h.c.AlterPartition(state.AlterPartitionRequest{BrokerID: p.Leader, BrokerEpoch: h.c.Image().Broker(p.Leader).Epoch,
				Partitions: []state.AlterPartitionItem{{TopicID: tp.ID, Partition: i, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: isr}}})
			h.apply(recs)
		case 10:
			recs, _ := h.c.ElectLeaders(state.ElectLeadersRequest{Type: state.ElectionType(rng.IntN(2))})
			h.apply(recs)
		case 11: // reassign or cancel
			tp, i, _ := randomPartition()
			if tp == nil {
				continue
			}
			var target []int32
			if rng.IntN(4) != 0 {
				for _, id := range rng.Perm(5)[:1+rng.IntN(3)] {
					target = append(target, int32(id+1))
				}
			}
			recs, _ := h.c.AlterPartitionReassignments([]state.ReassignmentRequest{{Topic: tp.Name, Partition: i, Replicas: target}})
			h.apply(recs)
		case 12: // configs of a topic, the cluster or a broker; producer ids; unregistration
			ch := state.ConfigChange{Key: "retention.ms", Value: fmt.Sprint(rng.IntN(1000))}
			if rng.IntN(3) == 0 {
				ch.Op = state.OpDelete
			}
			var res state.AlterConfigsResource
			switch rng.IntN(5) {
			case 0:
				res = state.AlterConfigsResource{Type: state.ResourceTopic, Name: topicNames[rng.IntN(len(topicNames))]}
			case 1:
				ch.Key = "log.retention.ms"
				res = state.AlterConfigsResource{Type: state.ResourceBroker}
			case 2:
				ch.Key = "log.retention.ms"
				res = state.AlterConfigsResource{Type: state.ResourceBroker, Name: fmt.Sprint(anyBroker())}
			case 3:
				if b := h.c.Image().Broker(anyBroker()); b != nil {
					recs, _ := h.c.AllocateProducerIDs(b.ID, b.Epoch)
					h.apply(recs)
				}
				continue
			case 4:
				recs, _ := h.c.UnregisterBroker(anyBroker())
				h.apply(recs)
				continue
			}
			res.Changes = []state.ConfigChange{ch}
			recs, _ := h.c.AlterConfigs(state.AlterConfigsRequest{Incremental: true, Resources: []state.AlterConfigsResource{res}})
			h.apply(recs)
		}
	}
	want := dump(h.p.Image())
	if testing.Verbose() && seed == 0 {
		im := h.p.Image()
		parts := 0
		for _, tp := range im.Topics {
			parts += len(tp.Parts)
		}
		kinds := map[state.RecordType]int{}
		for _, e := range h.log {
			for _, r := range e.Records {
				kinds[r.Type()]++
			}
		}
		t.Logf("seed 0: records by type %v", kinds)
		t.Logf("seed 0: %d batches, %d brokers, %d topics, %d partitions, %d broker config sets", len(h.log), len(im.Brokers), len(im.Topics), parts, len(im.NodeConfigs))
	}

	whole := NewPublisher()
	if err := whole.ApplyBatch(h.log); err != nil {
		t.Fatal(err)
	}
	if got := dump(whole.Image()); got != want {
		t.Fatalf("the whole log in one batch:\n%s\nbatch by batch:\n%s", got, want)
	}
	fromSnap := NewPublisher()
	if err := fromSnap.Apply(1, h.log[0].Records); err != nil { // a publisher that is behind
		t.Fatal(err)
	}
	entries := append([]Entry{{Offset: snapAt, Snapshot: snap}}, h.log[snapAt:]...)
	if err := fromSnap.ApplyBatch(entries); err != nil {
		t.Fatal(err)
	}
	if got := dump(fromSnap.Image()); got != want {
		t.Fatalf("snapshot at %d and the rest:\n%s\nbatch by batch:\n%s", snapAt, got, want)
	}
}
