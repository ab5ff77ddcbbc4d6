package quorum

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gregor-project/gregor/internal/controller/state"
)

func TestRebalancerSchedule(t *testing.T) {
	var r rebalancer
	const iv = 1000
	if r.due(5000, 3, iv) {
		t.Fatal("the first call of a term only schedules")
	}
	for _, now := range []int64{5000, 5999} {
		if r.due(now, 3, iv) {
			t.Fatalf("due at %d, scheduled for 6000", now)
		}
	}
	if !r.due(6000, 3, iv) {
		t.Fatal("not due at 6000")
	}
	if r.due(6500, 3, iv) || !r.due(7000, 3, iv) {
		t.Fatal("the next check is not one interval after the last")
	}
	// A new term (another active controller, or this one again) waits a whole interval.
	if r.due(9000, 4, iv) || r.due(9999, 4, iv) || !r.due(10000, 4, iv) {
		t.Fatal("a new term did not start a fresh interval")
	}
}

func TestBrokerImbalanceExceeds(t *testing.T) {
	for _, tc := range []struct {
		b    BrokerImbalance
		pct  int
		want bool
	}{
		{BrokerImbalance{Preferred: 10, NotLeading: 1}, 10, false}, // exactly 10%: not above
		{BrokerImbalance{Preferred: 10, NotLeading: 2}, 10, true},
		{BrokerImbalance{Preferred: 3, NotLeading: 1}, 33, true}, // 33.3% > 33%
		{BrokerImbalance{Preferred: 2, NotLeading: 1}, 50, false},
		{BrokerImbalance{Preferred: 2, NotLeading: 2}, 50, true},
		{BrokerImbalance{Preferred: 0, NotLeading: 0}, 0, false},
		{BrokerImbalance{Preferred: 1, NotLeading: 1}, 100, false},
	} {
		if got := tc.b.Exceeds(tc.pct); got != tc.want {
			t.Errorf("%+v over %d%%: %v, want %v", tc.b, tc.pct, got, tc.want)
		}
	}
}

// countingClock is a fake clock that counts its reads: the run loop reads it once per
// iteration while active, so a number of reads bounds from below how many loop iterations
// (ticks, on an idle one-node quorum) have passed.
type countingClock struct {
	ns    atomic.Int64
	reads atomic.Int64
}

func (c *countingClock) now() time.Time {
	c.reads.Add(1)
	return time.Unix(0, c.ns.Load())
}

// waitReads waits until the clock has been read n more times.
func (c *countingClock) waitReads(t *testing.T, n int64) {
	t.Helper()
	want := c.reads.Load() + n
	deadline := time.Now().Add(10 * time.Second)
	for c.reads.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("the run loop read the clock %d times, want %d", c.reads.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// rebalanceFixture is a one-node quorum with brokers 0-2 and topic t (6 partitions, RF 3):
// every broker is the preferred leader of two partitions.
func rebalanceFixture(t *testing.T, enable bool, pct int) (*Node, *countingClock) {
	clock := &countingClock{}
	clock.ns.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	c := newCluster(t, 1, func(cfg *Config) {
		cfg.Now = clock.now
		cfg.State.SessionTimeoutMs = int64(time.Hour / time.Millisecond) // the clock jumps
		cfg.AutoLeaderRebalance = enable
		cfg.ImbalanceCheckInterval = 10 * time.Second
		cfg.ImbalancePct = pct
	})
	n := c.nodes[c.waitActive(10*time.Second)]
	for id := range int32(3) {
		registerBroker(t, n, id)
	}
	if _, err := createTopic(ctx(t), n, "t", 6, 3); err != nil {
		t.Fatal(err)
	}
	for _, b := range imbalance(t, n) {
		if b.Preferred != 2 || b.NotLeading != 0 {
			t.Fatalf("after creation: %+v", imbalance(t, n))
		}
	}
	return n, clock
}

func imbalance(t *testing.T, n *Node) []BrokerImbalance {
	t.Helper()
	var out []BrokerImbalance
	if err := n.Read(ctx(t), func(c *state.Controller) { out = LeaderImbalance(c.Image()) }); err != nil {
		t.Fatal(err)
	}
	return out
}

// moveLeader makes the second replica lead one partition of t whose preferred leader is
// broker pref (skipping partitions it does not lead) and returns the partition.
func moveLeader(t *testing.T, n *Node, pref int32) int32 {
	t.Helper()
	moved, err := Do(ctx(t), n, func(c *state.Controller, _ int64) ([]state.Record, int32) {
		tp := c.Image().Topic("t")
		for i, p := range tp.Partitions {
			if p.Replicas[0] == pref && p.Leader == pref {
				return []state.Record{&state.PartitionChangeRecord{
					TopicID: tp.ID, Partition: int32(i), PartitionEpoch: p.PartitionEpoch,
					Fields: state.ChangeLeader, Leader: p.Replicas[1], BumpLeaderEpoch: true,
				}}, int32(i)
			}
		}
		return nil, -1
	})
	if err != nil || moved < 0 {
		t.Fatalf("moving a leadership of broker %d: %v (partition %d)", pref, err, moved)
	}
	return moved
}

func leaders(t *testing.T, n *Node) []int32 {
	t.Helper()
	var out []int32
	if err := n.Read(ctx(t), func(c *state.Controller) {
		for _, p := range c.Image().Topic("t").Partitions {
			out = append(out, p.Leader)
		}
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func preferred(t *testing.T, n *Node) []int32 {
	t.Helper()
	var out []int32
	if err := n.Read(ctx(t), func(c *state.Controller) {
		for _, p := range c.Image().Topic("t").Partitions {
			out = append(out, p.Replicas[0])
		}
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// The active controller moves leadership back to the preferred replicas once a broker's
// imbalance exceeds the percentage, at the first check after the interval, and not before.
func TestAutoLeaderRebalance(t *testing.T) {
	n, clock := rebalanceFixture(t, true, 50)
	moveLeader(t, n, 0)
	if b := imbalance(t, n)[0]; b.Broker != 0 || b.NotLeading != 1 {
		t.Fatalf("imbalance %+v", imbalance(t, n))
	}
	// Broker 0 leads 1 of its 2: 50% is not above 50%, so checks change nothing.
	before := leaders(t, n)
	clock.ns.Add(int64(11 * time.Second))
	clock.waitReads(t, 50)
	clock.ns.Add(int64(11 * time.Second))
	clock.waitReads(t, 50)
	if got := leaders(t, n); !slices.Equal(got, before) {
		t.Fatalf("leaders moved at 50%% imbalance: %v -> %v", before, got)
	}
	// 100% is above: but only when the next check is due.
	moveLeader(t, n, 0)
	moved := leaders(t, n)
	clock.waitReads(t, 50)
	if got := leaders(t, n); !slices.Equal(got, moved) {
		t.Fatalf("leaders moved before the check was due: %v -> %v", moved, got)
	}
	off := n.Status().Applied
	clock.ns.Add(int64(11 * time.Second))
	want := preferred(t, n)
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(leaders(t, n), want) {
		if time.Now().After(deadline) {
			t.Fatalf("leaders %v, preferred %v: no rebalance after the interval", leaders(t, n), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n.Status().Applied != off+1 {
		t.Fatalf("the rebalance took %d log entries, want one", n.Status().Applied-off)
	}
	for _, b := range imbalance(t, n) {
		if b.NotLeading != 0 {
			t.Fatalf("after the rebalance: %+v", imbalance(t, n))
		}
	}
	// Balanced: later checks write nothing.
	off = n.Status().Applied
	clock.ns.Add(int64(11 * time.Second))
	clock.waitReads(t, 50)
	if n.Status().Applied != off {
		t.Fatal("a check of a balanced cluster wrote to the log")
	}
}

// With auto.leader.rebalance.enable=false leadership stays where it is.
func TestAutoLeaderRebalanceDisabled(t *testing.T) {
	n, clock := rebalanceFixture(t, false, 10)
	moveLeader(t, n, 0)
	moveLeader(t, n, 1)
	before := leaders(t, n)
	for range 3 {
		clock.ns.Add(int64(11 * time.Second))
		clock.waitReads(t, 50)
	}
	if got := leaders(t, n); !slices.Equal(got, before) {
		t.Fatalf("leaders moved with the rebalance disabled: %v -> %v", before, got)
	}
}
