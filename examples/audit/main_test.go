package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
	"github.com/gregor-project/gregor/examples/internal/extest"
)

// TestAudit runs the program, under each processing guarantee, against an embedded Gregor
// node: users in a compacted topic (one deleted by a tombstone), then events with no key
// and times out of order, for known users, the deleted one, one never seen and none. It
// waits for every enriched event (key, timestamp and value as computed here: known users'
// details, "unknown" for the others), then changes one user and adds another, and checks
// that later events see the change while earlier output stays as it was. It stops the
// program with SIGTERM expecting a clean exit and reads the whole output again: one
// enriched event per event.
func TestAudit(t *testing.T) {
	bin := extest.Build(t)
	for _, g := range []string{"at_least_once", "exactly_once_v2"} {
		t.Run(g, func(t *testing.T) { testAudit(t, bin, g) })
	}
}

func testAudit(t *testing.T, bin, guarantee string) {
	n := embedtest.Start(t, embed.Options{})
	cl := extest.Client(t, n.Addr())
	compact := "compact"
	extest.CreateTopics(t, cl, 3, nil, "events", "enriched")
	extest.CreateTopics(t, cl, 3, map[string]*string{"cleanup.policy": &compact}, "users")

	table := map[string]User{} // the users as the test wrote them
	var changelog map[string]User
	putUsers := func(us map[string]*User) {
		var rs []*kgo.Record
		for _, id := range slices.Sorted(maps.Keys(us)) {
			r := &kgo.Record{Topic: "users", Key: []byte(id)}
			if u := us[id]; u != nil {
				v, err := json.Marshal(u)
				if err != nil {
					t.Fatal(err)
				}
				r.Value = v
				table[id] = *u
			} else {
				delete(table, id)
			}
			rs = append(rs, r)
		}
		extest.Produce(t, cl, rs...)
	}
	p := extest.Start(t, bin, "--bootstrap-server", n.Addr(), "--processing-guarantee", guarantee, "--input", "events", "--users", "users",
		"--output", "enriched", "--application-id", "audit-example")
	// The events are joined with the table as it is when each is processed, and the
	// program reads users and events side by side: before sending events, wait until the
	// table holds the users (its changelog, <application.id>-users-changelog, has them).
	awaitTable := func() {
		changelog = map[string]User{}
		extest.Await(t, n.Addr(), "audit-example-users-changelog", p, func(r *kgo.Record) {
			if r.Value == nil {
				delete(changelog, string(r.Key))
				return
			}
			var u User
			if err := json.Unmarshal(r.Value, &u); err != nil {
				t.Errorf("changelog %q: %v", r.Value, err)
			}
			changelog[string(r.Key)] = u
		}, func() bool { return maps.Equal(changelog, table) }, func() string { return fmt.Sprintf("table %v, want %v", changelog, table) })
	}

	var want []string
	sendEvents := func(es ...Event) {
		var rs []*kgo.Record
		for _, e := range es {
			v, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, &kgo.Record{Topic: "events", Value: v, Timestamp: e.Time})
			u, ok := table[e.User]
			if !ok {
				u = User{Name: "unknown", Department: "unknown"}
			}
			want = append(want, enrichedString(e.User, e.Time, Enriched{e, u}))
		}
		slices.Sort(want)
		extest.Produce(t, cl, rs...)
	}
	var got []string
	apply := func(r *kgo.Record) {
		var e Enriched
		if err := json.Unmarshal(r.Value, &e); err != nil {
			t.Errorf("enriched %q: %v", r.Value, err)
		}
		got = append(got, enrichedString(string(r.Key), r.Timestamp, e))
		slices.Sort(got)
	}
	describe := func() string { return fmt.Sprintf("enriched\n%q\nwant\n%q", got, want) }
	awaitOutput := func() {
		got = nil
		extest.Await(t, n.Addr(), "enriched", p, apply, func() bool { return slices.Equal(got, want) }, describe)
	}

	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	putUsers(map[string]*User{
		"u1": {"Ada", "ada@example.com", "ops"},
		"u2": {"Brian", "brian@example.com", "dev"},
		"u3": {"Chen", "", "security"},
		"u4": {"Dana", "dana@example.com", "sales"},
	})
	putUsers(map[string]*User{"u4": nil})
	awaitTable()
	sendEvents(
		Event{"u1", "login", "/", at(10)},
		Event{"u2", "push", "/repos/1", at(20)},
		Event{"u1", "delete", "/repos/7", at(5)}, // out of order
		Event{"u3", "read", "/secrets", at(30)},
		Event{"u4", "login", "/", at(25)},  // deleted: unknown
		Event{"u9", "login", "/", at(1)},   // never seen: unknown
		Event{"", "anonymous", "/", at(2)}, // no user: unknown
		Event{"u2", "merge", "/repos/1", at(15)},
	)
	awaitOutput()

	putUsers(map[string]*User{"u2": {"Brian", "brian@example.com", "ops"}, "u9": {"Ivo", "", "dev"}})
	awaitTable()
	sendEvents(
		Event{"u2", "delete", "/repos/1", at(40)},
		Event{"u9", "login", "/", at(35)},
		Event{"u1", "logout", "/", at(3)},
	)
	awaitOutput()
	p.Stop(t)

	got = nil
	for _, r := range extest.ReadAll(t, n.Addr(), "enriched") {
		apply(r)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after exit: %s", describe())
	}
}

// enrichedString is an output record's key, timestamp and value, comparable.
func enrichedString(key string, ts time.Time, e Enriched) string {
	return fmt.Sprintf("%s %s %s %s %s %s %s %s %s", key, ts.UTC().Format(time.RFC3339), e.Event.User, e.Action, e.Resource,
		e.Time.UTC().Format(time.RFC3339), e.Name, e.Email, e.Department)
}
