package state

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRandomCommandSequences runs random commands (valid and invalid) against a controller
// and checks after every step that:
//   - the image invariants hold (leader ∈ ISR ⊆ replicas, distinct replicas, reassignment
//     sets within replicas; Image.Check);
//   - a leader is always an active broker, and an ISR holds an inactive broker only when
//     every member is inactive (the kept last members);
//   - leader and partition epochs never decrease, and every change of a partition raises
//     its partition epoch;
//   - commands do not modify the image (its snapshot is unchanged until records apply);
//
// and at the end that replaying the log from scratch and restoring the snapshot both give
// byte-identical images.
func TestRandomCommandSequences(t *testing.T) {
	seeds, steps := 40, 400
	if testing.Short() {
		seeds = 8
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			runRandom(t, uint64(seed), steps)
		})
	}
}

type epochs struct{ leader, partition int32 }

func runRandom(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 42))
	h := newHarness(t)
	nextIncarnation := byte(1)
	brokerIDs := func() []int32 {
		var out []int32
		for _, b := range h.c.Image().Brokers() {
			out = append(out, b.ID)
		}
		return out
	}
	anyBroker := func() int32 { return int32(1 + rng.IntN(6)) } // may be unregistered
	randomReplicas := func() []int32 {
		n := 1 + rng.IntN(3)
		var out []int32
		for len(out) < n {
			id := anyBroker()
			if !contains(out, id) || rng.IntN(20) == 0 { // sometimes a duplicate
				out = append(out, id)
			}
		}
		return out
	}
	topicNames := []string{"a", "b", "c", "d"}
	randomPartition := func() (*Topic, int32, *Partition) {
		names := h.c.Image().TopicNames()
		if len(names) == 0 {
			return nil, 0, nil
		}
		tp := h.c.Image().Topic(names[rng.IntN(len(names))])
		i := int32(rng.IntN(len(tp.Partitions)))
		return tp, i, tp.Partitions[i]
	}
	seen := map[UUID][]epochs{}
	applied := map[string]int{}
	check := func(step int, what string) {
		im := h.c.Image()
		for _, tp := range im.topics {
			prev := seen[tp.ID]
			for i, p := range tp.Partitions {
				if p.Leader != NoLeader && !im.Broker(p.Leader).Active() {
					t.Fatalf("step %d (%s): %s-%d leader %d is not active: %v", step, what, tp.Name, i, p.Leader, p)
				}
				inactive := 0
				for _, r := range p.ISR {
					if !im.Broker(r).Active() {
						inactive++
					}
				}
				if inactive > 0 && inactive < len(p.ISR) {
					t.Fatalf("step %d (%s): %s-%d ISR %v mixes active and inactive brokers", step, what, tp.Name, i, p.ISR)
				}
				if i < len(prev) {
					old := prev[i]
					if p.LeaderEpoch < old.leader || p.PartitionEpoch < old.partition {
						t.Fatalf("step %d (%s): %s-%d epochs went back: %+v -> %v", step, what, tp.Name, i, old, p)
					}
				}
			}
			cur := make([]epochs, len(tp.Partitions))
			for i, p := range tp.Partitions {
				cur[i] = epochs{p.LeaderEpoch, p.PartitionEpoch}
			}
			seen[tp.ID] = cur
		}
	}
	// run computes a command, checks it did not touch the image, then applies its records.
	// Partition changes must raise the partition epoch of exactly the partitions they name.
	run := func(step int, what string, cmd func() []Record) {
		before := h.c.Image().Snapshot()
		recs := cmd()
		if !bytes.Equal(before, h.c.Image().Snapshot()) {
			t.Fatalf("step %d: command %s modified the image", step, what)
		}
		changed := map[TopicPartition]int32{}
		for _, r := range recs {
			if pc, ok := r.(*PartitionChangeRecord); ok {
				tp := TopicPartition{h.c.Image().TopicByID(pc.TopicID).Name, pc.Partition}
				if _, dup := changed[tp]; dup {
					t.Fatalf("step %d (%s): two changes of %v in one batch", step, what, tp)
				}
				changed[tp] = pc.PartitionEpoch
			}
		}
		if len(recs) > 0 {
			applied[what]++
		}
		h.apply(recs)
		for tp, pe := range changed {
			if p := h.part(tp.Topic, tp.Partition); p.PartitionEpoch != pe+1 {
				t.Fatalf("step %d (%s): %v partition epoch %d after a change computed at %d", step, what, tp, p.PartitionEpoch, pe)
			}
		}
		check(step, what)
	}

	for step := range steps {
		switch op := rng.IntN(15); op {
		case 0: // register (new id or a restart)
			id := anyBroker()
			inc := UUID{byte(id), nextIncarnation}
			if rng.IntN(2) == 0 {
				nextIncarnation++
			}
			run(step, "register", func() []Record {
				recs, _ := h.c.RegisterBroker(h.now, RegisterBrokerRequest{NodeID: id, IncarnationID: inc, ClusterID: testCluster, Rack: []string{"", "r1", "r2"}[rng.IntN(3)]})
				return recs
			})
		case 1, 2: // heartbeat, sometimes fence or shutdown
			ids := brokerIDs()
			if len(ids) == 0 {
				continue
			}
			special := ids[rng.IntN(len(ids))]
			for _, id := range ids { // every broker heartbeats; one may ask for something
				req := HeartbeatRequest{NodeID: id, BrokerEpoch: h.epoch(id), CurrentMetadataOffset: h.offset}
				if id == special {
					switch rng.IntN(8) {
					case 0:
						req.WantFence = true
					case 1:
						req.WantShutDown = true
					case 2:
						req.BrokerEpoch--
					}
				}
				run(step, "heartbeat", func() []Record { recs, _ := h.c.Heartbeat(h.now, req); return recs })
			}
		case 3: // time passes
			h.now += int64(rng.IntN(6000))
			if rng.IntN(4) == 0 {
				h.now += 10000 // long enough for silent brokers to expire
			}
			run(step, "expire", func() []Record { recs, _, _ := h.c.ExpireSessions(h.now); return recs })
		case 4, 5: // create topics
			ct := CreatableTopic{Name: topicNames[rng.IntN(len(topicNames))], NumPartitions: int32(1 + rng.IntN(5)), ReplicationFactor: int16(1 + rng.IntN(3))}
			if rng.IntN(4) == 0 {
				ct.NumPartitions, ct.ReplicationFactor = -1, -1
				ct.Assignments = [][]int32{randomReplicas()}
			}
			run(step, "create", func() []Record {
				recs, _ := h.c.CreateTopics(CreateTopicsRequest{Topics: []CreatableTopic{ct}})
				return recs
			})
		case 6: // delete
			run(step, "delete", func() []Record {
				recs, _ := h.c.DeleteTopics(DeleteTopicsRequest{Names: []string{topicNames[rng.IntN(len(topicNames))]}})
				return recs
			})
		case 7: // grow
			tp, _, _ := randomPartition()
			if tp == nil {
				continue
			}
			run(step, "create partitions", func() []Record {
				recs, _ := h.c.CreatePartitions(CreatePartitionsRequest{Topics: []CreatePartitionsTopic{{Name: tp.Name, Count: int32(len(tp.Partitions) + rng.IntN(3))}}})
				return recs
			})
		case 8, 9: // ISR change from the leader (sometimes stale)
			tp, i, p := randomPartition()
			if tp == nil || p.Leader == NoLeader {
				continue
			}
			isr := []int32{p.Leader}
			catchUp := rng.IntN(2) == 0 // every active replica caught up (drives reassignments)
			for _, r := range p.Replicas {
				if r != p.Leader && (catchUp && h.c.Image().Broker(r).Active() || !catchUp && rng.IntN(2) == 0) {
					isr = append(isr, r)
				}
			}
			it := AlterPartitionItem{TopicID: tp.ID, Partition: i, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: isr}
			if rng.IntN(6) == 0 {
				it.PartitionEpoch--
			}
			run(step, "alter partition", func() []Record {
				recs, _, _ := h.c.AlterPartition(AlterPartitionRequest{BrokerID: p.Leader, BrokerEpoch: h.epoch(p.Leader), Partitions: []AlterPartitionItem{it}})
				return recs
			})
		case 10: // elections
			typ := ElectionType(rng.IntN(2))
			run(step, "elect", func() []Record { recs, _ := h.c.ElectLeaders(ElectLeadersRequest{Type: typ}); return recs })
		case 11, 12: // reassign or cancel
			tp, i, _ := randomPartition()
			if tp == nil {
				continue
			}
			var target []int32
			if rng.IntN(4) != 0 {
				target = randomReplicas()
			}
			run(step, "reassign", func() []Record {
				recs, _ := h.c.AlterPartitionReassignments([]ReassignmentRequest{{tp.Name, i, target}})
				return recs
			})
		case 13: // configs: toggle unclean election
			v := []string{"true", "false"}[rng.IntN(2)]
			run(step, "configs", func() []Record {
				recs, _ := h.c.AlterConfigs(AlterConfigsRequest{Incremental: true, Resources: []AlterConfigsResource{
					{Type: ResourceBroker, Changes: []ConfigChange{{Key: "unclean.leader.election.enable", Value: v}}}}})
				return recs
			})
		case 14: // unregister or producer ids
			id := anyBroker()
			if rng.IntN(3) == 0 {
				run(step, "unregister", func() []Record { recs, _ := h.c.UnregisterBroker(id); return recs })
			} else if b := h.c.Image().Broker(id); b != nil {
				run(step, "producer ids", func() []Record { recs, _ := h.c.AllocateProducerIDs(id, b.Epoch); return recs })
			}
		}
	}

	// Replaying the log rebuilds the same image; so does its snapshot.
	final := h.c.Image().Snapshot()
	replay := New(h.c.Config())
	for i, batch := range h.log {
		if err := replay.Apply(int64(i+1), batch); err != nil {
			t.Fatalf("replay batch %d: %v", i+1, err)
		}
	}
	if !bytes.Equal(replay.Image().Snapshot(), final) {
		t.Fatal("replay differs")
	}
	restored, err := Restore(final)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(restored.Snapshot(), final) {
		t.Fatal("restore differs")
	}
	if err := restored.Check(); err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() && seed == 0 {
		reassigning := len(h.c.ListPartitionReassignments(nil))
		t.Logf("seed 0: batches by command %v", applied)
		t.Logf("seed 0: %d batches, %d brokers, %d topics, %d partitions, %d reassigning", len(h.log), len(h.c.Image().Brokers()), len(h.c.Image().TopicNames()), h.c.Image().NumPartitions(), reassigning)
	}
	_ = slices.Clone[[]int32]
}
