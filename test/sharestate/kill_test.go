// Package sharestate kills brokers of a three-node cluster under a share group (KIP-932)
// and checks that share-partition state, kept in __share_group_state by the share
// coordinator, survives: acknowledged records never come back, records acquired and not
// acknowledged do, and none is lost.
package sharestate

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/share"
	"github.com/gregor-project/gregor/internal/testutil"
	"github.com/gregor-project/gregor/test/replication"
)

const (
	topic       = "jobs"
	statePartNs = 3 // share.coordinator.state.topic.num.partitions here
	ackAccept   = 1
)

// member is one share group member speaking ShareFetch and ShareAcknowledge by hand to the
// partition's leader, as Kafka's share consumer does.
type member struct {
	t       *testing.T
	c       *testutil.Cluster
	group   string
	id      string
	topicID [16]byte
	node    int32 // the leader its share session is open on
	session int32
}

type rec struct {
	off        int64
	deliveries int16
}

func request[R kmsg.Response](t *testing.T, c *testutil.Cluster, node int32, req kmsg.Request) (R, error) {
	t.Helper()
	var zero R
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Node(node).ClientAddr()), kgo.RequestRetries(0))
	if err != nil {
		return zero, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return zero, err
	}
	return resp.(R), nil
}

// fetch sends one ShareFetch (opening the session on m.node at epoch 0) with acks, waiting
// up to waitMs for records; it returns the records acquired, the partition's error and its
// acknowledgement error.
func (m *member) fetch(acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch, waitMs int32) ([]rec, int16, int16) {
	t := m.t
	t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	g, id := m.group, m.id
	req.Version, req.GroupID, req.MemberID = 1, &g, &id
	req.ShareSessionEpoch, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords = m.session, waitMs, 1, 1<<20, 100
	req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: m.topicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0, AcknowledgementBatches: acks}}}}
	resp, err := request[*kmsg.ShareFetchResponse](t, m.c, m.node, req)
	if err != nil {
		t.Fatalf("share fetch of %s on node %d: %v", m.id, m.node, err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("share fetch of %s on node %d: %v", m.id, m.node, kerr.ErrorForCode(resp.ErrorCode))
	}
	m.session++
	var out []rec
	var perr, aerr int16
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			perr, aerr = rp.ErrorCode, rp.AcknowledgeErrorCode
			for _, a := range rp.AcquiredRecords {
				for off := a.FirstOffset; off <= a.LastOffset; off++ {
					out = append(out, rec{off, a.DeliveryCount})
				}
			}
		}
	}
	return out, perr, aerr
}

// collect fetches until n records are acquired; a partition error (the share-partition's
// state not available yet while its coordinator is elected) is retried.
func (m *member) collect(n int) []rec {
	m.t.Helper()
	var got []rec
	for tries := 0; len(got) < n; tries++ {
		if tries == 120 {
			m.t.Fatalf("%s acquired %v, want %d records", m.id, got, n)
		}
		more, perr, _ := m.fetch(nil, 500)
		if perr != 0 && perr != kerr.NotLeaderForPartition.Code {
			m.t.Fatalf("share fetch of %s: %v", m.id, kerr.ErrorForCode(perr))
		}
		got = append(got, more...)
	}
	return got
}

// accept acknowledges [first, last] with ACCEPT, piggybacked on share fetches (which wait
// up to their max wait when nothing is to be acquired), until the acknowledgement is
// answered without error: an answered ACCEPT is durable on the share coordinator.
func (m *member) accept(first, last int64) {
	m.t.Helper()
	for tries := 0; ; tries++ {
		if tries == 60 {
			m.t.Fatalf("accept %d-%d by %s never succeeded", first, last, m.id)
		}
		acks := []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{{FirstOffset: first, LastOffset: last, AcknowledgeTypes: []int8{ackAccept}}}
		more, _, aerr := m.fetch(acks, 500)
		if len(more) > 0 {
			m.t.Fatalf("%s acquired %v while only its own records were left", m.id, more)
		}
		if aerr == 0 {
			return
		}
		if aerr == kerr.InvalidRecordState.Code {
			m.t.Fatalf("accept %d-%d by %s: its records are no longer held", first, last, m.id)
		}
	}
}

func offsets(rs []rec) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.off)
	}
	return out
}

func span(first, last int64) []int64 {
	var out []int64
	for o := first; o <= last; o++ {
		out = append(out, o)
	}
	return out
}

// checkRedelivered fails unless rs are exactly offsets [first, last], each with delivery
// count deliveries, none of them already accepted.
func checkRedelivered(t *testing.T, rs []rec, first, last int64, deliveries int16, accepted map[int64]bool, when string) {
	t.Helper()
	for _, r := range rs {
		if accepted[r.off] {
			t.Fatalf("%s: accepted offset %d delivered again (%v)", when, r.off, rs)
		}
	}
	if !slices.Equal(offsets(rs), span(first, last)) {
		t.Fatalf("%s: delivered %v, want offsets %d-%d", when, rs, first, last)
	}
	for _, r := range rs {
		if r.deliveries != deliveries {
			t.Fatalf("%s: delivered %v, want delivery count %d", when, rs, deliveries)
		}
	}
}

// kill SIGKILLs node and waits until topic's partition 0 and the share-partition's
// __share_group_state partition are led by another broker.
func kill(t *testing.T, c *testutil.Cluster, node, statePart int32) {
	t.Helper()
	c.Node(node).Kill()
	away := func(s replication.PartitionState) bool { return s.Leader >= 0 && s.Leader != node }
	replication.WaitPartition(t, c, topic, 0, time.Minute, away, "a leader other than the killed node")
	replication.WaitPartition(t, c, share.StateTopic, statePart, time.Minute, away, "a leader other than the killed node")
}

// restart starts node again and waits for both partitions' ISR to be full.
func restart(t *testing.T, c *testutil.Cluster, node, statePart int32) {
	t.Helper()
	c.Node(node).Start()
	replication.WaitPartition(t, c, topic, 0, time.Minute, replication.PartitionState.FullISR, "a full ISR")
	replication.WaitPartition(t, c, share.StateTopic, statePart, time.Minute, replication.PartitionState.FullISR, "a full ISR")
}

func produce(t *testing.T, c *testutil.Cluster, from, n int) {
	t.Helper()
	p := c.Client(t, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, kgo.StringRecord(fmt.Sprint(from+i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// The partition's leader is killed with SIGKILL, then the share coordinator's broker, then
// the leader again, with replication factor 3 everywhere: after each kill the records
// accepted before it never come back, those acquired and not acknowledged are delivered
// again with their delivery count kept, and at the end every record was accepted exactly
// once and new records are delivered from where the share-partition stood.
func TestShareStateSurvivesKills(t *testing.T) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3, Sets: []string{
		fmt.Sprintf("share.coordinator.state.topic.num.partitions=%d", statePartNs),
		"group.share.record.lock.duration.ms=3000", "group.share.min.record.lock.duration.ms=1000",
	}})
	st := replication.CreateTopic(t, c, topic, 3, map[string]string{"min.insync.replicas": "2"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	md, err := kadm.NewClient(c.Client(t)).Metadata(ctx, topic)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	topicID := [16]byte(md.Topics[topic].ID)

	// A first share fetch creates __share_group_state; the group is then named so that its
	// share coordinator is not the partition's leader, which writes and reads its state
	// with WriteShareGroupState and ReadShareGroupState.
	warm := &member{t: t, c: c, group: "warm-up", id: "warm-up", topicID: topicID, node: st.Leader}
	for tries := 0; ; tries++ {
		if tries == 120 {
			t.Fatal("the warm-up share-partition never started")
		}
		if _, perr, _ := warm.fetch(nil, 500); perr == 0 {
			break
		}
	}
	var group string
	var statePart int32
	for i := 0; group == ""; i++ {
		if i == 100 {
			t.Fatalf("every %s partition is led by the partition's leader %d", share.StateTopic, st.Leader)
		}
		g := fmt.Sprintf("durable-workers-%d", i)
		p := share.StatePartitionFor(share.StateKey(share.Key{Group: g, Topic: topicID}), statePartNs)
		s := replication.WaitPartition(t, c, share.StateTopic, p, time.Minute, replication.PartitionState.FullISR, "a full ISR")
		if s.Leader != st.Leader {
			group, statePart = g, p
		}
	}
	newMember := func(i int, node int32) *member {
		return &member{t: t, c: c, group: group, id: fmt.Sprintf("member-%d", i), topicID: topicID, node: node}
	}
	accepted := map[int64]bool{}

	// The share-partition starts at the high watermark (0) on its first fetch, which makes
	// that start durable; then 20 records are acquired and the first 10 accepted.
	m := newMember(1, st.Leader)
	for tries := 0; ; tries++ {
		if tries == 120 {
			t.Fatal("the share-partition never started")
		}
		got, perr, _ := m.fetch(nil, 500)
		if len(got) != 0 {
			t.Fatalf("acquired %v before any record was produced", got)
		}
		if perr == 0 {
			break
		}
		if perr != kerr.NotLeaderForPartition.Code {
			t.Fatalf("first share fetch: %v", kerr.ErrorForCode(perr))
		}
	}
	produce(t, c, 0, 20)
	got := m.collect(20)
	checkRedelivered(t, got, 0, 19, 1, accepted, "first delivery")
	m.accept(0, 9)
	for o := range int64(10) {
		accepted[o] = true
	}

	// Kill the partition's leader: the new leader reads the state back.
	first := st.Leader
	kill(t, c, first, statePart)
	st = replication.WaitPartition(t, c, topic, 0, time.Minute, func(s replication.PartitionState) bool { return s.Leader >= 0 && s.Leader != first }, "a new leader")
	m = newMember(2, st.Leader)
	got = m.collect(10)
	checkRedelivered(t, got, 10, 19, 2, accepted, "after the leader was killed")
	m.accept(10, 14)
	for o := int64(10); o < 15; o++ {
		accepted[o] = true
	}
	restart(t, c, first, statePart)

	// Kill the share coordinator's broker (which may also lead the partition): 15-19, held
	// by member-2, come back (from the state read back by a new leader, or when member-2's
	// locks expire on a leader that stayed), and the ACCEPT of them is made durable on the
	// new coordinator.
	coord := replication.WaitPartition(t, c, share.StateTopic, statePart, time.Minute, replication.PartitionState.FullISR, "a full ISR").Leader
	kill(t, c, coord, statePart)
	st = replication.WaitPartition(t, c, topic, 0, time.Minute, func(s replication.PartitionState) bool { return s.Leader >= 0 && s.Leader != coord }, "a leader")
	m = newMember(3, st.Leader)
	got = m.collect(5)
	checkRedelivered(t, got, 15, 19, 3, accepted, "after the share coordinator was killed")
	m.accept(15, 19)
	for o := int64(15); o < 20; o++ {
		accepted[o] = true
	}
	restart(t, c, coord, statePart)

	// Kill the leader once more: nothing of 0-19 comes back, and records produced now are
	// delivered from offset 20, once each.
	last := st.Leader
	kill(t, c, last, statePart)
	st = replication.WaitPartition(t, c, topic, 0, time.Minute, func(s replication.PartitionState) bool { return s.Leader >= 0 && s.Leader != last }, "a new leader")
	produce(t, c, 20, 5)
	m = newMember(4, st.Leader)
	got = m.collect(5)
	checkRedelivered(t, got, 20, 24, 1, accepted, "after the last kill")
}
