package share

import (
	"errors"
	"slices"
)

// Membership errors, translated to Kafka codes in internal/api.
var (
	ErrUnknownMember = errors.New("unknown share group member") // UNKNOWN_MEMBER_ID
	ErrFencedEpoch   = errors.New("fenced member epoch")        // FENCED_MEMBER_EPOCH
	ErrInvalidMember = errors.New("invalid member id")          // INVALID_REQUEST
	ErrGroupNotEmpty = errors.New("share group is not empty")   // NON_EMPTY_GROUP
	ErrNoGroup       = errors.New("no such share group")        // GROUP_ID_NOT_FOUND
)

// Topics resolves a subscribed topic name to its id and partition count (the metadata
// image as the coordinator sees it).
type Topics interface {
	Topic(name string) (id [16]byte, partitions int32, ok bool)
}

// TopicPartitions is one topic's part of an assignment.
type TopicPartitions struct {
	ID         [16]byte
	Name       string
	Partitions []int32
}

// Member is one member of a share group.
type Member struct {
	ID         string
	Epoch      int32
	ClientID   string
	ClientHost string
	Rack       string
	Topics     []string // subscribed topic names, sorted
	Assignment []TopicPartitions
	deadline   int64 // session expiry (ms)
}

// Group is one share group's membership on its coordinator: a clock-free core driven by
// heartbeats and a time. Every member is assigned every partition of every topic it
// subscribes to, so all of them fetch from every partition and the partition leaders share
// records out (Kafka's simple assignor when members outnumber nothing: each partition may go
// to every member). The group epoch rises whenever the membership, a subscription or a
// subscribed topic's partitions change; a member's epoch is the group epoch of the
// assignment it was last given.
type Group struct {
	ID      string
	Epoch   int32
	Members map[string]*Member
	// Subscribed is every topic a member of the group subscribed to since the group was
	// made on this coordinator (the members may have left since): the topics whose
	// share-partitions may have state, which deleting the group and describing its offsets
	// look up on the share coordinators, as Kafka's coordinator keeps the group's
	// initialized share-partitions.
	Subscribed map[string]bool
}

// NewGroup is an empty share group.
func NewGroup(id string) *Group {
	return &Group{ID: id, Members: map[string]*Member{}, Subscribed: map[string]bool{}}
}

// Heartbeat is one ShareGroupHeartbeat: epoch 0 joins (member id chosen by the client), -1
// leaves, otherwise it must carry the member's current epoch. topics nil keeps the
// subscription. It returns the member as it now stands (nil after a leave) and whether its
// assignment changed (the answer then carries it).
func (g *Group) Heartbeat(id string, epoch int32, topics []string, client, host, rack string, meta Topics, nowMs, sessionMs int64) (*Member, bool, error) {
	if id == "" {
		return nil, false, ErrInvalidMember
	}
	m := g.Members[id]
	bump := false // the group epoch rises once per heartbeat that changes the group
	switch {
	case epoch == -1:
		if m == nil {
			return nil, false, ErrUnknownMember
		}
		delete(g.Members, id)
		g.Epoch++
		return nil, false, nil
	case epoch == 0:
		if m == nil {
			m = &Member{ID: id}
			g.Members[id] = m
			bump = true
		}
	case m == nil:
		return nil, false, ErrUnknownMember
	case epoch != m.Epoch:
		return nil, false, ErrFencedEpoch
	}
	m.ClientID, m.ClientHost, m.Rack = client, host, rack
	m.deadline = nowMs + sessionMs
	if topics != nil {
		sorted := slices.Clone(topics)
		slices.Sort(sorted)
		sorted = slices.Compact(sorted)
		if !slices.Equal(sorted, m.Topics) {
			m.Topics = sorted
			bump = true
		}
		for _, t := range sorted {
			g.Subscribed[t] = true
		}
	}
	want := assign(m.Topics, meta)
	moved := !sameAssignment(want, m.Assignment)
	if bump || moved {
		g.Epoch++
	}
	// A member joining (epoch 0, a rejoin too) is always told its assignment.
	changed := epoch == 0 || moved
	if changed {
		m.Assignment = want
		m.Epoch = g.Epoch
	}
	return m, changed, nil
}

// Expire removes the members whose session ended at or before nowMs and returns their ids.
func (g *Group) Expire(nowMs int64) []string {
	var gone []string
	for id, m := range g.Members {
		if m.deadline <= nowMs {
			delete(g.Members, id)
			gone = append(gone, id)
		}
	}
	if len(gone) > 0 {
		g.Epoch++
		slices.Sort(gone)
	}
	return gone
}

// State is the group's state as ListGroups and ShareGroupDescribe name it.
func (g *Group) State() string {
	if len(g.Members) == 0 {
		return "Empty"
	}
	return "Stable"
}

// assign is a member's assignment: every partition of every subscribed topic that exists.
func assign(topics []string, meta Topics) []TopicPartitions {
	var out []TopicPartitions
	for _, name := range topics {
		id, n, ok := meta.Topic(name)
		if !ok {
			continue
		}
		tp := TopicPartitions{ID: id, Name: name, Partitions: make([]int32, n)}
		for i := range tp.Partitions {
			tp.Partitions[i] = int32(i)
		}
		out = append(out, tp)
	}
	return out
}

func sameAssignment(a, b []TopicPartitions) bool {
	return slices.EqualFunc(a, b, func(x, y TopicPartitions) bool {
		return x.ID == y.ID && slices.Equal(x.Partitions, y.Partitions)
	})
}
