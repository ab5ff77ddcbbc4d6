package metadata

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// Registration, unfencing, fencing, controlled shutdown and unregistration show up in the
// image's brokers, with their endpoints.
func TestPublisherBrokers(t *testing.T) {
	h := newHarness(t)
	if im := h.p.Image(); im == nil || im.Offset != -1 || len(im.Brokers) != 0 || len(im.Topics) != 0 {
		t.Fatalf("new publisher image: %+v", im)
	}
	recs, resp := h.c.RegisterBroker(h.now, state.RegisterBrokerRequest{
		NodeID: 2, IncarnationID: state.UUID{2, 1}, ClusterID: testCluster, Rack: "r0",
		Endpoints: []state.Endpoint{{Name: "PLAINTEXT", Host: "h2", Port: 9094}},
	})
	if resp.Err != nil {
		t.Fatal(resp.Err)
	}
	h.apply(recs)
	b := h.p.Image().Broker(2)
	if b == nil || !b.Fenced || b.Epoch != resp.BrokerEpoch || b.Rack != "r0" || b.IncarnationID != ([16]byte{2, 1}) {
		t.Fatalf("registered broker: %+v", b)
	}
	if host, port, ok := h.p.Image().Endpoint(2, "PLAINTEXT"); !ok || host != "h2" || port != 9094 {
		t.Fatalf("endpoint: %q %d %v", host, port, ok)
	}
	if _, _, ok := h.p.Image().Endpoint(2, "SSL"); ok {
		t.Fatal("endpoint of a listener the broker does not have")
	}
	if _, _, ok := h.p.Image().Endpoint(7, "PLAINTEXT"); ok {
		t.Fatal("endpoint of an unregistered broker")
	}
	h.heartbeat(state.HeartbeatRequest{NodeID: 2, BrokerEpoch: resp.BrokerEpoch})
	if h.p.Image().Broker(2).Fenced {
		t.Fatal("broker still fenced after a caught-up heartbeat")
	}
	h.register(1)
	h.register(3)
	var got []int32
	for _, b := range h.p.Image().SortedBrokers() {
		got = append(got, b.ID)
	}
	if !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("sorted brokers %v", got)
	}

	h.heartbeat(state.HeartbeatRequest{NodeID: 3, BrokerEpoch: h.p.Image().Broker(3).Epoch, WantFence: true})
	if !h.p.Image().Broker(3).Fenced {
		t.Fatal("broker 3 not fenced after asking to be")
	}
	h.heartbeat(state.HeartbeatRequest{NodeID: 1, BrokerEpoch: h.p.Image().Broker(1).Epoch, WantShutDown: true})
	if !h.p.Image().Broker(1).InControlledShutdown {
		t.Fatal("broker 1 not in controlled shutdown")
	}
	recs, err := h.c.UnregisterBroker(3)
	if err != nil {
		t.Fatal(err)
	}
	h.apply(recs)
	if h.p.Image().Broker(3) != nil || len(h.p.Image().Brokers) != 2 {
		t.Fatalf("unregistered broker still there: %+v", h.p.Image().Brokers)
	}
}

// Topics appear with their partitions, replicas, leaders, configs and ids, disappear when
// deleted, and a re-created topic of the same name has the new id.
func TestPublisherTopics(t *testing.T) {
	h := newHarness(t)
	for id := int32(1); id <= 3; id++ {
		h.register(id)
	}
	a := h.createTopic("a", 3, 2, "retention.ms", "1000")
	if a == nil || a.Partitions != 3 || len(a.Parts) != 3 || a.ReplicationFactor != 2 || a.Configs["retention.ms"] != "1000" || a.Internal {
		t.Fatalf("topic a: %+v", a)
	}
	for i := range a.Parts {
		p := a.Partition(int32(i))
		if len(p.Replicas) != 2 || p.Leader != p.Replicas[0] || !p.InISR(p.Replicas[1]) || p.InISR(99) {
			t.Fatalf("a-%d: %+v", i, *p)
		}
	}
	if a.Partition(3) != nil || a.Partition(-1) != nil {
		t.Fatal("partition out of range is not nil")
	}
	off := h.createTopic("__consumer_offsets", 2, 3)
	if !off.Internal || off.ReplicationFactor != 3 {
		t.Fatalf("__consumer_offsets: %+v", off)
	}
	h.createTopic("b", 1, 1)

	recs, res := h.c.DeleteTopics(state.DeleteTopicsRequest{Names: []string{"a"}})
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	h.apply(recs)
	if h.p.Image().Topic("a") != nil || h.p.Image().TopicByID(a.ID) != nil {
		t.Fatal("deleted topic still in the image")
	}
	a2 := h.createTopic("a", 1, 3)
	if a2.ID == a.ID || a2.Configs != nil || a2.ReplicationFactor != 3 {
		t.Fatalf("re-created topic: %+v (old id %s)", a2, a.ID)
	}

	// Delete and re-create in one batch: the new topic takes the name.
	del, _ := h.c.DeleteTopics(state.DeleteTopicsRequest{Names: []string{"b"}})
	h.offset++
	if err := h.c.Apply(h.offset, h.decode(del)); err != nil {
		t.Fatal(err)
	}
	create, res2 := h.c.CreateTopics(state.CreateTopicsRequest{Topics: []state.CreatableTopic{{Name: "b", NumPartitions: 4, ReplicationFactor: 1}}})
	if res2[0].Err != nil {
		t.Fatal(res2[0].Err)
	}
	h.offset--
	h.c = rebuildController(t, h) // undo the controller's early apply: replay its log
	h.apply(append(del, create...))
	if b := h.p.Image().Topic("b"); b == nil || b.Partitions != 4 {
		t.Fatalf("b after delete and re-create in one batch: %+v", b)
	}
}

// rebuildController replays h.log into a new controller (to undo an apply made only to
// compute a command against).
func rebuildController(t *testing.T, h *harness) *state.Controller {
	t.Helper()
	c := state.New(h.c.Config())
	for _, e := range h.log {
		if err := c.Apply(e.Offset, h.decode(e.Records)); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// New partitions, ISR changes, elections and reassignments change the partitions they name.
func TestPublisherPartitionChanges(t *testing.T) {
	h := newHarness(t)
	for id := int32(1); id <= 4; id++ {
		h.register(id)
	}
	h.createTopic("t", 2, 3)
	recs, res := h.c.CreatePartitions(state.CreatePartitionsRequest{Topics: []state.CreatePartitionsTopic{{Name: "t", Count: 5}}})
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	h.apply(recs)
	tp := h.p.Image().Topic("t")
	if tp.Partitions != 5 || len(tp.Parts) != 5 {
		t.Fatalf("after growing: %d partitions", tp.Partitions)
	}

	// The leader of t-1 shrinks its ISR to itself.
	p := *tp.Partition(1)
	recs, results, err := h.c.AlterPartition(state.AlterPartitionRequest{
		BrokerID: p.Leader, BrokerEpoch: h.p.Image().Broker(p.Leader).Epoch,
		Partitions: []state.AlterPartitionItem{{TopicID: state.UUID(tp.ID), Partition: 1, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: []int32{p.Leader}}},
	})
	if err != nil || results[0].Err != nil {
		t.Fatal(err, results[0].Err)
	}
	h.apply(recs)
	np := h.p.Image().Topic("t").Partition(1)
	if !slices.Equal(np.ISR, []int32{p.Leader}) || np.PartitionEpoch != p.PartitionEpoch+1 || np.InISR(p.Replicas[1]) {
		t.Fatalf("after shrink: %+v (was %+v)", *np, p)
	}

	// Reassign t-0 to brokers it is not on: Adding and Removing appear, the replication
	// factor is the target's.
	p0 := h.p.Image().Topic("t").Partition(0)
	var target []int32
	for id := int32(1); id <= 4 && len(target) < 2; id++ {
		if !slices.Contains(p0.Replicas, id) {
			target = append(target, id)
		}
	}
	target = append(target, p0.Replicas[0])
	recs, rr := h.c.AlterPartitionReassignments([]state.ReassignmentRequest{{Topic: "t", Partition: 0, Replicas: target}})
	if rr[0].Err != nil {
		t.Fatal(rr[0].Err)
	}
	h.apply(recs)
	q := h.p.Image().Topic("t").Partition(0)
	if len(q.Adding) == 0 || len(q.Removing) == 0 || int(h.p.Image().Topic("t").ReplicationFactor) != len(target) {
		t.Fatalf("reassigning: %+v, rf %d", *q, h.p.Image().Topic("t").ReplicationFactor)
	}

	// Fencing broker 1 moves its leaderships away.
	h.heartbeat(state.HeartbeatRequest{NodeID: 1, BrokerEpoch: h.p.Image().Broker(1).Epoch, WantFence: true})
	for _, tp := range h.p.Image().Topics {
		for i, p := range tp.Parts {
			if p.Leader == 1 {
				t.Fatalf("%s-%d still led by fenced broker 1: %+v", tp.Name, i, p)
			}
		}
	}
}

// Topic, cluster-wide and per-broker overrides land in their maps and leave when deleted.
func TestPublisherConfigs(t *testing.T) {
	h := newHarness(t)
	h.register(1)
	h.register(2)
	h.createTopic("t", 1, 1)
	h.alterConfigs(state.ResourceTopic, "t", state.ConfigChange{Key: "retention.ms", Value: "5"}, state.ConfigChange{Key: "cleanup.policy", Value: "compact"})
	if c := h.p.Image().Topic("t").Configs; c["retention.ms"] != "5" || c["cleanup.policy"] != "compact" {
		t.Fatalf("topic configs %v", c)
	}
	h.alterConfigs(state.ResourceBroker, "", state.ConfigChange{Key: "log.retention.ms", Value: "7"})
	h.alterConfigs(state.ResourceBroker, "2", state.ConfigChange{Key: "log.retention.ms", Value: "8"})
	im := h.p.Image()
	if im.BrokerConfigs["log.retention.ms"] != "7" || im.NodeConfigs[2]["log.retention.ms"] != "8" || im.NodeConfigs[1] != nil {
		t.Fatalf("broker configs %v, node configs %v", im.BrokerConfigs, im.NodeConfigs)
	}
	h.alterConfigs(state.ResourceTopic, "t", state.ConfigChange{Key: "retention.ms", Op: state.OpDelete})
	h.alterConfigs(state.ResourceBroker, "2", state.ConfigChange{Key: "log.retention.ms", Op: state.OpDelete})
	im = h.p.Image()
	if _, ok := im.Topic("t").Configs["retention.ms"]; ok || im.Topic("t").Configs["cleanup.policy"] != "compact" {
		t.Fatalf("topic configs after delete %v", im.Topic("t").Configs)
	}
	if _, ok := im.NodeConfigs[2]; ok || im.BrokerConfigs["log.retention.ms"] != "7" {
		t.Fatalf("node configs after delete %v, cluster %v", im.NodeConfigs, im.BrokerConfigs)
	}
}

// An ISR change of one partition rebuilds that topic only: other topics, the brokers and the
// config maps are the same pointers, as are the unchanged partitions' replica lists.
func TestPublisherKeepsUntouchedPointers(t *testing.T) {
	h := newHarness(t)
	for id := int32(1); id <= 3; id++ {
		h.register(id)
	}
	h.createTopic("a", 4, 3)
	h.createTopic("b", 2, 3, "retention.ms", "9")
	h.alterConfigs(state.ResourceBroker, "", state.ConfigChange{Key: "log.retention.ms", Value: "7"})
	prev := h.p.Image()
	a := prev.Topic("a")
	p := a.Parts[2]
	recs, _, err := h.c.AlterPartition(state.AlterPartitionRequest{
		BrokerID: p.Leader, BrokerEpoch: prev.Broker(p.Leader).Epoch,
		Partitions: []state.AlterPartitionItem{{TopicID: state.UUID(a.ID), Partition: 2, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: []int32{p.Leader}}},
	})
	if err != nil || len(recs) != 1 {
		t.Fatalf("alter partition: %v %v", recs, err)
	}
	h.apply(recs) // checks every untouched pointer
	next := h.p.Image()
	na := next.Topic("a")
	if na == a || next.Topic("b") != prev.Topic("b") || !sameMap(next.Topic("b").Configs, prev.Topic("b").Configs) {
		t.Fatal("the changed topic kept its pointer or the other one lost it")
	}
	for i := range na.Parts {
		if i == 2 {
			continue
		}
		if &na.Parts[i].Replicas[0] != &a.Parts[i].Replicas[0] || &na.Parts[i].ISR[0] != &a.Parts[i].ISR[0] {
			t.Fatalf("unchanged partition a-%d was copied, not shared", i)
		}
	}
	if fmtPtr(next.Brokers) != fmtPtr(prev.Brokers) || !sameMap(next.BrokerConfigs, prev.BrokerConfigs) {
		t.Fatal("broker map or cluster configs rebuilt by a partition change")
	}
	if len(a.Parts[2].ISR) != 3 {
		t.Fatalf("the previous image's partition changed: %+v", a.Parts[2])
	}
}

// A snapshot restores everything; topics whose contents it does not change keep their
// pointers; ApplyBatch publishes once; entries already applied are skipped.
func TestPublisherSnapshot(t *testing.T) {
	h := newHarness(t)
	for id := int32(1); id <= 3; id++ {
		h.register(id)
	}
	h.createTopic("a", 3, 2, "retention.ms", "5")
	h.createTopic("b", 2, 3)
	h.alterConfigs(state.ResourceBroker, "1", state.ConfigChange{Key: "log.retention.ms", Value: "8"})
	snapAt := h.offset
	snap := h.c.Snapshot()
	h.createTopic("c", 1, 1)
	b := h.p.Image().Topic("b")
	pb := b.Parts[0]
	recs, _, err := h.c.AlterPartition(state.AlterPartitionRequest{
		BrokerID: pb.Leader, BrokerEpoch: h.p.Image().Broker(pb.Leader).Epoch,
		Partitions: []state.AlterPartitionItem{{TopicID: state.UUID(b.ID), Partition: 0, LeaderEpoch: pb.LeaderEpoch, PartitionEpoch: pb.PartitionEpoch, NewISR: []int32{pb.Leader}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.apply(recs)

	// A fresh publisher: the snapshot, then the entries after it (and some before it, as an
	// overlapping catch-up read would give), in one batch.
	fresh := NewPublisher()
	publishes := 0
	fresh.Subscribe(func(prev, next *Image) {
		publishes++
		if prev.Offset != -1 || next.Offset != h.offset {
			t.Errorf("publish from %d to %d", prev.Offset, next.Offset)
		}
	})
	entries := append([]Entry{{Offset: snapAt, Snapshot: snap}}, h.log[snapAt-3:]...)
	if err := fresh.ApplyBatch(entries); err != nil {
		t.Fatal(err)
	}
	if publishes != 1 {
		t.Fatalf("%d publishes for one batch", publishes)
	}
	checkImage(t, fresh.Image(), h.c.Image())
	if dump(fresh.Image()) != dump(h.p.Image()) {
		t.Fatalf("snapshot + tail:\n%s\nincremental:\n%s", dump(fresh.Image()), dump(h.p.Image()))
	}

	// The running publisher receives the newest snapshot: nothing changes, so every topic and
	// broker keeps its pointer.
	prev := h.p.Image()
	if err := h.p.ApplyBatch([]Entry{{Offset: h.offset + 1, Snapshot: snapshotAt(t, h, h.offset+1)}}); err != nil {
		t.Fatal(err)
	}
	next := h.p.Image()
	if next.Offset != h.offset+1 {
		t.Fatalf("offset %d after a snapshot at %d", next.Offset, h.offset+1)
	}
	for n, tp := range prev.Topics {
		if next.Topics[n] != tp {
			t.Fatalf("topic %s rebuilt by a snapshot that does not change it", n)
		}
	}
	for id, b := range prev.Brokers {
		if next.Brokers[id] != b {
			t.Fatalf("broker %d rebuilt by a snapshot that does not change it", id)
		}
	}
	if !sameMap(next.NodeConfigs[1], prev.NodeConfigs[1]) {
		t.Fatal("broker configs rebuilt by a snapshot that does not change them")
	}

	// An older snapshot is ignored; a corrupt one is an error and changes nothing.
	if err := h.p.ApplyBatch([]Entry{{Offset: snapAt, Snapshot: snap}}); err != nil || h.p.Image() != next {
		t.Fatalf("old snapshot: %v, image replaced %v", err, h.p.Image() != next)
	}
	bad := slices.Clone(snap)
	bad[len(bad)/2] ^= 0xff
	if err := fresh.ApplyBatch([]Entry{{Offset: h.offset + 5, Snapshot: bad}}); !errors.Is(err, state.ErrCorruptRecord) {
		t.Fatalf("corrupt snapshot: %v", err)
	}
}

// snapshotAt is the controller's snapshot with its offset moved to off (as if empty entries
// had been committed up to it).
func snapshotAt(t *testing.T, h *harness, off int64) []byte {
	t.Helper()
	c := rebuildController(t, h)
	if err := c.Apply(off, nil); err != nil {
		t.Fatal(err)
	}
	return c.Snapshot()
}

// WaitForOffset returns once the offset is published and its subscribers ran, and gives up
// with the context.
func TestPublisherWaitForOffset(t *testing.T) {
	p := NewPublisher()
	var seen int64 = -1
	p.Subscribe(func(_, next *Image) { seen = next.Offset })
	if err := p.WaitForOffset(context.Background(), -1); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		err := p.WaitForOffset(context.Background(), 3)
		if err == nil && (p.Image().Offset < 3 || seen < 3) {
			err = errors.New("returned before offset 3 was published and seen by subscribers")
		}
		done <- err
	}()
	for off := int64(1); off <= 2; off++ {
		if err := p.Apply(off, nil); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("returned at offset %d: %v", off, err)
		default:
		}
	}
	if err := p.Apply(3, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitForOffset did not return after offset 3 was published")
	}

	ctx, cancel := context.WithCancel(context.Background())
	go cancel()
	if err := p.WaitForOffset(ctx, 100); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
}

// Readers walk published images while the applying goroutine publishes new ones, without
// locks; they never see an image go back (run with -race to check nothing published is
// written).
func TestPublisherConcurrentReaders(t *testing.T) {
	h := newHarness(t)
	for id := int32(1); id <= 3; id++ {
		h.register(id)
	}
	h.createTopic("t", 8, 3)
	stop := make(chan struct{})
	errc := make(chan error, 2)
	for range 2 {
		go func() {
			last := int64(-1)
			for {
				select {
				case <-stop:
					errc <- nil
					return
				default:
				}
				im := h.p.Image()
				if im.Offset < last {
					errc <- fmt.Errorf("image offset went back from %d to %d", last, im.Offset)
					return
				}
				last = im.Offset
				_ = dump(im)
			}
		}()
	}
	for i := range 200 {
		tp := h.p.Image().Topic("t")
		h.apply([]state.Record{isrFlip(tp, int32(i%8))})
	}
	close(stop)
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}
