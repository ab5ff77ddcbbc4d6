package share

import (
	"errors"
	"slices"
	"strings"
	"sync"
)

// Session errors, translated to Kafka codes in internal/api.
var (
	ErrSessionNotFound = errors.New("share session not found")           // SHARE_SESSION_NOT_FOUND
	ErrSessionEpoch    = errors.New("invalid share session epoch")       // INVALID_SHARE_SESSION_EPOCH
	ErrAckOnOpen       = errors.New("acknowledgements on a new session") // INVALID_REQUEST
)

// Key names one share-partition: a group reading one topic partition.
type Key struct {
	Group     string
	Topic     [16]byte
	Partition int32
}

// TopicPartition is a topic partition of a share session.
type TopicPartition struct {
	Topic     [16]byte
	Partition int32
}

// session is one member's share session (KIP-932): the partitions it fetches and the epoch
// its next request must carry.
type session struct {
	parts []TopicPartition
	epoch int32
}

type memberKey struct{ group, member string }

// Manager holds the share groups this broker coordinates, the share-partitions it leads and
// the share sessions of their members. Safe for concurrent use.
//
// Lock order: Manager.mu, then a Part's mu; a Part's mu is never held while taking
// Manager.mu. Manager.mu is held only for map work, never across I/O; a Part's mu is held
// across its log read (one fetch of a share-partition at a time, as Kafka's fetch lock).
type Manager struct {
	mu struct {
		sync.Mutex
		groups   map[string]*Group
		parts    map[Key]*Part
		sessions map[memberKey]*session
	}
}

// NewManager is an empty Manager.
func NewManager() *Manager {
	m := &Manager{}
	m.mu.groups = map[string]*Group{}
	m.mu.parts = map[Key]*Part{}
	m.mu.sessions = map[memberKey]*session{}
	return m
}

// Part is one share-partition behind its lock.
type Part struct {
	mu          sync.Mutex
	p           *Partition
	leaderEpoch int32 // the partition's leader epoch the state was built in; immutable
	stateEpoch  int32 // the persisted state's epoch (WriteShareGroupState carries it); immutable
	watch       struct {
		sync.Mutex
		chans []chan struct{} // parked fetches, signalled when records become available
	}
}

// Watch registers ch (buffered) to get a non-blocking signal whenever an acknowledgement or
// a release may have made records available (or freed room in the window): a fetch parked
// for want of records retries then, as Kafka completes a delayed share fetch.
func (p *Part) Watch(ch chan struct{}) {
	p.watch.Lock()
	p.watch.chans = append(p.watch.chans, ch)
	p.watch.Unlock()
}

// Unwatch removes one registration of ch.
func (p *Part) Unwatch(ch chan struct{}) {
	p.watch.Lock()
	defer p.watch.Unlock()
	if i := slices.Index(p.watch.chans, ch); i >= 0 {
		p.watch.chans = slices.Delete(p.watch.chans, i, i+1)
	}
}

// UnlockChanged releases the share-partition after a change that may free records, and wakes
// the fetches parked on it.
func (p *Part) UnlockChanged() {
	p.mu.Unlock()
	p.watch.Lock()
	for _, ch := range p.watch.chans {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	p.watch.Unlock()
}

// Lock takes the share-partition for one fetch or acknowledgement; the caller works on the
// returned Partition and then calls Unlock.
func (p *Part) Lock() *Partition { p.mu.Lock(); return p.p }

// LeaderEpoch is the partition leader epoch the state was built in.
func (p *Part) LeaderEpoch() int32 { return p.leaderEpoch }

// Unlock releases the share-partition.
func (p *Part) Unlock() { p.mu.Unlock() }

// Partition returns the share-partition of k as led in leaderEpoch, creating it with start
// (called under the Manager's lock, only when it is created) and cfg. State kept from
// another leader epoch is dropped: this broker lost leadership in between, and what it held
// then is stale. The broker reads persisted state back and uses Install instead; this
// serves a share-partition kept in memory only.
func (m *Manager) Partition(k Key, leaderEpoch int32, cfg Config, start func() int64) *Part {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.mu.parts[k]
	if p == nil || p.leaderEpoch != leaderEpoch {
		p = &Part{p: NewPartition(cfg, start()), leaderEpoch: leaderEpoch}
		m.mu.parts[k] = p
	}
	return p
}

// Install makes p, read back from its persisted state (of stateEpoch), the share-partition
// of k as led in leaderEpoch, unless one was made in that epoch meanwhile (by a concurrent
// fetch): the one that is there is returned.
func (m *Manager) Install(k Key, leaderEpoch, stateEpoch int32, p *Partition) *Part {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.mu.parts[k]; cur != nil && cur.leaderEpoch == leaderEpoch {
		return cur
	}
	part := &Part{p: p, leaderEpoch: leaderEpoch, stateEpoch: stateEpoch}
	m.mu.parts[k] = part
	return part
}

// StateEpoch is the epoch of the persisted state the share-partition was read back from.
func (p *Part) StateEpoch() int32 { return p.stateEpoch }

// Existing returns the share-partition of k, or nil.
func (m *Manager) Existing(k Key) *Part {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.parts[k]
}

// Heartbeat applies a ShareGroupHeartbeat to group id (created on a member's first join),
// after removing the members whose session expired. Records held by a member whose session
// expired are released on the share-partitions of this broker; a member that leaves releases
// its records by closing its share session.
func (m *Manager) Heartbeat(id, member string, epoch int32, topics []string, client, host, rack string, meta Topics, nowMs, sessionMs int64) (Member, bool, error) {
	m.mu.Lock()
	g := m.mu.groups[id]
	if g == nil {
		if epoch != 0 {
			m.mu.Unlock()
			return Member{}, false, ErrUnknownMember
		}
		g = NewGroup(id)
		m.mu.groups[id] = g
	}
	gone := g.Expire(nowMs)
	mem, changed, err := g.Heartbeat(member, epoch, topics, client, host, rack, meta, nowMs, sessionMs)
	// A member leaving (epoch -1) keeps its share session: its client closes it with a last
	// ShareAcknowledge or ShareFetch (epoch -1) that may reach the partition leader after the
	// leave, and whose acknowledgements must still apply. Only a member whose session timed
	// out has its records released here.
	parts := m.releaseLocked(id, gone)
	m.mu.Unlock()
	release(parts, gone)
	if err != nil || mem == nil {
		return Member{}, false, err
	}
	return *mem, changed, nil
}

// releaseLocked forgets the sessions of the members gone from group id and returns the
// share-partitions of the group, whose records they may hold.
func (m *Manager) releaseLocked(id string, gone []string) []*Part {
	if len(gone) == 0 {
		return nil
	}
	for _, mem := range gone {
		delete(m.mu.sessions, memberKey{id, mem})
	}
	var parts []*Part
	for k, p := range m.mu.parts {
		if k.Group == id {
			parts = append(parts, p)
		}
	}
	return parts
}

func release(parts []*Part, members []string) {
	for _, p := range parts {
		sp := p.Lock()
		for _, mem := range members {
			sp.ReleaseMember(mem)
		}
		p.UnlockChanged()
	}
}

// Session applies a ShareFetch's or ShareAcknowledge's session fields and returns the
// partitions the session now fetches. Epoch 0 opens a new session of add (replacing one the
// member had); -1 closes it (the member's records are released once the caller has applied
// the request's acknowledgements: see CloseSession); any other epoch must be the session's
// next one, and add and forget change its partitions.
func (m *Manager) Session(group, member string, epoch int32, add, forget []TopicPartition) ([]TopicPartition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := memberKey{group, member}
	s := m.mu.sessions[k]
	switch {
	case epoch == 0:
		s = &session{epoch: 0}
		m.mu.sessions[k] = s
	case s == nil:
		return nil, ErrSessionNotFound
	case epoch == -1:
		return slices.Clone(s.parts), nil
	case epoch != s.epoch:
		return nil, ErrSessionEpoch
	}
	s.parts = slices.DeleteFunc(s.parts, func(tp TopicPartition) bool { return slices.Contains(forget, tp) })
	for _, tp := range add {
		if !slices.Contains(s.parts, tp) {
			s.parts = append(s.parts, tp)
		}
	}
	s.epoch = nextEpoch(s.epoch)
	return slices.Clone(s.parts), nil
}

// CheckSession checks a ShareAcknowledge's epoch, which must be the session's next (it is
// not 0: acknowledgements need an open session) and advances it; -1 is accepted and closes.
func (m *Manager) CheckSession(group, member string, epoch int32) error {
	if epoch == 0 {
		return ErrAckOnOpen
	}
	_, err := m.Session(group, member, epoch, nil, nil)
	return err
}

// CloseSession ends member's share session and releases every record it holds in group.
func (m *Manager) CloseSession(group, member string) {
	m.mu.Lock()
	parts := m.releaseLocked(group, []string{member})
	m.mu.Unlock()
	release(parts, []string{member})
}

// nextEpoch is the epoch after e, wrapping to 1 past the largest (0 and -1 are reserved).
func nextEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// GroupView is a copy of a share group's state for ShareGroupDescribe and ListGroups.
type GroupView struct {
	ID      string
	Epoch   int32
	State   string
	Members []Member
}

// Describe returns group id, after expiring its members at nowMs.
func (m *Manager) Describe(id string, nowMs int64) (GroupView, bool) {
	m.mu.Lock()
	g := m.mu.groups[id]
	if g == nil {
		m.mu.Unlock()
		return GroupView{}, false
	}
	gone := g.Expire(nowMs)
	parts := m.releaseLocked(id, gone)
	v := GroupView{ID: id, Epoch: g.Epoch, State: g.State()}
	for _, mem := range g.Members {
		v.Members = append(v.Members, *mem)
	}
	m.mu.Unlock()
	release(parts, gone)
	slices.SortFunc(v.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return v, true
}

// Groups lists the share groups this broker coordinates with their states, by id.
func (m *Manager) Groups() []GroupView {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]GroupView, 0, len(m.mu.groups))
	for id, g := range m.mu.groups {
		out = append(out, GroupView{ID: id, Epoch: g.Epoch, State: g.State()})
	}
	slices.SortFunc(out, func(a, b GroupView) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Has reports whether id is a share group of this broker.
func (m *Manager) Has(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.groups[id] != nil
}

// Delete removes an empty share group and its share-partitions' state here; it returns
// the share-partitions dropped here and the topics the group subscribed to, whose
// share-partitions' persisted state (wherever they are led) the caller deletes.
func (m *Manager) Delete(id string, nowMs int64) ([]Key, []string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.mu.groups[id]
	if g == nil {
		return nil, nil, ErrNoGroup
	}
	g.Expire(nowMs)
	if len(g.Members) > 0 {
		return nil, nil, ErrGroupNotEmpty
	}
	delete(m.mu.groups, id)
	var gone []Key
	for k := range m.mu.parts {
		if k.Group == id {
			delete(m.mu.parts, k)
			gone = append(gone, k)
		}
	}
	return gone, sortedNames(g.Subscribed), nil
}

// Subscribed returns the topics group's members have subscribed to (Group.Subscribed),
// sorted; nil when this coordinator has no such group.
func (m *Manager) Subscribed(group string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g := m.mu.groups[group]; g != nil {
		return sortedNames(g.Subscribed)
	}
	return nil
}

func sortedNames(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Summary is a share-partition's progress, for DescribeShareGroupOffsets.
type Summary struct {
	Start    int64 // share-partition start offset
	Finished int64 // acknowledged or archived records at or above Start
}

// Summaries returns the progress of every share-partition of group on this broker.
func (m *Manager) Summaries(group string) map[Key]Summary {
	m.mu.Lock()
	var keys []Key
	var parts []*Part
	for k, p := range m.mu.parts {
		if k.Group == group {
			keys, parts = append(keys, k), append(parts, p)
		}
	}
	m.mu.Unlock()
	out := make(map[Key]Summary, len(keys))
	for i, p := range parts {
		sp := p.Lock()
		out[keys[i]] = Summary{Start: sp.Start(), Finished: sp.Finished()}
		p.Unlock()
	}
	return out
}

// CheckEmpty checks that group id exists (ErrNoGroup) and has no members (ErrGroupNotEmpty),
// as resetting or deleting its share-partitions' state needs.
func (m *Manager) CheckEmpty(id string, nowMs int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.emptyLocked(id, nowMs)
}

// emptyLocked checks that group id exists and, its expired members removed, has none.
func (m *Manager) emptyLocked(id string, nowMs int64) error {
	g := m.mu.groups[id]
	if g == nil {
		return ErrNoGroup
	}
	gone := g.Expire(nowMs)
	for _, mem := range gone {
		delete(m.mu.sessions, memberKey{id, mem})
	}
	if len(g.Members) > 0 {
		return ErrGroupNotEmpty
	}
	return nil
}

// Reset makes p, just persisted in stateEpoch (AlterShareGroupOffsets of a partition led
// here in leaderEpoch), the share-partition of k, replacing what was held.
func (m *Manager) Reset(k Key, leaderEpoch, stateEpoch int32, p *Partition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.parts[k] = &Part{p: p, leaderEpoch: leaderEpoch, stateEpoch: stateEpoch}
}

// Drop forgets the share-partition of k held in memory here, if it is still old (nil:
// whatever is held): its persisted state was reset or deleted (AlterShareGroupOffsets,
// DeleteShareGroupOffsets, through the share coordinator), so the next fetch reads that
// state back, or starts afresh, instead of serving stale records.
func (m *Manager) Drop(k Key, old *Part) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.mu.parts[k]; cur != nil && (old == nil || cur == old) {
		delete(m.mu.parts, k)
	}
}
