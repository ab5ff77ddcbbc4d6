package group

import (
	"bytes"
	"slices"
	"strings"
)

// KIP-848's consumer protocol: the group's state, its members and the assignment helpers.
//
// A consumer group has a group epoch, bumped whenever something the assignment depends on
// changes (a member joins, leaves or changes its subscription; a subscribed topic appears,
// disappears or gains partitions), and a target assignment computed by a server-side
// assignor for some group epoch (the assignment epoch). Each member moves toward its part of
// the target on its own, one heartbeat at a time (reconcile.go): it first gives up the
// partitions it must revoke (staying at its epoch), then takes the target epoch and its new
// partitions, but only those whose previous owner has revoked them; the rest it gets on a
// later heartbeat. So a partition never has two owners, and partitions that do not move stay
// assigned throughout.
//
// Invariants (checkInvariants in tests):
//   - owners holds, for every partition a member has assigned or pending revocation, that
//     member and its epoch, and nothing else (a partition has at most one owner);
//   - static maps each static member's instance id to its member id;
//   - target has an entry only for members (possibly empty).

// TopicID is a topic's UUID (KIP-516), as the consumer protocol names topics.
type TopicID = [16]byte

// Topics is the cluster's topics as the consumer protocol sees them: an immutable view (a
// new value for every change) the coordinator hands the core with each input. Views are
// compared with == to notice a change, so implementations must be comparable (a pointer,
// or a struct of pointers).
type Topics interface {
	// Topic returns a topic's id and partition count by name; ok false if it does not exist.
	Topic(name string) (id TopicID, partitions int32, ok bool)
	// TopicByID returns a topic's name and partition count by id.
	TopicByID(id TopicID) (name string, partitions int32, ok bool)
	// Names lists every topic name, sorted (regular expression subscriptions match them).
	Names() []string
}

// noTopics is the view before any request brought one (a replayed group whose members
// time out before heartbeating): no topic exists.
type noTopics struct{}

func (noTopics) Topic(string) (TopicID, int32, bool)     { return TopicID{}, 0, false }
func (noTopics) TopicByID(TopicID) (string, int32, bool) { return "", 0, false }
func (noTopics) Names() []string                         { return nil }

// ConsumerState is a consumer group's state, with Kafka's names.
type ConsumerState int8

const (
	ConsumerEmpty       ConsumerState = iota // no members
	ConsumerAssigning                        // the group epoch is ahead of the target assignment
	ConsumerReconciling                      // some member has not reached the target assignment
	ConsumerStable                           // every member has its target assignment
	ConsumerDead                             // deleted
)

var consumerStateNames = [...]string{"Empty", "Assigning", "Reconciling", "Stable", "Dead"}

func (s ConsumerState) String() string { return consumerStateNames[s] }

// MemberState is where a member is in reconciling toward its target assignment (Kafka's
// MemberState; the values are persisted).
type MemberState int8

const (
	MemberStable               MemberState = 0 // has its target assignment at the assignment epoch
	MemberUnrevokedPartitions  MemberState = 1 // must revoke partitions before moving on
	MemberUnreleasedPartitions MemberState = 2 // at the target epoch, waiting for partitions others still own
	MemberUnknown              MemberState = 127
)

// Member epochs with a meaning of their own in ConsumerGroupHeartbeat.
const (
	leaveEpoch       = -1 // the member leaves
	staticLeaveEpoch = -2 // a static member leaves for now and will come back
)

// Assignment is a set of partitions by topic id: sorted, without duplicates, no empty
// lists. Values are never modified once built (members share them).
type Assignment map[TopicID][]int32

func (a Assignment) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a Assignment) has(id TopicID, p int32) bool {
	_, ok := slices.BinarySearch(a[id], p)
	return ok
}

func (a Assignment) equal(b Assignment) bool {
	if len(a) != len(b) {
		return false
	}
	for id, ps := range a {
		if !slices.Equal(ps, b[id]) {
			return false
		}
	}
	return true
}

// sortedIDs returns the topic ids in byte order.
func (a Assignment) sortedIDs() []TopicID {
	ids := make([]TopicID, 0, len(a))
	for id := range a {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(x, y TopicID) int { return bytes.Compare(x[:], y[:]) })
	return ids
}

// normalized returns ps sorted and without duplicates or negatives (a new slice).
func normalized(ps []int32) []int32 {
	ps = slices.Clone(ps)
	slices.Sort(ps)
	ps = slices.Compact(ps)
	for len(ps) > 0 && ps[0] < 0 {
		ps = ps[1:]
	}
	return ps
}

// intersect and subtract work on sorted lists and return new ones (nil when empty).
func intersect(a, b []int32) []int32 {
	var out []int32
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

func subtract(a, b []int32) []int32 {
	var out []int32
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j < len(b) && b[j] == x {
			continue
		}
		out = append(out, x)
	}
	return out
}

func union(a, b []int32) []int32 { return normalized(append(slices.Clone(a), b...)) }

// ClassicMemberMetadata is what a member that joined with JoinGroup (the classic protocol)
// keeps in a consumer group.
type ClassicMemberMetadata struct {
	SessionTimeoutMs int32
	Protocols        []MemberProtocol
}

// ConsumerMember is one member of a consumer group. Values are replaced, never modified,
// once in a group (updates build a copy), so a change is seen by comparing old and new.
type ConsumerMember struct {
	ID                 string
	InstanceID         *string
	RackID             *string
	ClientID           string
	ClientHost         string
	SubscribedTopics   []string // sorted, without duplicates
	SubscribedRegex    string   // "" when none
	ServerAssignor     string   // "" when the member did not ask for one
	RebalanceTimeoutMs int32

	MemberEpoch         int32
	PreviousMemberEpoch int32
	State               MemberState
	Assigned            Assignment // partitions the member owns (may use)
	PendingRevocation   Assignment // partitions it still owns but must give up

	Classic *ClassicMemberMetadata // nil: the member speaks the consumer protocol

	// revokeEpoch is the epoch whose revocation the rebalance timeout waits on.
	revokeEpoch int32
}

func (m *ConsumerMember) clone() *ConsumerMember {
	c := *m
	return &c
}

func (m *ConsumerMember) usesClassic() bool { return m.Classic != nil }

// reconciledTo reports whether the member has the target assignment of epoch.
func (m *ConsumerMember) reconciledTo(epoch int32) bool {
	return m.State == MemberStable && m.MemberEpoch == epoch
}

// sameMetadata reports whether the persisted member metadata (key version 5) is equal.
func (m *ConsumerMember) sameMetadata(o *ConsumerMember) bool {
	if o == nil {
		return false
	}
	if !ptrEq(m.InstanceID, o.InstanceID) || !ptrEq(m.RackID, o.RackID) || m.ClientID != o.ClientID ||
		m.ClientHost != o.ClientHost || !slices.Equal(m.SubscribedTopics, o.SubscribedTopics) ||
		m.SubscribedRegex != o.SubscribedRegex || m.ServerAssignor != o.ServerAssignor ||
		m.RebalanceTimeoutMs != o.RebalanceTimeoutMs || (m.Classic == nil) != (o.Classic == nil) {
		return false
	}
	if m.Classic != nil {
		if m.Classic.SessionTimeoutMs != o.Classic.SessionTimeoutMs || len(m.Classic.Protocols) != len(o.Classic.Protocols) {
			return false
		}
		for i, p := range m.Classic.Protocols {
			q := o.Classic.Protocols[i]
			if p.Name != q.Name || !bytes.Equal(p.Metadata, q.Metadata) {
				return false
			}
		}
	}
	return true
}

// sameAssignmentState reports whether the persisted current assignment (key version 8) is
// equal.
func (m *ConsumerMember) sameAssignmentState(o *ConsumerMember) bool {
	return o != nil && m.MemberEpoch == o.MemberEpoch && m.PreviousMemberEpoch == o.PreviousMemberEpoch &&
		m.State == o.State && m.Assigned.equal(o.Assigned) && m.PendingRevocation.equal(o.PendingRevocation)
}

func ptrEq(a, b *string) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// topicMeta is one subscribed topic as the group last saw it (the subscription metadata,
// key version 4): a change bumps the group epoch.
type topicMeta struct {
	ID         TopicID
	Partitions int32
}

// owner is the member currently owning a partition, at its epoch.
type owner struct {
	member string
	epoch  int32
}

// consumerGroup is the consumer protocol's part of a Group.
type consumerGroup struct {
	epoch           int32 // group epoch
	assignmentEpoch int32 // epoch of the target assignment
	members         map[string]*ConsumerMember
	static          map[string]string     // instance id -> member id
	target          map[string]Assignment // member id -> target assignment
	subMeta         map[string]topicMeta  // subscribed topics by name
	metaView        Topics                // the topics view subMeta was computed in (nil: none yet)
	owners          map[TopicID]map[int32]owner
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{
		members: map[string]*ConsumerMember{}, static: map[string]string{},
		target: map[string]Assignment{}, subMeta: map[string]topicMeta{}, owners: map[TopicID]map[int32]owner{},
	}
}

// newConsumerGroupFor makes g (a new group, or an empty or simple classic one keeping its
// offsets) a consumer group.
func newConsumerGroupFor(g *Group, now int64) {
	g.protocol = ProtocolConsumer
	g.protocolType = consumerProtocolType
	g.cons = newConsumerGroup()
	g.state = Empty
	g.stateTime = now
	g.generation, g.protocolName, g.leader = 0, "", ""
	g.members, g.order = map[string]*Member{}, nil
	g.static, g.pending, g.pendingSync, g.supported = map[string]string{}, map[string]struct{}{}, map[string]struct{}{}, map[string]int{}
	g.numAwaitingJoin = 0
	g.subscribed, g.subscribedKnown = map[string]struct{}{}, true
}

// sortedMembers returns the members ordered by id.
func (c *consumerGroup) sortedMembers() []*ConsumerMember {
	ms := make([]*ConsumerMember, 0, len(c.members))
	for _, m := range c.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *ConsumerMember) int { return strings.Compare(a.ID, b.ID) })
	return ms
}

// state derives the group's KIP-848 state.
func (c *consumerGroup) state() ConsumerState {
	switch {
	case len(c.members) == 0:
		return ConsumerEmpty
	case c.epoch > c.assignmentEpoch:
		return ConsumerAssigning
	}
	for _, m := range c.members {
		if !m.reconciledTo(c.assignmentEpoch) {
			return ConsumerReconciling
		}
	}
	return ConsumerStable
}

// partitionEpoch is the epoch of a partition's current owner, or -1 if it has none.
func (c *consumerGroup) partitionEpoch(id TopicID, p int32) int32 {
	if o, ok := c.owners[id][p]; ok {
		return o.epoch
	}
	return -1
}

// put replaces member old (nil: none) by m (nil: removed), keeping owners and static.
func (c *consumerGroup) put(old, m *ConsumerMember) {
	if old != nil {
		c.dropOwners(old, old.Assigned)
		c.dropOwners(old, old.PendingRevocation)
		delete(c.members, old.ID)
		if old.InstanceID != nil && c.static[*old.InstanceID] == old.ID {
			delete(c.static, *old.InstanceID)
		}
	}
	if m == nil {
		return
	}
	c.members[m.ID] = m
	if m.InstanceID != nil {
		c.static[*m.InstanceID] = m.ID
	}
	c.addOwners(m, m.Assigned)
	c.addOwners(m, m.PendingRevocation)
}

func (c *consumerGroup) addOwners(m *ConsumerMember, a Assignment) {
	for id, ps := range a {
		o := c.owners[id]
		if o == nil {
			o = map[int32]owner{}
			c.owners[id] = o
		}
		for _, p := range ps {
			if cur, ok := o[p]; ok && cur.member != m.ID {
				// Unreachable by construction (reconciliation never hands out an owned
				// partition); a corrupt log could still say so. The earlier owner keeps it.
				continue
			}
			o[p] = owner{m.ID, m.MemberEpoch}
		}
	}
}

func (c *consumerGroup) dropOwners(m *ConsumerMember, a Assignment) {
	for id, ps := range a {
		o := c.owners[id]
		for _, p := range ps {
			if cur, ok := o[p]; ok && cur.member == m.ID {
				delete(o, p)
			}
		}
		if len(o) == 0 {
			delete(c.owners, id)
		}
	}
}

// staticMember returns the member of an instance id, or nil.
func (c *consumerGroup) staticMember(instance *string) *ConsumerMember {
	if instance == nil {
		return nil
	}
	if id, ok := c.static[*instance]; ok {
		return c.members[id]
	}
	return nil
}

// numClassic counts the members that joined with the classic protocol.
func (c *consumerGroup) numClassic() int {
	n := 0
	for _, m := range c.members {
		if m.usesClassic() {
			n++
		}
	}
	return n
}

// sortedTopicNames returns the subscription metadata's topic names, sorted.
func (c *consumerGroup) sortedTopicNames() []string {
	names := make([]string, 0, len(c.subMeta))
	for n := range c.subMeta {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// sortedStrings returns ss sorted without duplicates (a new slice; nil stays nil).
func sortedStrings(ss []string) []string {
	if ss == nil {
		return nil
	}
	out := slices.Clone(ss)
	slices.Sort(out)
	return slices.Compact(out)
}
