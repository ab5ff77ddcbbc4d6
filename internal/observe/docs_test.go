package observe

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The dashboard and the alert rules in docs/ use only metrics a broker serves, and
// docs/metrics.md names every metric it serves: a renamed metric breaks this test, not a
// user's dashboard.
func TestDocsNameServedMetrics(t *testing.T) {
	m := New()
	m.Watch(fixed{
		Broker:     &BrokerStats{MetadataLag: 0},
		Partitions: []PartitionStats{{Topic: "a", Leader: true, Replicas: 1, ISR: 1}},
		Groups:     []GroupStats{{"g", "Stable"}},
		Lags:       []OffsetLag{{Group: "g", Topic: "a"}},
		Conns:      []ListenerConn{{Listener: "PLAINTEXT"}},
		Controller: &ControllerStats{Active: true},
	})
	now := time.Now()
	m.Requests.Observe(0, 0, &Timing{Received: now, Handling: now, Handled: now, Sent: now})
	m.Topics.For("a")
	m.Log.Flushed(0)
	m.Raft.Committed(0)
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{"up": true} // Prometheus's own
	var families []string
	for _, f := range fams {
		n := f.GetName()
		served[n] = true
		families = append(families, n)
		if f.GetType().String() == "HISTOGRAM" {
			served[n+"_bucket"], served[n+"_sum"], served[n+"_count"] = true, true, true
		}
	}
	metricsDoc := read(t, "../../docs/metrics.md")
	for _, n := range families {
		if strings.HasPrefix(n, "kafka_") && !strings.Contains(metricsDoc, n) && !documentedByPrefix(metricsDoc, n) {
			t.Errorf("docs/metrics.md does not list %s", n)
		}
	}
	name := regexp.MustCompile(`\b(kafka_[a-z_]+|go_[a-z_]+|process_[a-z_]+)\b`)
	for _, file := range []string{"../../docs/alerts.yml", "../../docs/grafana-dashboard.json"} {
		text := read(t, file)
		if strings.HasSuffix(file, ".json") {
			var v any
			if err := json.Unmarshal([]byte(text), &v); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
		}
		for _, n := range name.FindAllString(text, -1) {
			if !served[n] {
				t.Errorf("%s uses %s, which no broker serves", file, n)
			}
		}
	}
}

// documentedByPrefix: metrics sharing a prefix are listed as "...numgroupsstable" after the
// first of them.
func documentedByPrefix(doc, n string) bool {
	return strings.Contains(doc, "..."+n[strings.LastIndex(n, "_")+1:])
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
