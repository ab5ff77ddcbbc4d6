package compaction

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// TestCoordinatorFailoverAfterCompaction commits the offsets of 3 groups on 4 partitions
// thousands of times in a 3-node cluster whose __consumer_offsets (RF 3, 16 KiB segments)
// every replica compacts; once each replica's copy is down to a few segments, the
// coordinator is killed (-9), and its successor, loading only what survived on its own
// replica, serves exactly the last offset committed for every group and partition (the last
// commits end at different rounds per group and partition, so an older surviving version
// would show).
func TestCoordinatorFailoverAfterCompaction(t *testing.T) {
	const segment = 16384
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3, Sets: append([]string{
		"offsets.topic.num.partitions=1", "offsets.topic.replication.factor=3",
		"offsets.topic.segment.bytes=" + strconv.Itoa(segment),
	}, cleanerSets...)})
	cl := c.Client(t)
	c.WaitFor(t, 30*time.Second, func() bool {
		req := kmsg.NewPtrMetadataRequest()
		resp, err := req.RequestWith(ctxT(t, 5*time.Second), cl)
		return err == nil && len(resp.Brokers) == 3
	}, "3 brokers in metadata")
	ctx := ctxT(t, 2*time.Minute)
	adm := kadm.NewClient(cl)
	if resp, err := adm.CreateTopic(ctx, 4, 3, nil, "orders"); err != nil || resp.Err != nil {
		t.Fatalf("create orders: %v %v", err, resp.Err)
	}
	groups := []string{"g0", "g1", "g2"}
	commit := func(g string, offs kadm.Offsets) error {
		resp, err := adm.CommitOffsets(ctx, g, offs)
		if err == nil {
			err = resp.Error()
		}
		return err
	}
	waitFor(t, 20*time.Second, "the coordinator taking commits", func() (bool, string) {
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 0, LeaderEpoch: -1})
		err := commit("g0", offs)
		return err == nil, fmt.Sprint(err)
	})
	// Round i commits offset i*100+p for partition p of every group whose rounds are not over:
	// group gi's partition p stops after rounds - 37*(i*4+p).
	const rounds = 1000
	last := map[string]map[int32]int64{}
	for i := 1; i <= rounds; i++ {
		for gi, g := range groups {
			var offs kadm.Offsets
			for p := range int32(4) {
				if i <= rounds-37*(gi*4+int(p)) {
					offs.Add(kadm.Offset{Topic: "orders", Partition: p, At: int64(i)*100 + int64(p), LeaderEpoch: -1})
					if last[g] == nil {
						last[g] = map[int32]int64{}
					}
					last[g][p] = int64(i)*100 + int64(p)
				}
			}
			if len(offs) == 0 {
				continue
			}
			if err := commit(g, offs); err != nil {
				t.Fatalf("round %d, %s: %v", i, g, err)
			}
		}
	}
	r := adm.FindGroupCoordinators(ctx, "g0")["g0"]
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	old := r.NodeID
	// Every replica's copy compacted: a few segments left of the ~1 MiB the commits wrote.
	for _, n := range c.Nodes() {
		dir := filepath.Join(n.Dir, "__consumer_offsets-0")
		waitFor(t, 30*time.Second, fmt.Sprintf("node %d compacting __consumer_offsets", n.ID), func() (bool, string) {
			b := partitionLogBytes(t, dir)
			return b <= 4*segment, fmt.Sprintf("%d bytes: %s", b, segmentFiles(dir))
		})
		recs, err := replicaRecords(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("node %d: __consumer_offsets holds %d records (%d bytes) at offsets up to %d", n.ID, len(recs), partitionLogBytes(t, dir), recs[len(recs)-1].off)
	}

	c.Node(old).Kill()
	var others []string
	for _, n := range c.Nodes() {
		if n.ID != old {
			others = append(others, n.ClientAddr())
		}
	}
	for _, g := range groups {
		var fetched kadm.OffsetResponses
		waitFor(t, 30*time.Second, "the new coordinator serving "+g, func() (bool, string) {
			// A new client each time: one remembers the killed coordinator until its
			// session expires and the group moves.
			cl, err := kgo.NewClient(kgo.SeedBrokers(others...))
			if err != nil {
				return false, err.Error()
			}
			defer cl.Close()
			fetched, err = kadm.NewClient(cl).FetchOffsets(ctxT(t, 5*time.Second), g)
			if err == nil {
				err = fetched.Error()
			}
			return err == nil, fmt.Sprint(err)
		})
		for p := range int32(4) {
			o, ok := fetched.Lookup("orders", p)
			if want := last[g][p]; !ok || o.Err != nil || o.At != want {
				t.Errorf("%s orders-%d after the failover: %+v (found %v), want %d", g, p, o, ok, want)
			}
		}
	}
	adm = kadm.NewClient(c.Client(t, kgo.SeedBrokers(others...)))
	if r := adm.FindGroupCoordinators(ctx, "g0")["g0"]; r.Err != nil || r.NodeID == old {
		t.Fatalf("coordinator after killing %d: %d (%v)", old, r.NodeID, r.Err)
	}
}
