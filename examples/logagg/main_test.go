package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
	"github.com/gregor-project/gregor/examples/internal/extest"
)

// TestLogAgg runs the program, under each processing guarantee, against an embedded Gregor
// node with log lines keyed by service: errors in any case among other levels, errors out
// of order within the grace period (one of them pushing a window over the threshold), an
// error past it that would have (dropped, so no alert), a window going well over the
// threshold (one alert), and a line that is not JSON (skipped). It waits until the error
// counts per service and minute and the alerts are those computed here, stops the program
// with SIGTERM expecting a clean exit, and reads both topics again: nothing more was
// written.
func TestLogAgg(t *testing.T) {
	bin := extest.Build(t)
	for _, g := range []string{"at_least_once", "exactly_once_v2"} {
		t.Run(g, func(t *testing.T) { testLogAgg(t, bin, g) })
	}
}

func testLogAgg(t *testing.T, bin, guarantee string) {
	const threshold = 2
	n := embedtest.Start(t, embed.Options{})
	cl := extest.Client(t, n.Addr())
	extest.CreateTopics(t, cl, 3, nil, "logs", "errors", "alerts")
	p := extest.Start(t, bin, "--bootstrap-server", n.Addr(), "--processing-guarantee", guarantee, "--input", "logs", "--output", "errors",
		"--alerts", "alerts", "--threshold", strconv.Itoa(threshold), "--application-id", "logagg-example",
		"--window", "1m", "--grace", "30s")

	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	at := func(m, s int) time.Time { return base.Add(time.Duration(m)*time.Minute + time.Duration(s)*time.Second) }
	lines := []LogLine{
		{"api", "ERROR", "timeout", at(0, 5)},
		{"api", "INFO", "ok", at(0, 6)},
		{"db", "ERROR", "deadlock", at(0, 20)},
		{"api", "ERROR", "timeout", at(0, 40)},
		{"web", "WARN", "slow", at(0, 45)},
		{"db", "ERROR", "deadlock", at(1, 10)},
		{"api", "ERROR", "timeout", at(1, 15)},
		{"api", "ERROR", "late but in grace", at(0, 55)}, // api@10:00 goes to 3: alert
		{"db", "ERROR", "late but in grace", at(0, 50)},  // db@10:00 is 2
		{"web", "error", "lower case", at(1, 20)},
		{"db", "ERROR", "deadlock", at(2, 0)},
		{"db", "ERROR", "past grace", at(0, 58)}, // db is at 10:02, db@10:00 closed at 10:01:30
		{"web", "Error", "mixed case", at(1, 25)},
		{"web", "ERROR", "500", at(1, 50)}, // web@10:01 goes to 3: alert
		{"web", "ERROR", "500", at(2, 10)},
		{"api", "ERROR", "timeout", at(2, 20)},
		{"api", "ERROR", "timeout", at(2, 25)},
		{"api", "ERROR", "timeout", at(2, 30)}, // api@10:02 goes to 3: alert
		{"api", "ERROR", "timeout", at(2, 35)}, // and to 4: no second alert
		{"api", "INFO", "recovered", at(2, 36)},
		{"db", "ERROR", "deadlock", at(2, 40)},
	}
	var rs []*kgo.Record
	var errs []extest.Event
	for i, l := range lines {
		v, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, &kgo.Record{Topic: "logs", Key: []byte(l.Service), Value: v, Timestamp: l.Time})
		if strings.ToUpper(l.Level) == "ERROR" {
			errs = append(errs, extest.Event{Key: l.Service, Time: l.Time})
		}
		if i == 10 {
			rs = append(rs, &kgo.Record{Topic: "logs", Key: []byte("db"), Value: []byte("ERROR db down"), Timestamp: at(2, 1)})
		}
	}
	wantCounts := map[string]int64{}
	for i, ws := range extest.Windows(t, errs, time.Minute, time.Minute, 30*time.Second) {
		for _, w := range ws {
			wantCounts[errs[i].Key+"@"+w.Format(time.RFC3339)]++
		}
	}
	var wantAlerts []string
	for k, c := range wantCounts {
		if c > threshold {
			svc, start, _ := strings.Cut(k, "@")
			ws, err := time.Parse(time.RFC3339, start)
			if err != nil {
				t.Fatal(err)
			}
			wantAlerts = append(wantAlerts, alertString(k, Alert{svc, ws, ws.Add(time.Minute), threshold + 1, threshold}))
		}
	}
	slices.Sort(wantAlerts)
	if len(wantAlerts) != 3 || wantCounts["db@2026-01-01T10:00:00Z"] != 2 || wantCounts["api@2026-01-01T10:02:00Z"] != 4 {
		t.Fatalf("test data: expected counts %v, alerts %v", wantCounts, wantAlerts)
	}
	extest.Produce(t, cl, rs...)

	counts := map[string]int64{}
	applyCount := func(r *kgo.Record) {
		c, err := strconv.ParseInt(string(r.Value), 10, 64)
		if err != nil {
			t.Errorf("count %q of %q is not decimal", r.Value, r.Key)
		}
		counts[string(r.Key)] = c
	}
	var alerts []string
	applyAlert := func(r *kgo.Record) {
		var a Alert
		if err := json.Unmarshal(r.Value, &a); err != nil {
			t.Errorf("alert %q: %v", r.Value, err)
		}
		alerts = append(alerts, alertString(string(r.Key), a))
		slices.Sort(alerts)
	}
	describeCounts := func() string { return fmt.Sprintf("counts %v, want %v", counts, wantCounts) }
	describeAlerts := func() string { return fmt.Sprintf("alerts %q, want %q", alerts, wantAlerts) }
	extest.Await(t, n.Addr(), "errors", p, applyCount, func() bool { return maps.Equal(counts, wantCounts) }, describeCounts)
	extest.Await(t, n.Addr(), "alerts", p, applyAlert, func() bool { return slices.Equal(alerts, wantAlerts) }, describeAlerts)
	p.Stop(t)

	clear(counts)
	alerts = nil
	for _, r := range extest.ReadAll(t, n.Addr(), "errors") {
		applyCount(r)
	}
	for _, r := range extest.ReadAll(t, n.Addr(), "alerts") {
		applyAlert(r)
	}
	if !maps.Equal(counts, wantCounts) || !slices.Equal(alerts, wantAlerts) {
		t.Fatalf("after exit: %s; %s", describeCounts(), describeAlerts())
	}
}

// alertString is an alert and its key, comparable.
func alertString(key string, a Alert) string {
	return fmt.Sprintf("%s %s %s-%s %d>%d", key, a.Service, a.WindowStart.UTC().Format(time.RFC3339),
		a.WindowEnd.UTC().Format(time.RFC3339), a.Errors, a.Threshold)
}
