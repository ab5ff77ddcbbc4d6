package cli

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParsePlan(t *testing.T) {
	plan, err := ParsePlan([]byte(`{"partitions":[{"topic":"a","partition":1,"replicas":[3,1,2],"log_dirs":["any","any","any"]},
		{"topic":"b","partition":0,"replicas":[2]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := ReassignmentPlan{Version: 1, Partitions: []PlanPartition{
		{Topic: "a", Partition: 1, Replicas: []int32{3, 1, 2}, LogDirs: []string{"any", "any", "any"}},
		{Topic: "b", Partition: 0, Replicas: []int32{2}},
	}}
	if !reflect.DeepEqual(plan, want) {
		t.Fatalf("parsed %+v, want %+v", plan, want)
	}
	// What Assignment.Plan prints parses back to the same assignment.
	again, err := ParsePlan([]byte(plan.Assignment().Plan().MarshalCompact()))
	if err != nil || !reflect.DeepEqual(again.Assignment(), plan.Assignment()) {
		t.Fatalf("round trip: %+v, %v", again, err)
	}
	if got := plan.Topics(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Topics() = %v", got)
	}
}

func TestParsePlanErrors(t *testing.T) {
	tests := []struct {
		plan string
		want []string
	}{
		{`{"version":1,"partitions":[`, []string{"malformed"}},
		{`{"version":1,"partitions":[{"topic":"a","partition":"x","replicas":[1]}]}`, []string{"malformed"}},
		{`{"version":1,"partitions":[]} trailing`, []string{"malformed"}},
		{`{"version":2,"partitions":[{"topic":"a","partition":0,"replicas":[1]}]}`, []string{"version 2"}},
		{`{"version":1}`, []string{`no "partitions"`}},
		{`{"version":1,"partitions":[]}`, []string{"no partitions"}},
		{`{"partitions":[{"partition":0,"replicas":[1]}]}`, []string{`partitions[0]: no "topic"`}},
		{`{"partitions":[{"topic":"a","replicas":[1]}]}`, []string{`partitions[0]: topic a: no "partition"`}},
		{`{"partitions":[{"topic":"a","partition":0,"replicas":[1]},{"topic":"a","partition":0,"replicas":[2]}]}`,
			[]string{"partitions[1] (a-0): partition listed twice (also partitions[0])"}},
		{`{"partitions":[{"topic":"a","partition":0,"replicas":[]}]}`, []string{"partitions[0] (a-0): no replicas"}},
		{`{"partitions":[{"topic":"a","partition":0,"replicas":null}]}`, []string{"partitions[0] (a-0): no replicas"}},
		{`{"partitions":[{"topic":"a","partition":0}]}`, []string{"partitions[0] (a-0): no replicas"}},
		{`{"partitions":[{"topic":"a","partition":0,"replicas":[1,2,1]}]}`, []string{"partitions[0] (a-0): broker 1 listed twice in replicas [1,2,1]"}},
		{`{"partitions":[{"topic":"a","partition":-1,"replicas":[1]}]}`, []string{"negative partition -1"}},
		{`{"partitions":[{"topic":"a","partition":0,"replicas":[-3]}]}`, []string{"negative broker id -3"}},
		{`{"partitions":[{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}`, []string{"1 log_dirs for 2 replicas"}},
		{`{"partitions":[{"topic":"a","partition":0,"replicas":[1],"log_dirs":["/data"]}]}`, []string{`log dir "/data"`}},
		// Every problem is reported, not only the first.
		{`{"partitions":[{"topic":"a","partition":0,"replicas":[]},{"topic":"b","partition":3,"replicas":[4,4]}]}`,
			[]string{"partitions[0] (a-0): no replicas", "partitions[1] (b-3): broker 4 listed twice"}},
	}
	for _, tt := range tests {
		_, err := ParsePlan([]byte(tt.plan))
		if err == nil {
			t.Errorf("%s: no error", tt.plan)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", tt.plan, err, w)
			}
		}
	}
}

func TestCheckPlan(t *testing.T) {
	current := Assignment{}
	current.Set("a", 0, []int32{1, 2})
	current.Set("a", 1, []int32{2, 3})
	brokers := []int32{3, 1, 2}
	ok := ReassignmentPlan{Version: 1, Partitions: []PlanPartition{{Topic: "a", Partition: 1, Replicas: []int32{3, 1}}}}
	if err := CheckPlan(ok, current, brokers); err != nil {
		t.Fatalf("valid plan: %v", err)
	}
	bad := ReassignmentPlan{Version: 1, Partitions: []PlanPartition{
		{Topic: "nosuch", Partition: 0, Replicas: []int32{1}},
		{Topic: "a", Partition: 7, Replicas: []int32{1}},
		{Topic: "a", Partition: 0, Replicas: []int32{1, 9}},
	}}
	err := CheckPlan(bad, current, brokers)
	if err == nil {
		t.Fatal("invalid plan accepted")
	}
	for _, w := range []string{
		"partitions[0] (nosuch-0): unknown topic nosuch",
		"partitions[1] (a-7): unknown partition: topic a has 2 partition(s)",
		"partitions[2] (a-0): broker 9 is not in the cluster (brokers: 1,2,3)",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}

// checkBalanced verifies GenerateAssignment's promises for one result.
// Leader balance is promised when every partition has the same replica
// count (rf > 0 or uniform current counts).
func checkBalanced(t *testing.T, what string, current, got Assignment, brokers []int32, rf int) {
	t.Helper()
	uniform := true
	counts := map[int]bool{}
	for _, e := range current.Plan().Partitions {
		counts[len(e.Replicas)] = true
	}
	if rf <= 0 && len(counts) > 1 {
		uniform = false
	}
	replicas, leaders := map[int32]int{}, map[int32]int{}
	for _, b := range brokers {
		replicas[b], leaders[b] = 0, 0
	}
	for _, e := range current.Plan().Partitions {
		rs, ok := got.Lookup(e.Topic, e.Partition)
		if !ok {
			t.Fatalf("%s: %s missing from the result", what, e.name())
		}
		want := rf
		if want <= 0 {
			want = len(e.Replicas)
		}
		if len(rs) != want {
			t.Fatalf("%s: %s has %d replicas %v, want %d", what, e.name(), len(rs), rs, want)
		}
		seen := map[int32]bool{}
		for _, r := range rs {
			if _, ok := replicas[r]; !ok {
				t.Fatalf("%s: %s placed on broker %d, not one of %v", what, e.name(), r, brokers)
			}
			if seen[r] {
				t.Fatalf("%s: %s has broker %d twice: %v", what, e.name(), r, rs)
			}
			seen[r] = true
			replicas[r]++
		}
		leaders[rs[0]]++
	}
	if spread(replicas) > 1 {
		t.Fatalf("%s: replicas per broker %v are not balanced", what, replicas)
	}
	if uniform && spread(leaders) > 1 {
		t.Fatalf("%s: leaders per broker %v are not balanced", what, leaders)
	}
}

func spread(m map[int32]int) int {
	lo, hi := -1, -1
	for _, n := range m {
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	return hi - lo
}

func TestGenerateAssignmentBalancedRandom(t *testing.T) {
	for seed := range uint64(1000) {
		rng := rand.New(rand.NewPCG(seed, 7))
		nb := 1 + rng.IntN(7)
		var brokers []int32
		for b := range int32(nb) {
			brokers = append(brokers, b+1)
		}
		// Current replicas live on brokers 1..nb+2: some are not allowed.
		current := Assignment{}
		uniform := 1 + rng.IntN(3) // every partition's count on odd seeds
		for ti := range 1 + rng.IntN(3) {
			for p := range int32(1 + rng.IntN(12)) {
				n := 1 + rng.IntN(3)
				if seed%2 == 1 {
					n = uniform
				}
				perm := rng.Perm(nb + 2)
				var rs []int32
				for _, x := range perm[:n] {
					rs = append(rs, int32(x+1))
				}
				current.Set(fmt.Sprintf("t%d", ti), p, rs)
			}
		}
		rf := rng.IntN(nb + 1) // 0: keep each partition's count
		if rf == 0 {
			for _, e := range current.Plan().Partitions {
				if len(e.Replicas) > nb {
					rf = nb
				}
			}
		}
		what := fmt.Sprintf("seed %d (%d brokers, rf %d)", seed, nb, rf)
		got, err := GenerateAssignment(current, brokers, rf)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		checkBalanced(t, what, current, got, brokers, rf)
		rev := slices.Clone(brokers)
		slices.Reverse(rev)
		again, _ := GenerateAssignment(current, rev, rf)
		if !reflect.DeepEqual(got, again) {
			t.Fatalf("%s: not deterministic:\n%v\n%v", what, got, again)
		}
	}
}

// threeBrokerAssignment: 12 partitions of rf 3 round-robin over brokers
// 1-3, leaders rotating (balanced already).
func threeBrokerAssignment() Assignment {
	a := Assignment{}
	for p := range int32(12) {
		a.Set("t", p, []int32{p%3 + 1, (p+1)%3 + 1, (p+2)%3 + 1})
	}
	return a
}

func TestGenerateAssignmentKeepsBalancedAssignment(t *testing.T) {
	cur := threeBrokerAssignment()
	got, err := GenerateAssignment(cur, []int32{1, 2, 3}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, cur) {
		t.Fatalf("a balanced assignment changed:\n%v\n%v", cur.Plan().MarshalCompact(), got.Plan().MarshalCompact())
	}
}

func TestGenerateAssignmentMinimalMovement(t *testing.T) {
	cur := threeBrokerAssignment()

	// Adding broker 4: 36 replicas, 9 per broker: exactly 9 move, and 3 leaderships.
	got, err := GenerateAssignment(cur, []int32{1, 2, 3, 4}, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkBalanced(t, "add broker", cur, got, []int32{1, 2, 3, 4}, 0)
	if n := movedReplicas(cur, got); n != 9 {
		t.Errorf("adding a broker moved %d replicas, want 9", n)
	}
	leaderMoves := 0
	for _, e := range cur.Plan().Partitions {
		if rs, _ := got.Lookup(e.Topic, e.Partition); rs[0] != e.Replicas[0] {
			leaderMoves++
		}
	}
	if leaderMoves != 3 {
		t.Errorf("adding a broker moved %d leaderships, want 3", leaderMoves)
	}

	// Removing broker 3 from four: only broker 3's replicas move.
	four := got
	got, err = GenerateAssignment(four, []int32{1, 2, 4}, 2)
	if err != nil {
		t.Fatal(err)
	}
	checkBalanced(t, "remove broker, rf 2", four, got, []int32{1, 2, 4}, 2)
	for _, e := range got.Plan().Partitions {
		if slices.Contains(e.Replicas, 3) {
			t.Fatalf("%s still on the removed broker: %v", e.name(), e.Replicas)
		}
	}
	// With rf 3 on brokers 1,2,4 every partition holds all three, so the
	// only moves are the replicas broker 3 held.
	got, err = GenerateAssignment(four, []int32{1, 2, 4}, 3)
	if err != nil {
		t.Fatal(err)
	}
	on3 := 0
	for _, e := range four.Plan().Partitions {
		if slices.Contains(e.Replicas, 3) {
			on3++
		}
	}
	if n := movedReplicas(four, got); n != on3 {
		t.Errorf("removing broker 3 moved %d replicas, want the %d it held", n, on3)
	}
}

func TestGenerateAssignmentReplicationFactor(t *testing.T) {
	cur := Assignment{}
	for p := range int32(6) {
		cur.Set("t", p, []int32{1})
	}
	got, err := GenerateAssignment(cur, []int32{1, 2, 3}, 3)
	if err != nil {
		t.Fatal(err)
	}
	checkBalanced(t, "rf 1 -> 3", cur, got, []int32{1, 2, 3}, 3)
	// Two of six partitions keep broker 1 as leader (its fair share).
	kept := 0
	for _, e := range got.Plan().Partitions {
		if e.Replicas[0] == 1 {
			kept++
		}
	}
	if kept != 2 {
		t.Errorf("broker 1 leads %d partitions, want 2", kept)
	}
	for _, tt := range []struct {
		brokers []int32
		rf      int
		want    string
	}{
		{nil, 1, "no brokers"},
		{[]int32{1, 2}, 3, "replication factor 3 is larger than the 2 broker(s)"},
		{[]int32{-1}, 1, "negative broker id"},
	} {
		if _, err := GenerateAssignment(cur, tt.brokers, tt.rf); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("brokers %v rf %d: error %v, want %q", tt.brokers, tt.rf, err, tt.want)
		}
	}
}

func TestParseBrokerIDs(t *testing.T) {
	if got, err := parseBrokerIDs(" 3, 1,2 "); err != nil || !slices.Equal(got, []int32{3, 1, 2}) {
		t.Errorf("parseBrokerIDs = %v, %v", got, err)
	}
	for _, s := range []string{"", "1,x", "1,1", "-2", "99999999999"} {
		if _, err := parseBrokerIDs(s); err == nil {
			t.Errorf("parseBrokerIDs(%q): no error", s)
		}
	}
}

func TestPlanThrottle(t *testing.T) {
	current := Assignment{}
	current.Set("a", 0, []int32{1, 2})
	current.Set("a", 1, []int32{2, 3})
	current.Set("b", 0, []int32{1})
	plan := ReassignmentPlan{Version: 1, Partitions: []PlanPartition{
		{Topic: "a", Partition: 0, Replicas: []int32{1, 2}}, // unchanged: not throttled
		{Topic: "a", Partition: 1, Replicas: []int32{4, 3}},
		{Topic: "b", Partition: 0, Replicas: []int32{5, 1}},
	}}
	th := planThrottle(plan, current)
	if !slices.Equal(th.brokers, []int32{1, 2, 3, 4, 5}) {
		t.Errorf("brokers %v", th.brokers)
	}
	wantLeaders := map[string]string{"a": "1:2,1:3", "b": "0:1"}
	wantFollows := map[string]string{"a": "1:4", "b": "0:5"}
	if !reflect.DeepEqual(th.leaders, wantLeaders) || !reflect.DeepEqual(th.follows, wantFollows) {
		t.Errorf("leaders %v follows %v, want %v %v", th.leaders, th.follows, wantLeaders, wantFollows)
	}
	if !planThrottle(ReassignmentPlan{Partitions: plan.Partitions[:1]}, current).empty() {
		t.Error("a plan that moves nothing throttles something")
	}
}
