package api

import "testing"

// Kafka's RackAwareReplicaSelector: the leader when it is in the client's rack or no follower
// is; otherwise the follower of the rack furthest along, then caught up most recently.
func TestSelectRackAware(t *testing.T) {
	fs := []replicaView{
		{id: 2, rack: "r2", logEndOffset: 10, lastCaughtUpMs: 100},
		{id: 3, rack: "r2", logEndOffset: 12, lastCaughtUpMs: 50},
		{id: 4, rack: "r3", logEndOffset: 12, lastCaughtUpMs: 100},
		{id: 5, rack: "r3", logEndOffset: 12, lastCaughtUpMs: 200},
		{id: 7, rack: "r4", logEndOffset: 5, lastCaughtUpMs: 100},
		{id: 6, rack: "r4", logEndOffset: 5, lastCaughtUpMs: 100},
	}
	for _, c := range []struct {
		client, leader string
		want           int32
	}{
		{"", "r1", -1},
		{"r1", "r1", -1},
		{"r2", "r2", -1}, // the leader is in the rack
		{"r9", "r1", -1}, // no replica in the rack
		{"r2", "r1", 3},  // further log end offset
		{"r3", "r1", 5},  // same log end, caught up more recently
		{"r4", "r1", 6},  // a tie: the lower id
		{"r2", "", 3},    // a leader without a rack
	} {
		if got := selectRackAware(c.client, c.leader, fs); got != c.want {
			t.Errorf("client rack %q, leader rack %q: %d, want %d", c.client, c.leader, got, c.want)
		}
	}
	if got := selectRackAware("r2", "r1", nil); got != -1 {
		t.Errorf("no followers: %d", got)
	}
}
