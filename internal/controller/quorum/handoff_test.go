package quorum

import (
	"testing"
	"time"
)

// A stopping leader hands the leadership to another voter, so the survivors have a leader,
// and know that the stopping leader's last entries are committed, long before an election
// timeout would have passed. The election timeout here is 3-6 s; the survivors must have an
// active controller that applied the old leader's last entry within 2.5 s of Close.
func TestStoppingLeaderHandsOff(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.ElectionTicks = 300 })
	old := c.waitActive(20 * time.Second)
	registerBroker(t, c.nodes[old], 1)
	if _, err := createTopic(ctx(t), c.nodes[old], "last", 1, 1); err != nil {
		t.Fatal(err)
	}
	last := c.nodes[old].Status().Applied
	term := c.nodes[old].Status().Term

	c.stop(old)
	leader := c.waitActive(2500 * time.Millisecond)
	if leader == old {
		t.Fatal("the stopped node is still active")
	}
	if st := c.nodes[leader].Status(); st.Term <= term {
		t.Fatalf("new leader in term %d, the old one led term %d", st.Term, term)
	}
	c.waitApplied(last, 2500*time.Millisecond)
	if _, err := createTopic(ctx(t), c.nodes[leader], "after", 1, 1); err != nil {
		t.Fatal(err)
	}
}
