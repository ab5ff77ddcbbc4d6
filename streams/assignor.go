package streams

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// taskAssignor is the group balancer of a streams application, protocol "stream" as Kafka
// Streams names its own. It assigns tasks, not partitions: a task (sub-topology, partition)
// goes to one member with every source partition it reads, and the member's consumer is
// assigned those partitions. The assignment is:
//
//   - sticky: a task stays with the member that ran it in the previous generation, then
//     goes preferably to a member keeping a warm standby copy of its state;
//   - even: every member gets floor(T/n) or ceil(T/n) active tasks of the T, so adding an
//     instance moves only its fair share;
//   - with standbys: each stateful task gets Config.NumStandbyReplicas standby copies, each
//     on a member other than its active one and other than its other standbys.
//
// The leader's configuration decides the number of standbys, as in Kafka Streams. A member
// asking for the application's shutdown (KIP-671) in its subscription makes the leader
// assign nothing and put the shutdown code in every member's assignment.
type taskAssignor struct{ a *App }

func (taskAssignor) ProtocolName() string { return "stream" }
func (taskAssignor) IsCooperative() bool  { return false }

func (t taskAssignor) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = interests
	meta.Generation = generation
	meta.UserData = t.a.subscription(current).encode()
	return meta.AppendTo(nil)
}

func (t taskAssignor) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	var ka kmsg.ConsumerMemberAssignment
	if err := ka.ReadFrom(assignment); err != nil {
		return nil, fmt.Errorf("streams: assignment: %w", err)
	}
	info, err := decodeAssignment(ka.UserData)
	if err != nil {
		return nil, err
	}
	t.a.setAssignment(info)
	out := map[string][]int32{}
	for _, tp := range ka.Topics {
		out[tp.Topic] = tp.Partitions
	}
	return out, nil
}

func (t taskAssignor) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	b, err := kgo.NewConsumerBalancer(t, members)
	return b, b.MemberTopics(), err
}

// Balance decodes every member's subscription, assigns the tasks of the topics' partitions
// and encodes each member's partitions and assignment info.
func (t taskAssignor) Balance(b *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	var members []memberSub
	b.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		s, err := decodeSubscription(meta.UserData)
		if err != nil {
			b.SetError(fmt.Errorf("member %s: %w", m.MemberID, err))
		}
		members = append(members, memberSub{id: m.MemberID, sub: s})
	})
	a := t.a
	var tasks []TaskID
	stateful := map[TaskID]bool{}
	for _, s := range a.topo.subs {
		n := int32(0)
		for logical := range s.sources {
			n = max(n, topics[a.topo.topicName(a.cfg.ApplicationID, logical)])
		}
		for p := range n {
			id := TaskID{Subtopology: s.id, Partition: p}
			tasks = append(tasks, id)
			stateful[id] = a.hasChangelog(s)
		}
	}
	plan := assignTasks(members, tasks, stateful, a.cfg.NumStandbyReplicas)
	a.log.Info("streams: assigned tasks", "members", len(members), "tasks", len(tasks))
	out := syncAssignment{}
	for _, m := range members {
		ma := plan.members[m.id]
		ka := kmsg.NewConsumerMemberAssignment()
		parts := map[string][]int32{}
		for _, id := range ma.active {
			for logical := range a.topo.subs[id.Subtopology].sources {
				full := a.topo.topicName(a.cfg.ApplicationID, logical)
				if id.Partition < topics[full] {
					parts[full] = append(parts[full], id.Partition)
				}
			}
		}
		for _, topic := range slices.Sorted(maps.Keys(parts)) {
			at := kmsg.NewConsumerMemberAssignmentTopic()
			at.Topic, at.Partitions = topic, parts[topic]
			ka.Topics = append(ka.Topics, at)
		}
		ka.UserData = assignmentInfo{active: ma.active, standby: ma.standby, hosts: plan.hosts, errorCode: plan.errorCode}.encode()
		out = append(out, kmsg.SyncGroupRequestGroupAssignment{MemberID: m.id, MemberAssignment: ka.AppendTo(nil)})
	}
	return out
}

// hasChangelog is whether a sub-topology has a store with a changelog (a standby of its
// tasks has something to keep warm).
func (a *App) hasChangelog(s *subtopology) bool {
	for _, name := range s.stores {
		if a.topo.b.stores[name].changelog {
			return true
		}
	}
	return false
}

type syncAssignment []kmsg.SyncGroupRequestGroupAssignment

func (s syncAssignment) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment { return s }

// memberSub is one member's subscription, by member id.
type memberSub struct {
	id  string
	sub subscriptionInfo
}

// taskPlan is the result of assignTasks.
type taskPlan struct {
	members   map[string]*memberTasks
	hosts     []hostTasks
	errorCode int32
}

type memberTasks struct{ active, standby []TaskID }

// assignTasks is the assignor's deterministic core: the same members (in the same order),
// tasks and standby count give the same plan. See taskAssignor for the rules.
func assignTasks(members []memberSub, tasks []TaskID, stateful map[TaskID]bool, standbys int) taskPlan {
	plan := taskPlan{members: map[string]*memberTasks{}}
	for _, m := range members {
		plan.members[m.id] = &memberTasks{}
		if m.sub.errorCode == assignorShutdownRequested {
			plan.errorCode = assignorShutdownRequested
		}
	}
	if plan.errorCode != assignorNone || len(members) == 0 {
		return plan
	}
	tasks = sortTasks(slices.Clone(tasks))
	owner := map[TaskID]string{}
	warm := map[TaskID][]string{} // members holding a task's state, in member order
	for _, m := range members {
		for _, id := range m.sub.prevActive {
			if _, ok := owner[id]; !ok {
				owner[id] = m.id
			}
		}
		for _, id := range slices.Concat(m.sub.prevActive, m.sub.standby) {
			if !slices.Contains(warm[id], m.id) {
				warm[id] = append(warm[id], m.id)
			}
		}
	}

	// Every member ends with floor or floor+1 tasks, and exactly extra of them with floor+1;
	// the same holds within each sub-topology where stickiness and warm state allow, so each
	// instance gets a part of every kind of work.
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.id
	}
	total := newQuota(len(tasks), len(members))
	perSub := map[int]*quota{}
	for _, id := range tasks {
		if perSub[id.Subtopology] == nil {
			n := 0
			for _, t := range tasks {
				if t.Subtopology == id.Subtopology {
					n++
				}
			}
			perSub[id.Subtopology] = newQuota(n, len(members))
		}
	}
	active := map[TaskID]string{}
	give := func(m string, id TaskID) {
		total.add(m)
		perSub[id.Subtopology].add(m)
		active[id] = m
		plan.members[m].active = append(plan.members[m].active, id)
	}
	// pick is the least loaded member of among that may take id (by both quotas, or when
	// relaxed by the total alone), "" when none.
	pick := func(among []string, id TaskID, relaxed bool) string {
		best := ""
		for _, m := range among {
			if plan.members[m] == nil || !total.canTake(m) || (!relaxed && !perSub[id.Subtopology].canTake(m)) {
				continue
			}
			if best == "" || total.load[m] < total.load[best] {
				best = m
			}
		}
		return best
	}
	// Sticky first: the previous owner keeps its task while it has room.
	for _, id := range tasks {
		if m, ok := owner[id]; ok && pick([]string{m}, id, false) != "" {
			give(m, id)
		}
	}
	// Then to a member with the task's state warm (within the total quota only: a short
	// restore comes before the spread over sub-topologies), before any task without such a
	// member takes the room; then to the least loaded.
	for _, id := range tasks {
		if _, done := active[id]; !done {
			if m := pick(warm[id], id, true); m != "" {
				give(m, id)
			}
		}
	}
	for _, id := range tasks {
		if _, done := active[id]; !done {
			m := pick(ids, id, false)
			if m == "" {
				m = pick(ids, id, true)
			}
			give(m, id)
		}
	}

	// Standbys: on members other than the active one and the task's other standbys,
	// preferring a member that has the state warm, then the fewest standbys.
	sload := map[string]int{}
	for _, id := range tasks {
		if !stateful[id] {
			continue
		}
		placed := map[string]bool{active[id]: true}
		for range standbys {
			free := func(m string) bool { return plan.members[m] != nil && !placed[m] }
			best := ""
			for _, m := range warm[id] {
				if free(m) && (best == "" || sload[m] < sload[best]) {
					best = m
				}
			}
			if best == "" {
				for _, m := range ids {
					if free(m) && (best == "" || sload[m] < sload[best]) {
						best = m
					}
				}
			}
			if best == "" {
				break // fewer other members than standbys: as Kafka Streams, place what fits
			}
			placed[best] = true
			sload[best]++
			plan.members[best].standby = append(plan.members[best].standby, id)
		}
	}

	for _, m := range members {
		if m.sub.server == "" {
			continue
		}
		mt := plan.members[m.id]
		plan.hosts = append(plan.hosts, hostTasks{server: m.sub.server, active: sortTasks(mt.active), standby: sortTasks(mt.standby)})
	}
	return plan
}

// groupState is what this member last learned from the group: its assignment info and the
// other instances' tasks.
type groupState struct {
	sync.Mutex
	info     assignmentInfo
	assigned bool // an assignment has been received since Run started
}

// subscription is this member's subscription info: its application.server, the active
// tasks of its last assignment (an eager consumer has given their partitions up by the time
// it rejoins, so they come from the assignment info kept, and from current when the client
// still reports some), the standby tasks it keeps warm, and a shutdown request when one is
// pending.
func (a *App) subscription(current map[string][]int32) subscriptionInfo {
	s := subscriptionInfo{server: a.cfg.ApplicationServer}
	seen := map[TaskID]bool{}
	a.group.Lock()
	if a.group.assigned {
		for _, id := range a.group.info.active {
			seen[id] = true
			s.prevActive = append(s.prevActive, id)
		}
	}
	a.group.Unlock()
	for topic, parts := range current {
		sub, ok := a.topo.byTopic[a.full[topic]]
		if !ok {
			continue
		}
		for _, p := range parts {
			id := TaskID{Subtopology: sub.id, Partition: p}
			if !seen[id] {
				seen[id] = true
				s.prevActive = append(s.prevActive, id)
			}
		}
	}
	sortTasks(s.prevActive)
	s.standby = a.standby.warmTasks()
	if a.shutdownRequested.Load() {
		s.errorCode = assignorShutdownRequested
	}
	return s
}

// setAssignment keeps the assignment info of a new generation and hands the standby tasks
// to the standby reader.
func (a *App) setAssignment(info assignmentInfo) {
	a.group.Lock()
	a.group.info, a.group.assigned = info, true
	a.group.Unlock()
	if info.errorCode == assignorShutdownRequested {
		a.log.Warn("streams: an instance requested the application's shutdown")
		a.shutdownApplication.Store(true)
	}
	a.standby.set(info.standby, info.active)
}

// quota spreads n tasks over members: each takes floor or floor+1, and only extra of them
// floor+1.
type quota struct {
	floor, extra, atCeil int
	load                 map[string]int
}

func newQuota(n, members int) *quota {
	return &quota{floor: n / members, extra: n % members, load: map[string]int{}}
}

func (q *quota) canTake(m string) bool {
	return q.load[m] < q.floor || (q.load[m] == q.floor && q.atCeil < q.extra)
}

func (q *quota) add(m string) {
	if q.load[m] == q.floor {
		q.atCeil++
	}
	q.load[m]++
}
