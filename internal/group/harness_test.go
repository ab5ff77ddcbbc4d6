package group

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// harness drives a Shard with a fake clock: requests get named waiters, writes are
// "appended" to log (or failed on demand), and replies are collected by waiter.
type harness struct {
	t       *testing.T
	s       *Shard
	now     int64
	seq     int
	log     []Record
	entries []logEntry // the log by batch, as a restarted coordinator replays it
	failing error      // when set, every write fails with it
	// holding: writes are appended (to log and entries) but their outcomes are not
	// reported until release, as while they wait for the ISR.
	holding bool
	held    []heldWrite
	replies map[Waiter]any
}

// logEntry is one batch of the harness's log: a Write's records (transactional when txn is
// set) or, with marker set, a transaction marker of txn's producer.
type logEntry struct {
	txn    *Producer
	recs   []Record
	marker *bool // COMMIT (true) or ABORT (false)
}

type heldWrite struct {
	id  uint64
	err error
}

func testConfig() Config {
	return Config{
		InitialRebalanceDelayMs: 3000,
		MinSessionTimeoutMs:     1000,
		MaxSessionTimeoutMs:     60000,
		MaxSize:                 1000,
		OffsetsRetentionMs:      7 * 24 * 3600 * 1000,
		OffsetsRetentionCheckMs: 600000,
	}
}

func newHarness(t *testing.T, cfg Config) *harness {
	h := &harness{t: t, now: 1_000_000, replies: map[Waiter]any{}}
	ids := 0
	cfg.NewID = func() string { ids++; return fmt.Sprint(ids) }
	h.s = NewShard(cfg)
	h.run(h.s.LoadComplete(h.now))
	return h
}

// run appends the writes (reporting each), checks invariants and collects replies.
func (h *harness) run(r Ready) {
	h.t.Helper()
	for len(r.Writes) > 0 {
		w := r.Writes[0]
		r.Writes = r.Writes[1:]
		err := h.failing
		if err == nil {
			h.log = append(h.log, w.Records...)
			h.entries = append(h.entries, logEntry{txn: w.Txn, recs: w.Records})
		}
		if h.holding {
			h.held = append(h.held, heldWrite{w.ID, err})
			continue
		}
		next := h.s.Written(h.now, w.ID, err)
		r.Replies = append(r.Replies, next.Replies...)
		r.Writes = append(r.Writes, next.Writes...)
	}
	for _, rep := range r.Replies {
		if _, dup := h.replies[rep.To]; dup {
			h.t.Fatalf("waiter %v answered twice", rep.To)
		}
		h.replies[rep.To] = rep.Msg
	}
	for _, g := range h.s.groups {
		if err := g.checkInvariants(); err != nil {
			h.t.Fatalf("group %s: %v", g.ID, err)
		}
	}
}

// release stops holding writes and reports the held ones, in order.
func (h *harness) release() {
	h.t.Helper()
	h.holding = false
	held := h.held
	h.held = nil
	for _, w := range held {
		h.run(h.s.Written(h.now, w.id, w.err))
	}
}

func (h *harness) waiter(what string) Waiter {
	h.seq++
	return fmt.Sprintf("%s#%d", what, h.seq)
}

// advance moves the clock and fires due deadlines.
func (h *harness) advance(ms int64) {
	h.t.Helper()
	h.now += ms
	h.run(h.s.Tick(h.now))
}

// advanceUntil advances the clock a second at a time until w is answered (at most a
// minute).
func (h *harness) advanceUntil(w Waiter) {
	h.t.Helper()
	for i := 0; i < 60 && h.reply(w) == nil; i++ {
		h.advance(1000)
	}
	if h.reply(w) == nil {
		h.t.Fatalf("%v not answered within a minute", w)
	}
}

// reply returns the answer for w, or nil if it is still parked.
func (h *harness) reply(w Waiter) any { return h.replies[w] }

type joinOpt func(*kmsg.JoinGroupRequest)

func withInstance(id string) joinOpt {
	return func(r *kmsg.JoinGroupRequest) { r.InstanceID = &id }
}
func withVersion(v int16) joinOpt { return func(r *kmsg.JoinGroupRequest) { r.Version = v } }
func withTimeouts(session, rebalance int32) joinOpt {
	return func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = session, rebalance }
}
func withProtocols(ps ...string) joinOpt {
	return func(r *kmsg.JoinGroupRequest) {
		r.Protocols = nil
		for _, p := range ps {
			r.Protocols = append(r.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: subscription("t")})
		}
	}
}
func withProtocolType(t string) joinOpt { return func(r *kmsg.JoinGroupRequest) { r.ProtocolType = t } }

// subscription encodes a consumer protocol v0 subscription to topics.
func subscription(topics ...string) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(topics)))
	for _, t := range topics {
		b = binary.BigEndian.AppendUint16(b, uint16(len(t)))
		b = append(b, t...)
	}
	return binary.BigEndian.AppendUint32(b, 0xffffffff) // null user data
}

// join sends a JoinGroup (v9, consumer/range, session 10s, rebalance 30s unless changed)
// and returns its waiter.
func (h *harness) join(group, memberID, client string, opts ...joinOpt) Waiter {
	h.t.Helper()
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 9
	req.Group, req.MemberID = group, memberID
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 30000
	req.ProtocolType = "consumer"
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: subscription("t")}}
	for _, o := range opts {
		o(req)
	}
	w := h.waiter("join-" + client)
	h.run(h.s.JoinGroup(h.now, w, req, Client{ID: client, Host: "/127.0.0.1"}))
	return w
}

// joinResp returns w's JoinGroup answer, failing if it is parked.
func (h *harness) joinResp(w Waiter) *kmsg.JoinGroupResponse {
	h.t.Helper()
	r, ok := h.reply(w).(*kmsg.JoinGroupResponse)
	if !ok {
		h.t.Fatalf("join %v: no answer (parked)", w)
	}
	return r
}

// joinNew does the two JoinGroups of a new dynamic member and returns the parked second one
// and the member id.
func (h *harness) joinNew(group, client string, opts ...joinOpt) (Waiter, string) {
	h.t.Helper()
	w := h.join(group, "", client, opts...)
	r := h.joinResp(w)
	if r.ErrorCode != kerr.MemberIDRequired.Code {
		h.t.Fatalf("first join of %s: error %d, want MEMBER_ID_REQUIRED", client, r.ErrorCode)
	}
	return h.join(group, r.MemberID, client, opts...), r.MemberID
}

func (h *harness) sync(group, memberID string, gen int32, assignment map[string]string) Waiter {
	h.t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.Generation = group, memberID, gen
	for m, a := range assignment {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: []byte(a)})
	}
	w := h.waiter("sync-" + memberID)
	h.run(h.s.SyncGroup(h.now, w, req))
	return w
}

func (h *harness) syncResp(w Waiter) *kmsg.SyncGroupResponse {
	h.t.Helper()
	r, ok := h.reply(w).(*kmsg.SyncGroupResponse)
	if !ok {
		h.t.Fatalf("sync %v: no answer (parked)", w)
	}
	return r
}

func (h *harness) heartbeat(group, memberID string, gen int32, instance *string) int16 {
	h.t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.MemberID, req.Generation, req.InstanceID = group, memberID, gen, instance
	w := h.waiter("hb-" + memberID)
	h.run(h.s.Heartbeat(h.now, w, req))
	return h.reply(w).(*kmsg.HeartbeatResponse).ErrorCode
}

func (h *harness) leave(group string, version int16, members ...kmsg.LeaveGroupRequestMember) *kmsg.LeaveGroupResponse {
	h.t.Helper()
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = version
	req.Group = group
	if version < 3 {
		req.MemberID = members[0].MemberID
	} else {
		req.Members = members
	}
	w := h.waiter("leave")
	h.run(h.s.LeaveGroup(h.now, w, req))
	return h.reply(w).(*kmsg.LeaveGroupResponse)
}

func (h *harness) group(id string) *Group {
	h.t.Helper()
	g := h.s.groups[id]
	if g == nil {
		h.t.Fatalf("group %s does not exist", id)
	}
	return g
}

func (h *harness) wantState(id string, st State) {
	h.t.Helper()
	if got := h.group(id).state; got != st {
		h.t.Fatalf("group %s is %v, want %v", id, got, st)
	}
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	w := int16(0)
	if want != nil {
		w = want.Code
	}
	if got != w {
		t.Fatalf("%s: error %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// checkInvariants verifies the invariants stated on Group.
func (g *Group) checkInvariants() error {
	if g.cons != nil {
		return g.cons.checkInvariants()
	}
	if len(g.members) != len(g.order) {
		return fmt.Errorf("%d members but %d in order", len(g.members), len(g.order))
	}
	awaiting := 0
	supported := map[string]int{}
	static := 0
	for _, m := range g.order {
		if g.members[m.ID] != m {
			return fmt.Errorf("member %s in order but not in members", m.ID)
		}
		if m.join != nil {
			awaiting++
		}
		for _, p := range m.Protocols {
			supported[p.Name]++
		}
		if m.InstanceID != nil {
			static++
			if g.static[*m.InstanceID] != m.ID {
				return fmt.Errorf("instance %s maps to %q, not %s", *m.InstanceID, g.static[*m.InstanceID], m.ID)
			}
		}
	}
	if awaiting != g.numAwaitingJoin {
		return fmt.Errorf("numAwaitingJoin %d, counted %d", g.numAwaitingJoin, awaiting)
	}
	if len(supported) != len(g.supported) {
		return fmt.Errorf("supported %v, counted %v", g.supported, supported)
	}
	for p, n := range supported {
		if g.supported[p] != n {
			return fmt.Errorf("supported %v, counted %v", g.supported, supported)
		}
	}
	if static != len(g.static) {
		return fmt.Errorf("%d static members, static map %v", static, g.static)
	}
	if (g.leader == "") != (len(g.members) == 0) || g.leader != "" && g.members[g.leader] == nil {
		return fmt.Errorf("leader %q with %d members", g.leader, len(g.members))
	}
	for id := range g.pendingSync {
		if g.members[id] == nil {
			return fmt.Errorf("pending sync member %s is not a member", id)
		}
	}
	if len(g.pendingSync) > 0 && g.state != CompletingRebalance && g.state != Stable {
		return fmt.Errorf("pending syncs in state %v", g.state)
	}
	if g.state == Empty && len(g.members) > 0 {
		return fmt.Errorf("empty group with %d members", len(g.members))
	}
	return nil
}
