package observe

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

type fixed Snapshot

func (f fixed) Snapshot() Snapshot { return Snapshot(f) }

// gathered is name{labels} -> value (a histogram's sample count and sum as name_count and
// name_sum) of everything m's registry reports.
func gathered(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, mt := range f.GetMetric() {
			key := f.GetName() + labelString(mt.GetLabel())
			switch {
			case mt.Counter != nil:
				out[key] = mt.GetCounter().GetValue()
			case mt.Gauge != nil:
				out[key] = mt.GetGauge().GetValue()
			case mt.Histogram != nil:
				out[f.GetName()+"_count"+labelString(mt.GetLabel())] = float64(mt.GetHistogram().GetSampleCount())
				out[f.GetName()+"_sum"+labelString(mt.GetLabel())] = mt.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

func labelString(ls []*dto.LabelPair) string {
	if len(ls) == 0 {
		return ""
	}
	var parts []string
	for _, l := range ls {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func expect(t *testing.T, got map[string]float64, want map[string]float64) {
	t.Helper()
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: missing", k)
		} else if g != v {
			t.Errorf("%s = %v, want %v", k, g, v)
		}
	}
}

// The scrape-time gauges are a function of the snapshot: the replica manager's counts over
// the partitions led, the log figures of every replica, lag as end less committed (never
// negative), groups by state, and the controller's counts only on a controller.
func TestCollectSnapshot(t *testing.T) {
	m := New()
	m.Watch(fixed{
		Broker: &BrokerStats{MetadataOffset: 41, MetadataLag: 2, FetchesWaiting: 3},
		Partitions: []PartitionStats{
			{Topic: "a", Partition: 0, Leader: true, Replicas: 3, ISR: 3, MinISR: 2, Size: 100, Segments: 1, LogEndOffset: 10, HighWatermark: 10, WaitingProduces: 1},
			{Topic: "a", Partition: 1, Leader: true, Replicas: 3, ISR: 2, MinISR: 2, Size: 200, Segments: 2, LogEndOffset: 20, HighWatermark: 20, WaitingProduces: 2},
			{Topic: "a", Partition: 2, Leader: true, Replicas: 3, ISR: 1, MinISR: 2},
			{Topic: "b", Partition: 0, Leader: false, Replicas: 3, ISR: 1, MinISR: 2, Size: 7, Segments: 1},
		},
		Groups: []GroupStats{{"g1", "Stable"}, {"g2", "Empty"}, {"g3", "Stable"}},
		Lags: []OffsetLag{
			{Group: "g1", Topic: "a", Partition: 0, Committed: 4, End: 10},
			{Group: "g1", Topic: "a", Partition: 1, Committed: 20, End: 20},
			{Group: "g2", Topic: "a", Partition: 0, Committed: 12, End: 10}, // committed past the end: no negative lag
		},
		Conns: []ListenerConn{{Listener: "PLAINTEXT", Connections: 5}},
	})
	got := gathered(t, m)
	expect(t, got, map[string]float64{
		"kafka_server_replicamanager_underreplicatedpartitions":                          2,
		"kafka_server_replicamanager_underminisrpartitioncount":                          1,
		"kafka_server_replicamanager_atminisrpartitioncount":                             1,
		"kafka_server_replicamanager_leadercount":                                        3,
		"kafka_server_replicamanager_partitioncount":                                     4,
		"kafka_log_log_size{partition=1,topic=a}":                                        200,
		"kafka_log_log_numlogsegments{partition=0,topic=b}":                              1,
		"kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation=Produce}": 3,
		"kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation=Fetch}":   3,
		"kafka_server_broker_metadata_metrics_last_applied_record_offset":                41,
		"kafka_server_broker_metadata_metrics_last_applied_record_offset_lag":            2,
		"kafka_server_socketservermetrics_connection_count{listener=PLAINTEXT}":          5,
		"kafka_coordinator_group_groupmetadatamanager_numgroups":                         3,
		"kafka_coordinator_group_groupmetadatamanager_numgroupsstable":                   2,
		"kafka_coordinator_group_groupmetadatamanager_numgroupsempty":                    1,
		"kafka_coordinator_group_groupmetadatamanager_numgroupspreparingrebalance":       0,
		"kafka_server_group_coordinator_metrics_group_count{state=stable}":               2,
		"kafka_consumergroup_lag{consumergroup=g1,partition=0,topic=a}":                  6,
		"kafka_consumergroup_lag{consumergroup=g1,partition=1,topic=a}":                  0,
		"kafka_consumergroup_lag{consumergroup=g2,partition=0,topic=a}":                  0,
		"kafka_consumergroup_current_offset{consumergroup=g1,partition=0,topic=a}":       4,
		"kafka_consumergroup_lag_sum{consumergroup=g1,topic=a}":                          6,
	})
	if _, ok := got["kafka_controller_kafkacontroller_activecontrollercount"]; ok {
		t.Error("a broker-only node reports controller gauges")
	}

	c := New()
	c.Watch(fixed{Controller: &ControllerStats{Active: true, OfflinePartitions: 1, FencedBrokers: 2, ActiveBrokers: 1, GlobalTopics: 4, GlobalParts: 9, LastAppliedOffset: 5, LastCommittedOffset: 6}})
	got = gathered(t, c)
	expect(t, got, map[string]float64{
		"kafka_controller_kafkacontroller_activecontrollercount":     1,
		"kafka_controller_kafkacontroller_offlinepartitionscount":    1,
		"kafka_controller_kafkacontroller_fencedbrokercount":         2,
		"kafka_controller_kafkacontroller_globalpartitioncount":      9,
		"kafka_controller_kafkacontroller_lastcommittedrecordoffset": 6,
	})
	if _, ok := got["kafka_server_replicamanager_leadercount"]; ok {
		t.Error("a controller-only node reports replica gauges")
	}

	// An active controller that could not count reports no cluster-wide figures (never 0
	// offline partitions it did not see).
	u := New()
	u.Watch(fixed{Controller: &ControllerStats{Active: true, Uncounted: true}})
	got = gathered(t, u)
	if _, ok := got["kafka_controller_kafkacontroller_offlinepartitionscount"]; ok {
		t.Error("an uncounted controller reports offline partitions")
	}
	expect(t, got, map[string]float64{"kafka_controller_kafkacontroller_activecontrollercount": 1})
}

// A request's phases land in its API key's histograms: local time is the handler's time less
// the remote wait, total runs from the request read to its answer written.
func TestRequestTiming(t *testing.T) {
	m := New()
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	m.Requests.Observe(0, 9, &Timing{Received: t0, Handling: ms(1), Handled: ms(31), Sent: ms(33), Remote: 20 * time.Millisecond, Throttle: 5 * time.Millisecond})
	m.Requests.Observe(0, 9, &Timing{Received: t0, Handling: t0, Handled: t0, Sent: t0})
	m.Requests.Observe(1, 99, &Timing{Received: t0, Handling: t0, Handled: t0, Sent: t0}) // version past the slots
	m.Requests.Observe(-1, 0, &Timing{})                                                  // not a key: ignored
	got := gathered(t, m)
	expect(t, got, map[string]float64{
		"kafka_network_requestmetrics_requests_total{request=Produce,version=9}": 2,
		"kafka_network_requestmetrics_requests_total{request=Fetch,version=31}":  1,
		"kafka_network_requestmetrics_requestqueuetimems_sum{request=Produce}":   1,
		"kafka_network_requestmetrics_localtimems_sum{request=Produce}":          10,
		"kafka_network_requestmetrics_remotetimems_sum{request=Produce}":         20,
		"kafka_network_requestmetrics_throttletimems_sum{request=Produce}":       5,
		"kafka_network_requestmetrics_responsesendtimems_sum{request=Produce}":   2,
		"kafka_network_requestmetrics_totaltimems_sum{request=Produce}":          33,
		"kafka_network_requestmetrics_totaltimems_count{request=Produce}":        2,
	})
	if RequestName(0) != "Produce" || RequestName(1) != "Fetch" || RequestName(32000) != "Unknown32000" {
		t.Errorf("names: %q %q %q", RequestName(0), RequestName(1), RequestName(32000))
	}
}

// A topic's counters are made once and dropped with the topic; nil handles count nothing.
func TestTopicCounters(t *testing.T) {
	m := New()
	a := m.Topics.For("a")
	if m.Topics.For("a") != a {
		t.Fatal("a second lookup made new counters")
	}
	a.Produced(3, 300)
	a.ProduceFailed(50)
	a.ProduceFailed(0)
	a.Fetched(120, false)
	a.Fetched(80, true)
	a.FetchFailed()
	a.Replicated(70)
	expect(t, gathered(t, m), map[string]float64{
		"kafka_server_brokertopicmetrics_messagesin_total{topic=a}":            3,
		"kafka_server_brokertopicmetrics_bytesin_total{topic=a}":               300,
		"kafka_server_brokertopicmetrics_bytesrejected_total{topic=a}":         50,
		"kafka_server_brokertopicmetrics_failedproducerequests_total{topic=a}": 2,
		"kafka_server_brokertopicmetrics_totalproducerequests_total{topic=a}":  3,
		"kafka_server_brokertopicmetrics_bytesout_total{topic=a}":              120,
		"kafka_server_brokertopicmetrics_replicationbytesout_total{topic=a}":   80,
		"kafka_server_brokertopicmetrics_replicationbytesin_total{topic=a}":    70,
		"kafka_server_brokertopicmetrics_failedfetchrequests_total{topic=a}":   1,
		"kafka_server_brokertopicmetrics_totalfetchrequests_total{topic=a}":    2,
	})
	m.Topics.Forget("a")
	if _, ok := gathered(t, m)["kafka_server_brokertopicmetrics_messagesin_total{topic=a}"]; ok {
		t.Error("a forgotten topic is still reported")
	}

	var nt *Topics
	nt.For("x").Produced(1, 1) // nil Topics, nil counters: nothing happens
	var nr *Requests
	nr.Observe(0, 0, &Timing{})
	var rc *ReplicaCounters
	rc.ISRChanged(true)
}

// The listener serves /metrics, /healthz always, and /readyz by the broker's readiness with
// the reason it is not ready.
func TestHTTPListener(t *testing.T) {
	m := New()
	var ready atomic.Bool
	s, err := Listen("127.0.0.1:0", m, func() (bool, string) {
		if ready.Load() {
			return true, ""
		}
		return false, "fenced by the controller"
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + s.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "fenced") {
		t.Errorf("/readyz not ready: %d %q", code, body)
	}
	ready.Store(true)
	if code, _ := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz ready: %d", code)
	}
	m.Topics.For("t").Produced(2, 20)
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, `kafka_server_brokertopicmetrics_messagesin_total{topic="t"} 2`) || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics: %d %.300q", code, body)
	}
}
