package streams

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
)

func tasksOf(subs, parts int) ([]TaskID, map[TaskID]bool) {
	var ts []TaskID
	stateful := map[TaskID]bool{}
	for s := range subs {
		for p := range parts {
			id := TaskID{Subtopology: s, Partition: int32(p)}
			ts = append(ts, id)
			stateful[id] = s == subs-1 // the last sub-topology has the store
		}
	}
	return ts, stateful
}

func members(n int) []memberSub {
	var ms []memberSub
	for i := range n {
		ms = append(ms, memberSub{id: fmt.Sprintf("m%d", i), sub: subscriptionInfo{server: fmt.Sprintf("h%d:80", i)}})
	}
	return ms
}

// withPrevious makes each member's subscription report the plan's tasks as its previous
// active and standby ones, as a member does when it rejoins.
func withPrevious(ms []memberSub, plan taskPlan) []memberSub {
	for i := range ms {
		if mt := plan.members[ms[i].id]; mt != nil {
			ms[i].sub.prevActive = slices.Clone(mt.active)
			ms[i].sub.standby = slices.Clone(mt.standby)
		}
	}
	return ms
}

func checkPlan(t *testing.T, plan taskPlan, tasks []TaskID, stateful map[TaskID]bool, standbys int, spread bool) {
	t.Helper()
	owner := map[TaskID]string{}
	lo, hi := len(tasks), 0
	for m, mt := range plan.members {
		for _, id := range mt.active {
			if o, dup := owner[id]; dup {
				t.Fatalf("task %s active on %s and %s", id, o, m)
			}
			owner[id] = m
		}
		lo, hi = min(lo, len(mt.active)), max(hi, len(mt.active))
	}
	if len(owner) != len(tasks) {
		t.Fatalf("%d of %d tasks assigned", len(owner), len(tasks))
	}
	if hi-lo > 1 {
		t.Fatalf("uneven: %d to %d tasks per member", lo, hi)
	}
	perSub := map[int]map[string]int{}
	for _, id := range tasks {
		if perSub[id.Subtopology] == nil {
			perSub[id.Subtopology] = map[string]int{}
			for m := range plan.members {
				perSub[id.Subtopology][m] = 0
			}
		}
		perSub[id.Subtopology][owner[id]]++
	}
	for sub, byMember := range perSub {
		if !spread {
			break
		}
		lo, hi := len(tasks), 0
		for _, n := range byMember {
			lo, hi = min(lo, n), max(hi, n)
		}
		if hi-lo > 1 {
			t.Fatalf("sub-topology %d uneven: %v", sub, byMember)
		}
	}
	for _, id := range tasks {
		var on []string
		for m, mt := range plan.members {
			if slices.Contains(mt.standby, id) {
				if m == owner[id] {
					t.Fatalf("standby of %s on its active member %s", id, m)
				}
				on = append(on, m)
			}
		}
		want := 0
		if stateful[id] {
			want = min(standbys, len(plan.members)-1)
		}
		if len(on) != want {
			t.Fatalf("task %s: standbys on %v, want %d", id, on, want)
		}
	}
}

// Adding a member moves only tasks to it (a fair share), none between the members that
// were there; removing one gives its tasks to the others and keeps theirs; a task whose
// member left goes to the member holding its standby.
func TestAssignTasksSticky(t *testing.T) {
	tasks, stateful := tasksOf(2, 6)
	ms := members(2)
	plan := assignTasks(ms, tasks, stateful, 1)
	checkPlan(t, plan, tasks, stateful, 1, true)

	grown := append(withPrevious(members(2), plan), members(3)[2])
	next := assignTasks(grown, tasks, stateful, 1)
	checkPlan(t, next, tasks, stateful, 1, true)
	moved := 0
	for _, m := range []string{"m0", "m1"} {
		for _, id := range next.members[m].active {
			if !slices.Contains(plan.members[m].active, id) {
				t.Fatalf("task %s moved to %s, which was already a member", id, m)
			}
		}
		moved += len(plan.members[m].active) - len(next.members[m].active)
	}
	if got := len(next.members["m2"].active); moved != got || got != len(tasks)/3 {
		t.Fatalf("moved %d tasks, the new member has %d, fair share %d", moved, got, len(tasks)/3)
	}

	// m1 leaves: its stateful tasks go to m0 or m2, whichever held their standby.
	survivors := withPrevious(members(3), next)
	survivors = slices.Delete(survivors, 1, 2)
	after := assignTasks(survivors, tasks, stateful, 1)
	checkPlan(t, after, tasks, stateful, 1, false) // warm state first
	for _, m := range []string{"m0", "m2"} {
		for _, id := range next.members[m].active {
			if !slices.Contains(after.members[m].active, id) {
				t.Fatalf("task %s left %s, which stayed", id, m)
			}
		}
	}
	for _, id := range next.members["m1"].active {
		if !stateful[id] {
			continue
		}
		for _, m := range []string{"m0", "m2"} {
			if slices.Contains(next.members[m].standby, id) && !slices.Contains(after.members[m].active, id) {
				t.Fatalf("task %s of the departed member did not go to %s, its standby", id, m)
			}
		}
	}

	// The same input gives the same plan.
	if again := assignTasks(survivors, tasks, stateful, 1); !reflect.DeepEqual(again, after) {
		t.Fatalf("not deterministic:\n%+v\n%+v", again, after)
	}
}

func TestAssignTasksStandbys(t *testing.T) {
	tasks, stateful := tasksOf(2, 4)
	for n := 1; n <= 4; n++ {
		for standbys := 0; standbys <= 3; standbys++ {
			plan := assignTasks(members(n), tasks, stateful, standbys)
			checkPlan(t, plan, tasks, stateful, standbys, true)
			if len(plan.hosts) != n {
				t.Fatalf("%d hosts for %d members", len(plan.hosts), n)
			}
		}
	}
}

// A member asking for the application's shutdown: nobody gets a task, everyone the code.
func TestAssignTasksShutdownRequested(t *testing.T) {
	tasks, stateful := tasksOf(1, 4)
	ms := members(3)
	ms[1].sub.errorCode = assignorShutdownRequested
	plan := assignTasks(ms, tasks, stateful, 1)
	if plan.errorCode != assignorShutdownRequested {
		t.Fatalf("error code %d", plan.errorCode)
	}
	for m, mt := range plan.members {
		if len(mt.active)+len(mt.standby) > 0 {
			t.Fatalf("%s assigned %+v during shutdown", m, mt)
		}
	}
}

func TestUserDataRoundTrip(t *testing.T) {
	s := subscriptionInfo{server: "localhost:8080", prevActive: []TaskID{{0, 1}, {1, 3}}, standby: []TaskID{{1, 0}}, errorCode: assignorShutdownRequested}
	got, err := decodeSubscription(s.encode())
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("subscription %+v %v, want %+v", got, err, s)
	}
	a := assignmentInfo{active: []TaskID{{0, 2}}, standby: []TaskID{{1, 1}},
		hosts: []hostTasks{{server: "a:1", active: []TaskID{{0, 2}}, standby: []TaskID{{1, 1}}}, {server: "b:2"}}}
	gota, err := decodeAssignment(a.encode())
	if err != nil || !reflect.DeepEqual(gota, a) {
		t.Fatalf("assignment %+v %v, want %+v", gota, err, a)
	}
	b := a.encode()
	b[0] = 9
	if _, err := decodeAssignment(b); err == nil {
		t.Fatal("an unknown version decoded")
	}
	if _, err := decodeSubscription(s.encode()[:7]); err == nil {
		t.Fatal("truncated user data decoded")
	}
}
