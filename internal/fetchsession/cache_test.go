package fetchsession

import "testing"

// parts makes n partitions of topic "t".
func parts(n int) []Created {
	out := make([]Created, n)
	for i := range out {
		out[i] = Created{Added: Added{Key: Key{Topic: "t", Partition: int32(i)}, Name: "t"}, HighWatermark: 5, LogStartOffset: 0}
	}
	return out
}

// create opens a session in shard 0 (the cache's turn is reset to it).
func create(c *Cache, now int64, privileged bool, n int) int32 {
	c.next.Store(0)
	return c.Create(now, privileged, false, parts(n))
}

// Kafka's eviction rules (FetchSessionCacheShard.tryEvict), one shard of one slot: a session
// unused for longer than the eviction time goes first; otherwise a new session evicts the
// least valuable evictable one only if it outranks it by (privileged, size); a consumer's
// session is evictable by anyone only once older than the eviction time, by a follower's at
// once; a follower's session is evictable only once old.
func TestEviction(t *testing.T) {
	c := NewCache(Shards, 100) // one slot per shard
	a := create(c, 0, false, 3)
	if a == 0 {
		t.Fatal("no session")
	}
	if id := create(c, 50, false, 10); id != 0 {
		t.Fatal("a young session was evicted by a larger consumer session")
	}
	b := create(c, 60, true, 1)
	if b == 0 || c.shards[0].mu.sessions[a] != nil {
		t.Fatal("a follower's session did not evict a consumer's")
	}
	if id := create(c, 70, true, 5); id != 0 {
		t.Fatal("a young follower session was evicted")
	}
	// Touched at 170 (older than 100 by then): evictable by a larger one.
	if _, ok, err := c.Incremental(170, b, 1, false, nil, nil); err != nil || !ok {
		t.Fatalf("incremental: %v", err)
	}
	if id := create(c, 171, true, 1); id != 0 {
		t.Fatal("an equal session evicted an old one (ties keep the existing)")
	}
	d := create(c, 172, true, 2)
	if d == 0 {
		t.Fatal("a larger follower session did not evict an old smaller one")
	}
	// Unused for longer than the eviction time: evicted by anything.
	if id := create(c, 273, false, 1); id == 0 {
		t.Fatal("a stale session was not evicted")
	}
	if n, ps := c.Len(); n != 1 || ps != 1 {
		t.Fatalf("cache holds %d sessions of %d partitions", n, ps)
	}
}

// An incremental fetch: epochs, updates, forgetting, the session's order and what is answered.
func TestIncremental(t *testing.T) {
	c := NewCache(1000, EvictionMs)
	id := c.Create(0, false, false, parts(3))
	if _, _, err := c.Incremental(1, id, 2, false, nil, nil); err != ErrInvalidEpoch {
		t.Fatalf("epoch 2: %v", err)
	}
	if _, _, err := c.Incremental(1, id, 1, true, nil, nil); err != ErrTopicIDMismatch {
		t.Fatalf("by id: %v", err)
	}
	if _, _, err := c.Incremental(1, id+1, 1, false, nil, nil); err != ErrSessionNotFound {
		t.Fatalf("unknown: %v", err)
	}
	add := []Added{{Key: Key{Topic: "u", Partition: 0}, Name: "u", Params: Params{FetchOffset: 7}}}
	v, ok, err := c.Incremental(1, id, 1, false, add, []Key{{Topic: "t", Partition: 1}})
	if err != nil || !ok {
		t.Fatalf("incremental: %v", err)
	}
	var slots []int32
	var order []Key
	v.Each(func(slot int32, p *Partition) { slots, order = append(slots, slot), append(order, p.Key) })
	want := []Key{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 2}, {Topic: "u", Partition: 0}}
	if len(order) != 3 || order[0] != want[0] || order[1] != want[1] || order[2] != want[2] {
		t.Fatalf("order %v", order)
	}
	answers := []Answer{
		{HighWatermark: 5, HasRecords: true}, // records: answered, moves to the end
		{HighWatermark: 5},                   // nothing new: left out
		{HighWatermark: 9},                   // new partition: answered
	}
	if err := v.Respond(slots, answers); err != nil {
		t.Fatal(err)
	}
	if !answers[0].Respond || answers[1].Respond || !answers[2].Respond {
		t.Fatalf("answered %+v", answers)
	}
	v, _, _ = c.Incremental(2, id, 2, false, nil, nil)
	order = order[:0]
	v.Each(func(_ int32, p *Partition) { order = append(order, p.Key) })
	if order[0] != want[1] || order[1] != want[2] || order[2] != want[0] {
		t.Fatalf("order after records on t/0: %v", order)
	}
	// A duplicate of the fetch at epoch 2 arriving first moves the epoch: this one's answer
	// is refused and records nothing.
	if _, _, err := c.Incremental(3, id, 3, false, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := v.Respond([]int32{0}, []Answer{{HighWatermark: 1}}); err != ErrInvalidEpoch {
		t.Fatalf("stale view: %v", err)
	}
	// Errors are always answered and reset the high watermark, so the next answer has it.
	v, _, _ = c.Incremental(4, id, 4, false, nil, nil)
	slots = slots[:0]
	v.Each(func(slot int32, _ *Partition) { slots = append(slots, slot) })
	a := []Answer{{HighWatermark: 5, ErrorCode: 6}, {HighWatermark: 9}, {HighWatermark: 5}}
	_ = v.Respond(slots, a)
	if !a[0].Respond || a[1].Respond || a[2].Respond {
		t.Fatalf("with an error: %+v", a)
	}
	v, _, _ = c.Incremental(5, id, 5, false, nil, nil)
	a = []Answer{{HighWatermark: 5}, {HighWatermark: 9}, {HighWatermark: 5}}
	_ = v.Respond(slots, a)
	if !a[0].Respond {
		t.Fatal("partition not answered again after its error went")
	}
	// Forgetting everything closes the session.
	forget := []Key{want[0], want[1], want[2]}
	if _, ok, err := c.Incremental(6, id, 6, false, nil, forget); ok || err != nil {
		t.Fatalf("emptied: ok %v err %v", ok, err)
	}
	if n, _ := c.Len(); n != 0 {
		t.Fatalf("%d sessions left", n)
	}
}

func TestNextEpoch(t *testing.T) {
	for _, c := range [][2]int32{{-1, -1}, {0, 1}, {5, 6}, {1<<31 - 1, 1}} {
		if got := NextEpoch(c[0]); got != c[1] {
			t.Errorf("NextEpoch(%d) = %d, want %d", c[0], got, c[1])
		}
	}
}
