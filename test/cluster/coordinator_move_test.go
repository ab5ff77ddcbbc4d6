package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Offsets committed through a group's coordinator survive the coordinator moving: SIGTERM of
// the broker leading the group's __consumer_offsets partition moves that leadership to another
// member of its ISR, whose coordinator loads the group from its replica and serves the
// offsets, and takes commits in its own leader epoch.
func TestCommittedOffsetsSurviveCoordinatorMove(t *testing.T) {
	start := time.Now()
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3, Sets: []string{
		"offsets.topic.num.partitions=1", "offsets.topic.replication.factor=3",
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// StartCluster returns once the nodes listen, not once they are registered: an RF 3
	// topic before then is INVALID_REPLICATION_FACTOR.
	waitSameView(ctx, t, nodeClients(t, c), 30*time.Second, func(v clusterView) error { return wantBrokers(v, []int32{1, 2, 3}) })
	adm := kadm.NewClient(c.Client(t))
	if resp, err := adm.CreateTopic(ctx, 1, 3, nil, "t"); err != nil || resp.Err != nil {
		t.Fatalf("create t: %v %v", err, resp.Err)
	}
	commit := func(at int64) {
		t.Helper()
		offsets := kadm.Offsets{}
		offsets.Add(kadm.Offset{Topic: "t", Partition: 0, At: at, LeaderEpoch: -1})
		resp, err := adm.CommitOffsets(ctx, "g", offsets)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("commit %d: %v", at, err)
		}
	}
	committed := func() int64 {
		t.Helper()
		got, err := adm.FetchOffsets(ctx, "g")
		if err != nil {
			t.Fatalf("fetch offsets: %v", err)
		}
		o, ok := got.Lookup("t", 0)
		if !ok || o.Err != nil {
			t.Fatalf("fetch offsets: %+v (found %v)", o, ok)
		}
		return o.At
	}
	coordinator := func() int32 {
		t.Helper()
		r := adm.FindGroupCoordinators(ctx, "g")["g"]
		if r.Err != nil {
			t.Fatalf("find coordinator: %v", r.Err)
		}
		return r.NodeID
	}

	commit(42)
	old := coordinator()
	if err := c.Node(old).Stop(); err != nil {
		t.Fatalf("SIGTERM of coordinator %d: %v", old, err)
	}
	// A client that does not know the old coordinator (the first one would dial it again).
	var others []string
	for _, n := range c.Nodes() {
		if n.ID != old {
			others = append(others, n.ClientAddr())
		}
	}
	adm = kadm.NewClient(c.Client(t, kgo.SeedBrokers(others...)))
	if got := committed(); got != 42 {
		t.Fatalf("committed %d after the coordinator moved, want 42", got)
	}
	if now := coordinator(); now == old {
		t.Fatalf("coordinator still %d after it stopped", now)
	}
	commit(43)
	if got := committed(); got != 43 {
		t.Fatalf("committed %d through the new coordinator, want 43", got)
	}
	t.Logf("coordinator %d stopped; offsets served by its successor (%v in all)", old, time.Since(start))
}
