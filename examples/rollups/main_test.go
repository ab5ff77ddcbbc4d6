package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
	"github.com/gregor-project/gregor/examples/internal/extest"
)

// TestRollups runs the program, under each processing guarantee, against an embedded Gregor
// node with measurements of three series (keyed host/metric, as the program groups them, so
// each series keeps its order through the repartition) in 5-minute windows starting every
// minute: some out of order in every window (counted), one out of order with only its newer
// windows still open (counted in those alone), one past every window's grace period
// (dropped), one that is not JSON (skipped). Values are multiples of 1/4, so sums are exact
// in any order. It waits until every window's count, sum and average are those computed
// here, stops the program with SIGTERM expecting a clean exit, and reads the whole output
// again.
func TestRollups(t *testing.T) {
	bin := extest.Build(t)
	for _, g := range []string{"at_least_once", "exactly_once_v2"} {
		t.Run(g, func(t *testing.T) { testRollups(t, bin, g) })
	}
}

func testRollups(t *testing.T, bin, guarantee string) {
	const size, advance, grace = 5 * time.Minute, time.Minute, time.Minute
	n := embedtest.Start(t, embed.Options{})
	cl := extest.Client(t, n.Addr())
	extest.CreateTopics(t, cl, 3, nil, "metrics", "rollups")
	p := extest.Start(t, bin, "--bootstrap-server", n.Addr(), "--processing-guarantee", guarantee, "--input", "metrics", "--output", "rollups",
		"--application-id", "rollups-example", "--window", size.String(), "--advance", advance.String(), "--grace", grace.String())

	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	at := func(m, s int) time.Time { return base.Add(time.Duration(m)*time.Minute + time.Duration(s)*time.Second) }
	ms := []Measurement{
		{"h1", "cpu", 50, at(0, 10)},
		{"h2", "cpu", 20, at(0, 20)},
		{"h1", "mem", 1024, at(0, 30)},
		{"h1", "cpu", 60.5, at(1, 10)},
		{"h2", "cpu", 30.25, at(1, 40)},
		{"h1", "cpu", 40, at(0, 50)}, // out of order, every window open
		{"h1", "mem", 2048, at(3, 0)},
		{"h1", "cpu", 70, at(4, 40)},
		{"h2", "cpu", 25, at(5, 30)},
		{"h1", "cpu", 80, at(7, 5)},
		{"h1", "cpu", 90, at(3, 10)}, // windows from 09:59 to 10:01 closed, 10:02 and 10:03 open
		{"h2", "cpu", 35.75, at(6, 0)},
		{"h1", "mem", 4096, at(6, 10)},
		{"h1", "cpu", 99, at(0, 5)}, // every window closed
		{"h1", "mem", 512, at(7, 40)},
		{"h2", "cpu", 40, at(7, 50)},
		{"h1", "cpu", 85.5, at(7, 55)},
	}
	var rs []*kgo.Record
	var events []extest.Event
	for i, m := range ms {
		v, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		key := m.Host + "/" + m.Metric
		rs = append(rs, &kgo.Record{Topic: "metrics", Key: []byte(key), Value: v, Timestamp: m.Time})
		events = append(events, extest.Event{Key: key, Time: m.Time})
		if i == 8 {
			rs = append(rs, &kgo.Record{Topic: "metrics", Key: []byte(key), Value: []byte("cpu=99"), Timestamp: at(5, 31)})
		}
	}
	want := map[string]Rollup{}
	for i, ws := range extest.Windows(t, events, size, advance, grace) {
		for _, w := range ws {
			k := events[i].Key + "@" + w.Format(time.RFC3339)
			r := want[k]
			r.Host, r.Metric, r.WindowStart, r.WindowEnd = ms[i].Host, ms[i].Metric, w, w.Add(size)
			r.Count++
			r.Sum += ms[i].Value
			r.Avg = r.Sum / float64(r.Count)
			want[k] = r
		}
	}
	// The partly late measurement counts in its two newer windows only; the late one in none.
	if want["h1/cpu@2026-01-01T10:03:00Z"].Sum != 70+80+90+85.5 || want["h1/cpu@2026-01-01T10:01:00Z"].Sum != 60.5+70 ||
		want["h1/cpu@2026-01-01T09:56:00Z"].Count != 2 {
		t.Fatalf("test data: expected rollups %v", want)
	}
	extest.Produce(t, cl, rs...)

	got := map[string]Rollup{}
	apply := func(r *kgo.Record) {
		var ro Rollup
		if err := json.Unmarshal(r.Value, &ro); err != nil {
			t.Errorf("rollup %q: %v", r.Value, err)
		}
		got[string(r.Key)] = ro
	}
	equal := func() bool {
		return maps.EqualFunc(got, want, func(a, b Rollup) bool {
			return a.Host == b.Host && a.Metric == b.Metric && a.WindowStart.Equal(b.WindowStart) &&
				a.WindowEnd.Equal(b.WindowEnd) && a.Count == b.Count && a.Sum == b.Sum && a.Avg == b.Avg
		})
	}
	describe := func() string { return fmt.Sprintf("rollups %v, want %v", got, want) }
	extest.Await(t, n.Addr(), "rollups", p, apply, equal, describe)
	p.Stop(t)

	clear(got)
	for _, r := range extest.ReadAll(t, n.Addr(), "rollups") {
		apply(r)
	}
	if !equal() {
		t.Fatalf("after exit: %s", describe())
	}
}
