package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/controller/quorum"
	"github.com/gregor-project/gregor/internal/controller/rpc"
	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/wire"
)

// readUntil reads src from offset from until pred holds for the records read so far.
func readUntil(t *testing.T, src LogSource, from int64, pred func(recs []state.Record) bool) ([]Entry, int64) {
	t.Helper()
	var all []Entry
	var recs []state.Record
	deadline := time.Now().Add(10 * time.Second)
	for !pred(recs) {
		if time.Now().After(deadline) {
			t.Fatalf("metadata log from %d never satisfied the condition (%d entries read)", from, len(all))
		}
		ents, err := src.Read(testCtx(t), from, 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Offset < from-1 || (e.Snapshot == nil && e.Offset < from) {
				t.Fatalf("entry %d read from %d", e.Offset, from)
			}
			all = append(all, e)
			recs = append(recs, e.Records...)
			from = e.Offset + 1
		}
	}
	return all, from
}

func topicRecords(name string, rf int) func([]state.Record) bool {
	return func(recs []state.Record) bool {
		var id state.UUID
		found := false
		for _, r := range recs {
			switch r := r.(type) {
			case *state.TopicRecord:
				if r.Name == name {
					id, found = r.TopicID, true
				}
			case *state.PartitionRecord:
				if found && r.TopicID == id && len(r.Replicas) == rf && len(r.ISR) == rf {
					return true
				}
			}
		}
		return false
	}
}

// Brokers register and heartbeat through the client, a topic created with RF 3 is read back
// from a follower's metadata log, and when the active controller dies the client finds the
// new one.
func TestClientFollowsActiveController(t *testing.T) {
	c := newCluster(t, 3, nil)
	a := c.waitActive()
	cl := c.client()
	for id := range int32(3) {
		registerUnfenced(t, cl, id)
	}
	if cl.ActiveController() != int32(a) {
		t.Fatalf("client thinks %d is active, controller %d is", cl.ActiveController(), a)
	}
	if rt := createTopic(t, cl, "orders", 2, 3); rt.ErrorCode != 0 || rt.NumPartitions != 2 || rt.ReplicationFactor != 3 {
		t.Fatalf("create: %v %+v", kerr.ErrorForCode(rt.ErrorCode), rt)
	}
	if rt := createTopic(t, cl, "too-wide", 1, 4); rt.ErrorCode != kerr.InvalidReplicationFactor.Code {
		t.Fatalf("RF 4 on 3 brokers: %v", kerr.ErrorForCode(rt.ErrorCode))
	}

	follower := (a + 1) % 3
	fl := c.client(c.voters[follower]).MetadataLog()
	readUntil(t, fl, 1, topicRecords("orders", 3))

	c.stop(a)
	if rt := createTopic(t, cl, "after-failover", 1, 3); rt.ErrorCode != 0 {
		t.Fatalf("create after failover: %v", kerr.ErrorForCode(rt.ErrorCode))
	}
	if got := cl.ActiveController(); got == int32(a) || got < 0 {
		t.Fatalf("active controller after failover: %d (old %d)", got, a)
	}
	readUntil(t, cl.MetadataLog(), 1, topicRecords("after-failover", 3))
}

func TestInconsistentClusterID(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.waitActive()
	cl := c.client()
	if r := register(t, cl, 7, "another-cluster"); r.ErrorCode != kerr.InconsistentClusterID.Code {
		t.Fatalf("registration with another cluster id: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// A second process with the same node id and a live session is refused.
	registerUnfenced(t, cl, 1)
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID, req.ClusterID, req.IncarnationID = 1, testCluster, [16]byte{9, 9}
	r, err := cl.Request(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if code := r.(*kmsg.BrokerRegistrationResponse).ErrorCode; code != kerr.DuplicateBrokerRegistration.Code {
		t.Fatalf("duplicate registration: %v", kerr.ErrorForCode(code))
	}
}

// A follower answers controller requests with NOT_CONTROLLER in every item and names the
// active controller in DescribeQuorum.
func TestFollowerAnswersNotController(t *testing.T) {
	c := newCluster(t, 3, nil)
	a := c.waitActive()
	f := (a + 1) % 3
	v := c.voters[f]
	deadline := time.Now().Add(10 * time.Second)
	for c.ctrls[f].node.Status().Leader != int32(a) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	conn, err := wire.Dial(testCtx(t), net.JoinHostPort(v.Host, itoa(v.Port)), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dq := kmsg.NewPtrDescribeQuorumRequest()
	dq.SetVersion(2)
	dq.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: rpc.MetadataTopic, Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
	r, err := conn.Request(testCtx(t), dq)
	if err != nil {
		t.Fatal(err)
	}
	if p := r.(*kmsg.DescribeQuorumResponse).Topics[0].Partitions[0]; p.LeaderID != int32(a) || len(p.CurrentVoters) != 3 {
		t.Fatalf("DescribeQuorum from a follower: leader %d voters %d, want leader %d", p.LeaderID, len(p.CurrentVoters), a)
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.SetVersion(7)
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "a", NumPartitions: 1, ReplicationFactor: 1}, {Topic: "b", NumPartitions: 1, ReplicationFactor: 1}}
	r, err = conn.Request(testCtx(t), ct)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range r.(*kmsg.CreateTopicsResponse).Topics {
		if rt.ErrorCode != kerr.NotController.Code {
			t.Fatalf("CreateTopics on a follower: %s got %v", rt.Topic, kerr.ErrorForCode(rt.ErrorCode))
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// With frequent snapshots a reader from offset 1 gets a snapshot, then entries, and
// replaying them gives the controller's image; both the remote and the in-process source.
func TestMetadataLogSnapshot(t *testing.T) {
	c := newCluster(t, 3, func(cfg *quorum.Config) { cfg.SnapshotEntries, cfg.CatchUpEntries = 5, 1 })
	a := c.waitActive()
	cl := c.client()
	registerUnfenced(t, cl, 0)
	for i := range 12 {
		if rt := createTopic(t, cl, "t"+itoa(i), 1, 1); rt.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(rt.ErrorCode))
		}
	}
	c.waitApplied(c.ctrls[a].node.Status().Applied)
	f := (a + 1) % 3
	sources := map[string]LogSource{
		"remote": c.client(c.voters[f]).MetadataLog(),
		"local":  LocalLog(c.ctrls[f].node),
	}
	for name, src := range sources {
		t.Run(name, func(t *testing.T) {
			ents, err := src.Read(testCtx(t), 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) == 0 || ents[0].Snapshot == nil {
				t.Fatalf("read from 1 after compaction: no snapshot first (%d entries)", len(ents))
			}
			im, err := state.Restore(ents[0].Snapshot)
			if err != nil {
				t.Fatal(err)
			}
			from := ents[0].Offset + 1
			for _, e := range ents[1:] {
				if e.Snapshot != nil || e.Offset < from {
					t.Fatalf("entry %d after the snapshot at %d", e.Offset, ents[0].Offset)
				}
				if err := im.Apply(e.Offset, e.Records); err != nil {
					t.Fatal(err)
				}
				from = e.Offset + 1
			}
			for {
				more, err := src.Read(testCtx(t), from, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(more) == 0 {
					break
				}
				for _, e := range more {
					if err := im.Apply(e.Offset, e.Records); err != nil {
						t.Fatal(err)
					}
					from = e.Offset + 1
				}
			}
			var want []byte
			if err := c.ctrls[f].node.Read(testCtx(t), func(ctrl *state.Controller) { want = ctrl.Snapshot() }); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(im.Snapshot(), want) {
				t.Fatalf("replayed image differs from the controller's (offsets %d)", im.Offset())
			}
			if im.Topic("t11") == nil {
				t.Fatal("replayed image lacks the last topic")
			}
		})
	}
}

// A remote read parked on the log returns when an entry commits, not after maxWait.
func TestMetadataLogLongPoll(t *testing.T) {
	c := newCluster(t, 3, nil)
	a := c.waitActive()
	cl := c.client()
	registerUnfenced(t, cl, 0)
	c.waitApplied(c.ctrls[a].node.Status().Applied)
	f := (a + 1) % 3
	src := c.client(c.voters[f]).MetadataLog()
	_, from := readUntil(t, src, 1, func(recs []state.Record) bool {
		return slices.ContainsFunc(recs, func(r state.Record) bool { _, ok := r.(*state.BrokerRegistrationChangeRecord); return ok })
	})
	start := time.Now()
	if ents, err := src.Read(testCtx(t), from, 200*time.Millisecond); err != nil || len(ents) != 0 || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("idle read: %d entries, %v, after %v", len(ents), err, time.Since(start))
	}
	type result struct {
		ents []Entry
		err  error
	}
	done := make(chan result, 1)
	go func() { // reports through done only: it may outlive a test that failed first
		ents, err := src.Read(context.Background(), from, 30*time.Second)
		done <- result{ents, err}
	}()
	createTopic(t, cl, "wake", 1, 1)
	select {
	case r := <-done:
		if r.err != nil || len(r.ents) == 0 || r.ents[0].Offset < from {
			t.Fatalf("long poll returned %+v, %v", r.ents, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("long poll not woken by a commit")
	}
}

// Garbage on the controller port closes that connection; raft and the controller APIs keep
// working.
func TestGarbageOnControllerPort(t *testing.T) {
	c := newCluster(t, 3, nil)
	a := c.waitActive()
	for _, junk := range []string{"\xff\xff\xff\xffjunkjunk", "GRFT\x07not a hello at all", "\x00\x00\x00\x08\x7f\x7f\x00\x00\x00\x00\x00\x00"} {
		for _, v := range c.voters {
			conn, err := net.Dial("tcp", net.JoinHostPort(v.Host, itoa(v.Port)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Write([]byte(junk)); err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = io.ReadAll(conn)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("controller %d kept a connection that sent %q", v.ID, junk)
			}
			conn.Close()
		}
	}
	cl := c.client()
	registerUnfenced(t, cl, 0)
	if rt := createTopic(t, cl, "still-works", 1, 1); rt.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(rt.ErrorCode))
	}
	c.waitApplied(c.ctrls[a].node.Status().Applied)
}
