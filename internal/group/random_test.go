package group

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Random interleavings of joins, syncs, heartbeats, leaves, static restarts and time keep
// the group invariants (checked after every step by the harness), never answer a request
// twice, and once every client goes quiet, every parked request is answered and the group
// ends up Empty.
func TestRandomOperations(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomRun(t, seed) })
	}
	t.Logf("steps spent in each state: %v", states)
}

type simClient struct {
	name     string
	instance *string
	memberID string
	gen      int32
	leader   bool
	join     Waiter // outstanding JoinGroup
	sync     Waiter // outstanding SyncGroup
}

var states = map[State]int{}

func randomRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	cfg := testConfig()
	cfg.InitialRebalanceDelayMs = int64(rng.IntN(2) * 3000)
	cfg.MaxSize = int32(2 + rng.IntN(4))
	h := newHarness(t, cfg)
	var clients []*simClient
	for i := 0; i < 5; i++ {
		c := &simClient{name: fmt.Sprint("c", i)}
		if i%2 == 1 {
			inst := fmt.Sprint("inst-", i)
			c.instance = &inst
		}
		clients = append(clients, c)
	}
	var outstanding []Waiter
	committed := int64(-1)
	collect := func(c *simClient) {
		if c.join != nil {
			if r, ok := h.reply(c.join).(*kmsg.JoinGroupResponse); ok {
				c.join = nil
				if r.ErrorCode == 0 {
					c.memberID, c.gen, c.leader = r.MemberID, r.Generation, r.LeaderID == r.MemberID && len(r.Members) > 0
				} else if r.MemberID != "" && r.ErrorCode == 79 { // MEMBER_ID_REQUIRED
					c.memberID = r.MemberID
				} else {
					c.memberID, c.gen, c.leader = "", 0, false
				}
			}
		}
		if c.sync != nil {
			if _, ok := h.reply(c.sync).(*kmsg.SyncGroupResponse); ok {
				c.sync = nil
			}
		}
	}
	opts := func(c *simClient) []joinOpt {
		o := []joinOpt{withTimeouts(int32(2000+rng.IntN(8000)), int32(3000+rng.IntN(20000)))}
		if c.instance != nil {
			o = append(o, withInstance(*c.instance))
		}
		if rng.IntN(4) == 0 {
			o = append(o, withProtocols("roundrobin", "range"))
		}
		return o
	}
	for step := 0; step < 300; step++ {
		c := clients[rng.IntN(len(clients))]
		collect(c)
		switch op := rng.IntN(11); {
		case op < 3 && c.join == nil:
			id := c.memberID
			if rng.IntN(6) == 0 {
				id = "" // a restart: a static member replaces its id, a dynamic one is new
			}
			c.join = h.join("g", id, c.name, opts(c)...)
			outstanding = append(outstanding, c.join)
		case op < 5 && c.sync == nil && c.memberID != "":
			var a map[string]string
			if c.leader {
				a = map[string]string{c.memberID: "x"}
			}
			c.sync = h.sync("g", c.memberID, c.gen, a)
			outstanding = append(outstanding, c.sync)
		case op < 7 && c.memberID != "":
			h.heartbeat("g", c.memberID, c.gen, c.instance)
		case op < 8 && c.memberID != "":
			h.leave("g", 5, kmsg.LeaveGroupRequestMember{MemberID: c.memberID, InstanceID: c.instance})
		case op < 9:
			// A commit either succeeds and moves the offset, or is refused and changes
			// nothing.
			r := h.commit("g", []int64{int64(step)}, commitAs(c.memberID, c.gen), func(r *kmsg.OffsetCommitRequest) { r.InstanceID = c.instance })
			if commitCodes(r)[0] == 0 {
				committed = int64(step)
			}
			if got, _ := h.fetched("g", 1, false); got[0] != committed {
				t.Fatalf("offset %d after commit answered %d, want %d", got[0], commitCodes(r)[0], committed)
			}
		default:
			h.advance(int64(rng.IntN(6000)))
		}
		if g := h.s.groups["g"]; g != nil {
			states[g.state]++
		}
	}
	// Everyone goes quiet: within the longest timeouts every parked request is answered
	// and every member expires.
	for i := 0; i < 400; i++ {
		h.advance(1000)
	}
	for _, w := range outstanding {
		if h.reply(w) == nil {
			t.Fatalf("request %v never answered", w)
		}
	}
	if g := h.s.groups["g"]; g != nil && (g.state != Empty || len(g.members) != 0 || len(g.pending) != 0) {
		t.Fatalf("group left %v with %d members, %d pending", g.state, len(g.members), len(g.pending))
	}
}
