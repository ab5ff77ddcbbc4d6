package share

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// holder is the test's model of who holds each offset, checked against the Partition.
type holder map[int64]string

// TestPartitionProperty drives a Partition with random acquisitions, acknowledgements,
// member departures and clock steps, and checks after each step that no offset is held by
// two members, that every record the model holds is Acquired by that member, and that the
// window respects MaxLocks. A final drain with only ACCEPTs must acknowledge every record
// exactly once.
func TestPartitionProperty(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { partitionProperty(t, seed) })
	}
}

func partitionProperty(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e37))
	cfg := Config{MaxLocks: 1 + rng.IntN(40), DeliveryLimit: int16(1 + rng.IntN(5)), LockDurationMs: 100}
	members := []string{"a", "b", "c", "d", "e"}
	p := NewPartition(cfg, 10)
	held := holder{}
	accepted := map[int64]int{}
	archived := map[int64]bool{}
	now, hw := int64(0), int64(10)
	for step := 0; step < 400; step++ {
		m := members[rng.IntN(len(members))]
		switch rng.IntN(6) {
		case 0:
			hw += int64(rng.IntN(20))
		case 1:
			for _, run := range p.Acquire(m, now, hw, 1+rng.IntN(15)) {
				for off := run.First; off <= run.Last; off++ {
					if h, ok := held[off]; ok && p.lockOf(off) {
						t.Fatalf("offset %d acquired by %s while %s holds it", off, m, h)
					}
					held[off] = m
				}
			}
		case 2, 3:
			// Acknowledge one offset the member holds (by the model), with a random type.
			for off, h := range held {
				if h != m {
					continue
				}
				typ := []AckType{AckAccept, AckAccept, AckRelease, AckReject}[rng.IntN(4)]
				err := p.Acknowledge(m, off, off, typ, now)
				st, _ := p.StateOf(off)
				if err != nil {
					// Only possible when the lock expired at now.
					if st == Acquired && p.recs[off-p.start].owner == m {
						t.Fatalf("ack of held offset %d refused: %v", off, err)
					}
				} else if typ == AckAccept {
					accepted[off]++
				} else if typ == AckReject {
					archived[off] = true
				}
				delete(held, off)
				break
			}
		case 4:
			p.ReleaseMember(m)
			for off, h := range held {
				if h == m {
					delete(held, off)
				}
			}
		case 5:
			now += int64(rng.IntN(60))
			p.Expire(now)
		}
		// The model's holders must match the partition for locks still alive.
		for off, h := range held {
			st, _ := p.StateOf(off)
			if st != Acquired {
				delete(held, off)
				continue
			}
			if o := p.recs[off-p.start].owner; o != h {
				t.Fatalf("offset %d owned by %s, model says %s", off, o, h)
			}
		}
		checkRestore(t, p)
		if len(p.recs) > cfg.MaxLocks {
			t.Fatalf("window %d exceeds max locks %d", len(p.recs), cfg.MaxLocks)
		}
		if len(p.recs) > 0 && (p.recs[0].state == Acknowledged || p.recs[0].state == Archived) {
			t.Fatalf("start %d not advanced past a finished record", p.start)
		}
		for i := range p.recs {
			if p.recs[i].deliveries > cfg.DeliveryLimit {
				t.Fatalf("offset %d delivered %d times, limit %d", p.start+int64(i), p.recs[i].deliveries, cfg.DeliveryLimit)
			}
		}
	}
	// Drain: every member accepts everything it gets until the window catches up with hw.
	for i := 0; p.Start() < hw; i++ {
		if i > 100000 {
			t.Fatalf("drain stuck at start %d, hw %d", p.Start(), hw)
		}
		now += cfg.LockDurationMs // earlier locks expire
		m := members[i%len(members)]
		for _, run := range p.Acquire(m, now, hw, 7) {
			if err := p.Acknowledge(m, run.First, run.Last, AckAccept, now); err != nil {
				t.Fatal(err)
			}
			for off := run.First; off <= run.Last; off++ {
				accepted[off]++
			}
		}
	}
	for off := int64(10); off < hw; off++ {
		if accepted[off] > 1 {
			t.Fatalf("offset %d accepted %d times", off, accepted[off])
		}
		if accepted[off] == 1 && archived[off] {
			t.Fatalf("offset %d both accepted and rejected", off)
		}
	}
}

// lockOf reports whether off is Acquired now.
func (p *Partition) lockOf(off int64) bool {
	st, _ := p.StateOf(off)
	return st == Acquired
}

// TestPartitionAllAccept: five members sharing one partition, each accepting what it gets,
// together acknowledge every record exactly once and no record is given to two of them.
func TestPartitionAllAccept(t *testing.T) {
	p := NewPartition(Config{MaxLocks: 2000, DeliveryLimit: 5, LockDurationMs: 30000}, 0)
	seen := map[int64]string{}
	for i := 0; p.Start() < 1000; i++ {
		m := fmt.Sprint("m", i%5)
		for _, run := range p.Acquire(m, int64(i), 1000, 13) {
			if run.Deliveries != 1 {
				t.Fatalf("run %+v redelivered", run)
			}
			for off := run.First; off <= run.Last; off++ {
				if h, ok := seen[off]; ok {
					t.Fatalf("offset %d given to %s and %s", off, h, m)
				}
				seen[off] = m
			}
			if err := p.Acknowledge(m, run.First, run.Last, AckAccept, int64(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(seen) != 1000 {
		t.Fatalf("%d records delivered, want 1000", len(seen))
	}
}

// TestPartitionLifecycle checks each transition against Kafka's: RELEASE redelivers at
// once with the delivery count raised, REJECT archives, lock expiry redelivers, and the
// delivery count limit archives a record that keeps failing.
func TestPartitionLifecycle(t *testing.T) {
	p := NewPartition(Config{MaxLocks: 10, DeliveryLimit: 3, LockDurationMs: 100}, 0)
	got := p.Acquire("a", 0, 4, 100)
	if len(got) != 1 || got[0] != (Run{0, 3, 1}) {
		t.Fatalf("first acquire %+v", got)
	}
	if got := p.Acquire("b", 0, 4, 100); len(got) != 0 {
		t.Fatalf("b acquired records a holds: %+v", got)
	}
	if err := p.Acknowledge("b", 0, 0, AckAccept, 0); err != ErrInvalidRecordState {
		t.Fatalf("ack by non-owner: %v", err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(p.Acknowledge("a", 0, 0, AckAccept, 1))
	must(p.Acknowledge("a", 1, 1, AckRelease, 1))
	must(p.Acknowledge("a", 2, 2, AckReject, 1))
	if p.Start() != 1 {
		t.Fatalf("start %d, want 1", p.Start())
	}
	// Offset 1 released: b gets it at once, second delivery. Offset 3 still a's.
	if got := p.Acquire("b", 2, 4, 100); len(got) != 1 || got[0] != (Run{1, 1, 2}) {
		t.Fatalf("after release %+v", got)
	}
	// a's lock on 3 expires at 100: c gets it, second delivery.
	if got := p.Acquire("c", 100, 4, 100); len(got) != 1 || got[0] != (Run{3, 3, 2}) {
		t.Fatalf("after expiry %+v", got)
	}
	// Offset 1 is still b's (its lock ends at 102).
	st, n := p.StateOf(1)
	if st != Acquired || n != 2 {
		t.Fatalf("offset 1: %v %d", st, n)
	}
	// Third delivery of 3, then expiry: limit 3 reached, archived.
	must(p.Acknowledge("c", 3, 3, AckRelease, 101))
	if got := p.Acquire("d", 101, 4, 1); len(got) != 1 || got[0] != (Run{3, 3, 3}) {
		t.Fatalf("third delivery %+v", got)
	}
	p.Expire(1000)
	if st, _ := p.StateOf(3); st != Archived {
		t.Fatalf("offset 3 after limit: %v", st)
	}
	if got := p.Acquire("e", 1000, 4, 100); len(got) != 1 || got[0] != (Run{1, 1, 3}) {
		t.Fatalf("only offset 1 may return: %+v", got)
	}
}

// checkRestore checks that the partition rebuilt from its snapshot equals it, every Acquired
// record Available again with its delivery count kept.
func checkRestore(t *testing.T, p *Partition) {
	t.Helper()
	start, batches := p.Snapshot()
	q := Restore(p.cfg, start, batches)
	if q.Start() != p.Start() || q.End() != p.End() && !(q.End() == q.Start() && p.End() == p.Start()) {
		t.Fatalf("restored window [%d, %d), want [%d, %d)", q.Start(), q.End(), p.Start(), p.End())
	}
	for off := p.Start(); off < p.End(); off++ {
		ps, pn := p.StateOf(off)
		qs, qn := q.StateOf(off)
		if ps == Acquired {
			ps = Available
		}
		if ps != qs || pn != qn {
			t.Fatalf("offset %d restored as %v/%d, want %v/%d", off, qs, qn, ps, pn)
		}
	}
}

// AcquireSkipping archives the offsets skip names (a read_committed group's aborted
// transactions) instead of handing them out: they are never delivered, do not count against
// max, and the start moves past them once nothing before them is in play.
func TestPartitionAcquireSkipping(t *testing.T) {
	p := NewPartition(Config{MaxLocks: 100, DeliveryLimit: 5, LockDurationMs: 1000}, 0)
	aborted := func(off int64) bool { return off >= 2 && off <= 4 }
	runs := p.AcquireSkipping("a", 0, 10, 3, aborted)
	if len(runs) != 2 || runs[0] != (Run{0, 1, 1}) || runs[1] != (Run{5, 5, 1}) {
		t.Fatalf("runs %+v, want 0-1 and 5 (2-4 archived, not counted against max 3)", runs)
	}
	for off := int64(2); off <= 4; off++ {
		if st, n := p.StateOf(off); st != Archived || n != 0 {
			t.Fatalf("offset %d: %v delivered %d times, want Archived never delivered", off, st, n)
		}
	}
	if err := p.Acknowledge("a", 0, 1, AckAccept, 0); err != nil {
		t.Fatal(err)
	}
	if p.Start() != 5 {
		t.Fatalf("start %d after 0-1 accepted, want 5 (past the archived 2-4)", p.Start())
	}
	if got := p.AcquireSkipping("b", 0, 10, 10, aborted); len(got) != 1 || got[0] != (Run{6, 9, 1}) {
		t.Fatalf("b acquired %+v, want 6-9", got)
	}
}
