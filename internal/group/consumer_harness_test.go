package group

import (
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeTopics is a Topics view; ids are derived from the names. Change it by making a new
// one (views are immutable, and compared by identity).
type fakeTopics struct{ parts map[string]int32 }

func topicID(name string) TopicID {
	var id TopicID
	copy(id[:], name)
	id[15] = 1
	return id
}

func (f *fakeTopics) Topic(name string) (TopicID, int32, bool) {
	n, ok := f.parts[name]
	return topicID(name), n, ok
}

func (f *fakeTopics) TopicByID(id TopicID) (string, int32, bool) {
	for name, n := range f.parts {
		if topicID(name) == id {
			return name, n, true
		}
	}
	return "", 0, false
}

func (f *fakeTopics) Names() []string {
	var ns []string
	for n := range f.parts {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// cgHarness drives consumer groups through a harness with a Topics view.
type cgHarness struct {
	*harness
	topics *fakeTopics
}

func newCGHarness(t *testing.T, cfg Config, topics map[string]int32) *cgHarness {
	return &cgHarness{harness: newHarness(t, cfg), topics: &fakeTopics{topics}}
}

// setTopics installs a new view of the topics.
func (h *cgHarness) setTopics(t map[string]int32) { h.topics = &fakeTopics{t} }

func (h *cgHarness) view() Topics { return h.topics }

func (h *cgHarness) cgh(req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	w := h.waiter("cgh")
	h.run(h.s.ConsumerGroupHeartbeat(h.now, w, req, Client{ID: "client", Host: "/127.0.0.1"}, h.view()))
	r, ok := h.reply(w).(*kmsg.ConsumerGroupHeartbeatResponse)
	if !ok {
		h.t.Fatalf("heartbeat not answered: %v", h.reply(w))
	}
	return r
}

// member simulates a consumer-protocol client: it applies each assignment it gets at once
// (revoking what it lost) and reports what it owns on every heartbeat.
type member struct {
	h        *cgHarness
	group    string
	id       string
	instance *string
	topics   []string
	regex    *string
	assignor *string
	epoch    int32
	owned    Assignment
	joined   bool
}

func (h *cgHarness) member(group, id string, topics ...string) *member {
	return &member{h: h, group: group, id: id, topics: topics, owned: Assignment{}}
}

func (m *member) request(epoch int32) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = m.group, m.id, epoch
	req.InstanceID = m.instance
	req.RebalanceTimeoutMillis = 30000
	req.SubscribedTopicNames = m.topics
	req.SubscribedTopicRegex = m.regex
	req.ServerAssignor = m.assignor
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if epoch != 0 {
		for _, id := range m.owned.sortedIDs() {
			req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: id, Partitions: m.owned[id]})
		}
	}
	return req
}

// send sends req and applies a successful answer; it returns the error code.
func (m *member) send(req *kmsg.ConsumerGroupHeartbeatRequest) int16 {
	m.h.t.Helper()
	r := m.h.cgh(req)
	if r.ErrorCode != 0 {
		return r.ErrorCode
	}
	if r.HeartbeatIntervalMillis <= 0 {
		m.h.t.Fatalf("heartbeat interval %d", r.HeartbeatIntervalMillis)
	}
	if r.MemberID != nil {
		m.id = *r.MemberID
	}
	m.epoch = r.MemberEpoch
	if r.Assignment != nil {
		m.owned = Assignment{}
		for _, t := range r.Assignment.Topics {
			m.owned[t.TopicID] = normalized(t.Partitions)
		}
	}
	return 0
}

func (m *member) join() {
	m.h.t.Helper()
	if c := m.send(m.request(0)); c != 0 {
		m.h.t.Fatalf("%s join: %v", m.id, kerr.ErrorForCode(c))
	}
	m.joined = true
}

func (m *member) beat() {
	m.h.t.Helper()
	if c := m.send(m.request(m.epoch)); c != 0 {
		m.h.t.Fatalf("%s heartbeat at epoch %d: %v", m.id, m.epoch, kerr.ErrorForCode(c))
	}
}

func (m *member) leave() int16 {
	req := m.request(leaveEpoch)
	if m.instance != nil {
		req = m.request(staticLeaveEpoch)
	}
	return m.h.cgh(req).ErrorCode
}

// parts lists the member's owned partitions of topic.
func (m *member) parts(topic string) []int32 { return m.owned[topicID(topic)] }

// settle heartbeats every member in turn until the group is Stable (at most rounds times).
func (h *cgHarness) settle(group string, ms ...*member) {
	h.t.Helper()
	for i := 0; i < 20; i++ {
		for _, m := range ms {
			m.beat()
		}
		if g := h.s.groups[group]; g != nil && g.cons.state() == ConsumerStable {
			return
		}
	}
	h.t.Fatalf("group %s did not settle: %s", group, h.describe(group))
}

func (h *cgHarness) describe(group string) string {
	g := h.s.groups[group]
	s := fmt.Sprintf("state %v epoch %d assignment epoch %d;", g.cons.state(), g.cons.epoch, g.cons.assignmentEpoch)
	for _, m := range g.cons.sortedMembers() {
		s += fmt.Sprintf(" %s(e%d %d %v pend %v target %v)", m.ID, m.MemberEpoch, m.State, m.Assigned, m.PendingRevocation, g.cons.target[m.ID])
	}
	return s
}

// checkInvariants verifies the consumer group invariants (see consumer.go).
func (c *consumerGroup) checkInvariants() error {
	seen := map[tp]string{}
	for id, m := range c.members {
		if m.ID != id {
			return fmt.Errorf("member %s stored as %s", m.ID, id)
		}
		if m.InstanceID != nil && c.static[*m.InstanceID] != id {
			return fmt.Errorf("instance %s maps to %q, not %s", *m.InstanceID, c.static[*m.InstanceID], id)
		}
		for _, a := range []Assignment{m.Assigned, m.PendingRevocation} {
			for tid, ps := range a {
				if len(ps) == 0 || !slices.IsSorted(ps) {
					return fmt.Errorf("member %s has a bad partition list %v", id, ps)
				}
				for _, p := range ps {
					k := tp{tid, p}
					if other, dup := seen[k]; dup {
						return fmt.Errorf("partition %v owned by %s and %s", k, other, id)
					}
					seen[k] = id
					if o, ok := c.owners[tid][p]; !ok || o.member != id || o.epoch != m.MemberEpoch {
						return fmt.Errorf("owner of %v is %+v, want %s at %d", k, o, id, m.MemberEpoch)
					}
				}
			}
		}
	}
	n := 0
	for _, ps := range c.owners {
		n += len(ps)
	}
	if n != len(seen) {
		return fmt.Errorf("%d owner entries for %d owned partitions", n, len(seen))
	}
	for inst, id := range c.static {
		if m := c.members[id]; m == nil || m.InstanceID == nil || *m.InstanceID != inst {
			return fmt.Errorf("static %s -> %s is not that member", inst, id)
		}
	}
	for id := range c.target {
		if c.members[id] == nil {
			return fmt.Errorf("target for non-member %s", id)
		}
	}
	return nil
}

func wantErr(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	if want == nil && got != 0 || want != nil && got != want.Code {
		t.Fatalf("%s: got %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}
