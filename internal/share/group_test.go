package share

import (
	"slices"
	"testing"
)

type fakeTopics map[string]int32

func (f fakeTopics) Topic(name string) ([16]byte, int32, bool) {
	n, ok := f[name]
	return [16]byte{byte(len(name))}, n, ok
}

// TestGroupMembership drives the membership core through a join, a second member, a
// fenced epoch, a subscribed topic growing, a leave and a session expiry.
func TestGroupMembership(t *testing.T) {
	meta := fakeTopics{"t": 2}
	g := NewGroup("g")
	a, changed, err := g.Heartbeat("a", 0, []string{"t", "missing"}, "c", "/h", "", meta, 0, 1000)
	if err != nil || !changed || a.Epoch != 1 || len(a.Assignment) != 1 || !slices.Equal(a.Assignment[0].Partitions, []int32{0, 1}) {
		t.Fatalf("join: %+v %v %v", a, changed, err)
	}
	b, _, err := g.Heartbeat("b", 0, []string{"t"}, "c", "/h", "", meta, 0, 1000)
	if err != nil || b.Epoch != 2 || !slices.Equal(b.Assignment[0].Partitions, []int32{0, 1}) {
		t.Fatalf("second member: %+v %v", b, err)
	}
	// Every member is assigned every partition: a keeps its assignment and its epoch.
	if a, changed, err = g.Heartbeat("a", 1, nil, "c", "/h", "", meta, 100, 1000); err != nil || changed || a.Epoch != 1 {
		t.Fatalf("steady heartbeat: %+v %v %v", a, changed, err)
	}
	if _, _, err := g.Heartbeat("a", 7, nil, "c", "/h", "", meta, 100, 1000); err != ErrFencedEpoch {
		t.Fatalf("stale epoch: %v", err)
	}
	if _, _, err := g.Heartbeat("z", 3, nil, "c", "/h", "", meta, 100, 1000); err != ErrUnknownMember {
		t.Fatalf("unknown member: %v", err)
	}
	// The topic grows: the next heartbeat carries the new assignment in a new epoch.
	meta["t"] = 3
	a, changed, err = g.Heartbeat("a", 1, nil, "c", "/h", "", meta, 200, 1000)
	if err != nil || !changed || a.Epoch <= 2 || !slices.Equal(a.Assignment[0].Partitions, []int32{0, 1, 2}) {
		t.Fatalf("after growth: %+v %v %v", a, changed, err)
	}
	if m, _, err := g.Heartbeat("b", -1, nil, "c", "/h", "", meta, 300, 1000); err != nil || m != nil || len(g.Members) != 1 {
		t.Fatalf("leave: %v %v %d", m, err, len(g.Members))
	}
	if gone := g.Expire(1199); len(gone) != 0 {
		t.Fatalf("expired early: %v", gone)
	}
	if gone := g.Expire(1200); !slices.Equal(gone, []string{"a"}) || g.State() != "Empty" {
		t.Fatalf("expiry: %v, state %s", gone, g.State())
	}
}
