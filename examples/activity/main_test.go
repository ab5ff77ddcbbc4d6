package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
	"github.com/gregor-project/gregor/examples/internal/extest"
)

// TestActivity runs the program, under each processing guarantee, against an embedded
// Gregor node with page views keyed by user, some out of order within the grace period
// (counted), some past it (dropped), one without a time (its record timestamp counts) and
// one that is not JSON (skipped). It waits until every user's count per minute is the one
// computed here, stops the program with SIGTERM expecting a clean exit, and reads the whole
// output again: no update after the expected last one.
func TestActivity(t *testing.T) {
	bin := extest.Build(t)
	for _, g := range []string{"at_least_once", "exactly_once_v2"} {
		t.Run(g, func(t *testing.T) { testActivity(t, bin, g) })
	}
}

func testActivity(t *testing.T, bin, guarantee string) {
	n := embedtest.Start(t, embed.Options{})
	cl := extest.Client(t, n.Addr())
	extest.CreateTopics(t, cl, 3, nil, "views", "counts")
	p := extest.Start(t, bin, "--bootstrap-server", n.Addr(), "--processing-guarantee", guarantee, "--input", "views", "--output", "counts",
		"--application-id", "activity-example", "--window", "1m", "--grace", "1m")

	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	at := func(m, s int) time.Time { return base.Add(time.Duration(m)*time.Minute + time.Duration(s)*time.Second) }
	views := []PageView{
		{"alice", "/", at(0, 5)},
		{"bob", "/", at(0, 10)},
		{"alice", "/cart", at(0, 50)},
		{"carol", "/", at(1, 2)},
		{"alice", "/pay", at(1, 10)},
		{"bob", "/help", at(0, 40)}, // out of order; its window closes at 10:02
		{"alice", "/", at(2, 30)},
		{"bob", "/cart", at(2, 45)},
		{"alice", "/old", at(0, 30)}, // past the grace period: alice is at 10:02:30
		{"bob", "/pay", at(1, 30)},   // out of order, window open until 10:03
		{"carol", "/", time.Time{}},  // no time: the record's timestamp, 10:02:50
		{"alice", "/", at(3, 5)},
		{"bob", "/", at(3, 10)},
		{"bob", "/old", at(1, 5)}, // past the grace period: bob is at 10:03:10
		{"carol", "/cart", at(2, 55)},
		{"alice", "/done", at(3, 20)},
		{"bob", "/done", at(3, 40)},
		{"carol", "/done", at(3, 15)},
	}
	var rs []*kgo.Record
	var events []extest.Event
	for i, v := range views {
		val, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		ts, evTime := v.Time, v.Time
		if v.Time.IsZero() {
			ts = at(2, 50)
			evTime = ts
			val = []byte(fmt.Sprintf(`{"user":%q,"page":%q}`, v.User, v.Page))
		}
		rs = append(rs, &kgo.Record{Topic: "views", Key: []byte(v.User), Value: val, Timestamp: ts})
		events = append(events, extest.Event{Key: v.User, Time: evTime})
		if i == 3 {
			rs = append(rs, &kgo.Record{Topic: "views", Key: []byte("bob"), Value: []byte("not json"), Timestamp: at(1, 0)})
		}
	}
	want := map[string]int64{}
	for i, ws := range extest.Windows(t, events, time.Minute, time.Minute, time.Minute) {
		for _, w := range ws {
			want[events[i].Key+"@"+w.Format(time.RFC3339)]++
		}
	}
	if want["alice@2026-01-01T10:00:00Z"] != 2 || want["bob@2026-01-01T10:01:00Z"] != 1 || want["carol@2026-01-01T10:02:00Z"] != 2 {
		t.Fatalf("test data: expected counts %v", want)
	}
	extest.Produce(t, cl, rs...)

	got := map[string]int64{}
	apply := func(r *kgo.Record) {
		c, err := strconv.ParseInt(string(r.Value), 10, 64)
		if err != nil {
			t.Errorf("count %q of %q is not decimal", r.Value, r.Key)
		}
		got[string(r.Key)] = c
	}
	describe := func() string { return fmt.Sprintf("counts %v, want %v", got, want) }
	extest.Await(t, n.Addr(), "counts", p, apply, func() bool { return maps.Equal(got, want) }, describe)
	p.Stop(t)

	clear(got)
	for _, r := range extest.ReadAll(t, n.Addr(), "counts") {
		apply(r)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("after exit: %s", describe())
	}
}
