package group

import (
	"encoding/binary"
	"slices"
)

// GroupProtocol is the rebalance protocol a group runs.
type GroupProtocol int8

const (
	// ProtocolClassic is JoinGroup/SyncGroup/Heartbeat/LeaveGroup with client-side assignors.
	ProtocolClassic GroupProtocol = iota
	// ProtocolConsumer is KIP-848's consumer protocol (ConsumerGroupHeartbeat) with
	// server-side assignors; see consumer.go.
	ProtocolConsumer
)

// String is the group type ListGroups v5 reports.
func (p GroupProtocol) String() string {
	switch p {
	case ProtocolClassic:
		return "classic"
	case ProtocolConsumer:
		return "consumer"
	}
	return "unknown"
}

// consumerProtocolType is the protocol type of Kafka consumers (the subscription format the
// coordinator understands, for offset expiry and OffsetDelete).
const consumerProtocolType = "consumer"

// TopicPartition names a partition whose offset a group commits.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Offset is one committed offset.
type Offset struct {
	Offset          int64
	LeaderEpoch     int32 // -1: none
	Metadata        string
	CommitTimestamp int64 // ms
	ExpireTimestamp int64 // ms; -1: none (only OffsetCommit v1-v4 with a retention time set it)

	// order is the position of the record that wrote it in the partition's log, as the
	// shard counts them (Shard.order): where a transactional commit and a plain one meet,
	// the later record wins (Kafka compares record offsets the same way).
	order uint64
}

// Group is one group with its members and committed offsets.
//
// Invariants (checked by checkInvariants in tests):
//   - members and order hold the same members; order is join order;
//   - numAwaitingJoin is the number of members with a pending JoinGroup;
//   - supported[p] is the number of members supporting protocol p;
//   - leader is "" exactly when there are no members, else a member;
//   - static maps each member's instance id to its member id;
//   - pendingSync ⊆ members, and is empty outside CompletingRebalance and Stable;
//   - Empty groups have no members.
type Group struct {
	ID       string
	protocol GroupProtocol

	state     State
	stateTime int64 // ms when the state was entered; -1: unknown (loaded from an old record)

	generation   int32
	protocolType string // "": none yet, or a simple (offsets-only) group
	protocolName string // selected protocol; "" when not chosen
	leader       string

	members         map[string]*Member
	order           []*Member
	nextSeq         uint64
	static          map[string]string   // group.instance.id -> member id
	pending         map[string]struct{} // member ids handed out with MEMBER_ID_REQUIRED
	pendingSync     map[string]struct{} // members of this generation that have not synced
	supported       map[string]int
	numAwaitingJoin int

	// The initial delayed join of an empty group (group.initial.rebalance.delay.ms).
	newMemberAdded   bool
	initialDelay     bool  // the join deadline is an initial delay, not a rebalance timeout
	initialDelayMs   int64 // length of the current delay
	initialRemaining int64 // rebalance time left after it
	syncGeneration   int32 // generation the pending-sync deadline was set for

	subscribed      map[string]struct{} // topics the consumer members subscribe to
	subscribedKnown bool                // subscribed is meaningful

	offsets        map[TopicPartition]*Offset
	pendingCommits map[TopicPartition]int // commits whose records are not yet appended

	// cons is the consumer protocol's state when protocol is ProtocolConsumer, else nil.
	// Such a group keeps no classic members: state is Empty or Stable (as the classic
	// code paths see it; ConsumerState has the KIP-848 state) or Dead.
	cons *consumerGroup
}

// Member is a classic-protocol group member.
type Member struct {
	ID                 string
	InstanceID         *string // group.instance.id of a static member
	ClientID           string
	ClientHost         string
	RebalanceTimeoutMs int32
	SessionTimeoutMs   int32
	ProtocolType       string
	Protocols          []MemberProtocol // in the member's order of preference
	Assignment         []byte

	isNew bool      // joined but has not completed a join yet
	join  *joinWait // pending JoinGroup, nil if none
	sync  Waiter    // pending SyncGroup, nil if none
}

// MemberProtocol is one assignor a member supports, with its subscription metadata.
type MemberProtocol struct {
	Name     string
	Metadata []byte
}

type joinWait struct {
	w              Waiter
	skipAssignment bool // JoinGroup v9+: the member understands SkipAssignment
}

func newGroup(id string, now int64) *Group {
	return &Group{
		ID: id, protocol: ProtocolClassic, state: Empty, stateTime: now,
		members: map[string]*Member{}, static: map[string]string{}, pending: map[string]struct{}{},
		pendingSync: map[string]struct{}{}, supported: map[string]int{},
		offsets: map[TopicPartition]*Offset{}, pendingCommits: map[TopicPartition]int{},
	}
}

// State is the group's current state.
func (g *Group) State() State { return g.state }

// Generation is the group's generation id.
func (g *Group) Generation() int32 { return g.generation }

// Leader is the leader's member id ("" when there are no members).
func (g *Group) Leader() string { return g.leader }

// ProtocolName is the selected protocol ("" when none).
func (g *Group) ProtocolName() string { return g.protocolName }

// Members returns the members in join order.
func (g *Group) Members() []*Member { return slices.Clone(g.order) }

// Member returns a member by id, or nil.
func (g *Group) Member(id string) *Member { return g.members[id] }

func (g *Group) transition(to State, now int64) {
	if !canTransition(g.state, to) {
		// Unreachable by construction: every caller checks the state first.
		panic("group " + g.ID + ": illegal transition " + g.state.String() + " -> " + to.String())
	}
	g.state = to
	g.stateTime = now
}

func (m *Member) isStatic() bool { return m.InstanceID != nil }

// awaitingJoin: the member has a JoinGroup parked.
func (m *Member) awaitingJoin() bool { return m.join != nil }

// metadata is the member's subscription for protocol p (nil if it does not support it).
func (m *Member) metadata(p string) []byte {
	for _, mp := range m.Protocols {
		if mp.Name == p {
			return mp.Metadata
		}
	}
	return nil
}

// matches reports whether the member already joined with exactly these protocols.
func (m *Member) matches(ps []MemberProtocol) bool {
	if len(ps) != len(m.Protocols) {
		return false
	}
	for i := range ps {
		if ps[i].Name != m.Protocols[i].Name || string(ps[i].Metadata) != string(m.Protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// vote is the member's most preferred protocol among candidates.
func (m *Member) vote(candidates map[string]bool) string {
	for _, p := range m.Protocols {
		if candidates[p.Name] {
			return p.Name
		}
	}
	return "" // unreachable: candidates are protocols every member supports
}

// add inserts m, which is not yet a member; join, if not nil, is its parked JoinGroup.
func (g *Group) add(m *Member) {
	if len(g.members) == 0 {
		g.protocolType = m.ProtocolType
	}
	if g.leader == "" {
		g.leader = m.ID
	}
	if m.InstanceID != nil {
		g.static[*m.InstanceID] = m.ID
	}
	g.members[m.ID] = m
	g.order = append(g.order, m)
	g.incSupported(m)
	if m.awaitingJoin() {
		g.numAwaitingJoin++
	}
	delete(g.pending, m.ID)
}

// remove deletes a member (or a pending member id) from the group's bookkeeping; the caller
// answers its parked requests first. A new leader is the earliest joined member left.
func (g *Group) remove(id string) {
	if m := g.members[id]; m != nil {
		delete(g.members, id)
		g.order = slices.DeleteFunc(g.order, func(x *Member) bool { return x == m })
		g.decSupported(m)
		if m.awaitingJoin() {
			g.numAwaitingJoin--
		}
		if m.InstanceID != nil && g.static[*m.InstanceID] == id {
			delete(g.static, *m.InstanceID)
		}
	}
	if g.leader == id {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0].ID
		}
	}
	delete(g.pending, id)
	delete(g.pendingSync, id)
}

func (g *Group) incSupported(m *Member) {
	for _, p := range m.Protocols {
		g.supported[p.Name]++
	}
}

func (g *Group) decSupported(m *Member) {
	for _, p := range m.Protocols {
		if g.supported[p.Name]--; g.supported[p.Name] <= 0 {
			delete(g.supported, p.Name)
		}
	}
}

// setJoin parks (or, with nil, clears) a member's JoinGroup, keeping numAwaitingJoin.
func (g *Group) setJoin(m *Member, j *joinWait) {
	switch {
	case j != nil && m.join == nil:
		g.numAwaitingJoin++
	case j == nil && m.join != nil:
		g.numAwaitingJoin--
	}
	m.join = j
}

// updateMember replaces a member's protocols and timeouts and parks its JoinGroup.
func (g *Group) updateMember(m *Member, ps []MemberProtocol, rebalanceMs, sessionMs int32, j *joinWait) {
	g.decSupported(m)
	m.Protocols = ps
	g.incSupported(m)
	m.RebalanceTimeoutMs, m.SessionTimeoutMs = rebalanceMs, sessionMs
	g.setJoin(m, j)
}

// supportsProtocols reports whether a member of this protocol type and protocols may join:
// an empty group takes any non-empty type and protocol list; otherwise the type must match
// and at least one protocol must be supported by every member.
func (g *Group) supportsProtocols(protocolType string, ps []MemberProtocol) bool {
	if g.state == Empty {
		return protocolType != "" && len(ps) > 0
	}
	if g.protocolType != protocolType {
		return false
	}
	for _, p := range ps {
		if g.supported[p.Name] == len(g.members) {
			return true
		}
	}
	return false
}

// allJoined: every member has a JoinGroup parked and no handed-out member id is outstanding.
func (g *Group) allJoined() bool {
	return len(g.members) == g.numAwaitingJoin && len(g.pending) == 0
}

// rebalanceTimeoutMs is the largest rebalance timeout of the members.
func (g *Group) rebalanceTimeoutMs() int64 {
	var t int32
	for _, m := range g.order {
		t = max(t, m.RebalanceTimeoutMs)
	}
	return int64(t)
}

// selectProtocol picks the protocol every member supports that most members prefer, as
// Kafka's vote does; ties go to the lexicographically smallest name (Kafka leaves them to
// hash order), so the choice is deterministic.
func (g *Group) selectProtocol() string {
	candidates := map[string]bool{}
	for p, n := range g.supported {
		if n == len(g.members) {
			candidates[p] = true
		}
	}
	votes := map[string]int{}
	for _, m := range g.order {
		votes[m.vote(candidates)]++
	}
	best, bestVotes := "", -1
	for p, v := range votes {
		if v > bestVotes || v == bestVotes && p < best {
			best, bestVotes = p, v
		}
	}
	return best
}

// maybeElectNewJoinedLeader keeps the leader if it rejoined, else makes the earliest member
// that rejoined the leader; false if no member rejoined (or there is no leader).
func (g *Group) maybeElectNewJoinedLeader() bool {
	if g.leader == "" {
		return false
	}
	if g.members[g.leader].awaitingJoin() {
		return true
	}
	for _, m := range g.order {
		if m.awaitingJoin() {
			g.leader = m.ID
			return true
		}
	}
	return false
}

// computeSubscribed derives the topics the group's consumers subscribe to, reading each
// member's metadata as consumer protocol v0 (the prefix every later version keeps).
func (g *Group) computeSubscribed() {
	g.subscribed, g.subscribedKnown = nil, false
	if g.protocolType != consumerProtocolType {
		return
	}
	if len(g.members) == 0 {
		g.subscribed, g.subscribedKnown = map[string]struct{}{}, true
		return
	}
	if g.protocolName == "" {
		return
	}
	topics := map[string]struct{}{}
	for _, m := range g.order {
		ts, ok := subscriptionTopics(m.metadata(g.protocolName))
		if !ok {
			return
		}
		for _, t := range ts {
			topics[t] = struct{}{}
		}
	}
	g.subscribed, g.subscribedKnown = topics, true
}

// isSubscribedTo reports whether the group's consumers are known to subscribe to topic.
func (g *Group) isSubscribedTo(topic string) bool {
	_, ok := g.subscribed[topic]
	return g.subscribedKnown && ok
}

// subscriptionTopics parses the topics of a consumer protocol subscription (version int16,
// then an array of int16-length strings); ok is false if the bytes do not hold that.
func subscriptionTopics(b []byte) (topics []string, ok bool) {
	if len(b) < 6 || int16(binary.BigEndian.Uint16(b)) < 0 {
		return nil, false
	}
	n := int32(binary.BigEndian.Uint32(b[2:]))
	b = b[6:]
	if n < 0 || int64(n)*2 > int64(len(b)) {
		return nil, false
	}
	topics = make([]string, 0, n)
	for i := int32(0); i < n; i++ {
		if len(b) < 2 {
			return nil, false
		}
		l := int(int16(binary.BigEndian.Uint16(b)))
		if l < 0 || l > len(b)-2 {
			return nil, false
		}
		topics = append(topics, string(b[2:2+l]))
		b = b[2+l:]
	}
	return topics, true
}

// hasOffsets reports whether the group has committed or in-flight offsets (transactional
// ones are the shard's: Shard.hasOpenTxns).
func (g *Group) hasOffsets() bool { return len(g.offsets) > 0 || len(g.pendingCommits) > 0 }
