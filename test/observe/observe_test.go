// Package observe tests a cluster's /metrics, /healthz and /readyz over HTTP while real
// clients work against it and a broker fails.
package observe

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

const (
	topic      = "observed"
	partitions = 3
	group      = "observed-group"
	waitFor    = 30 * time.Second
)

// A three-broker cluster scraped through a produce / consume / failover run: the counters
// move as the work did, under-replicated partitions rise while a broker is down and fall back
// to 0 once it returns, every API key used has request-time samples, /readyz answers 200, and
// a group's lag is what was produced less what it committed.
func TestMetricsThroughFailover(t *testing.T) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3})
	for _, n := range c.Nodes() {
		c.WaitFor(t, waitFor, func() bool { return status(n.HTTPAddr(), "/readyz") == http.StatusOK }, fmt.Sprintf("node %d ready", n.ID))
		if got := status(n.HTTPAddr(), "/healthz"); got != http.StatusOK {
			t.Fatalf("node %d /healthz: %d", n.ID, got)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := c.Client(t, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": ptr("2")}, topic); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(t, waitFor, func() bool { return sumAll(c, "kafka_server_replicamanager_leadercount", nil) >= partitions }, "leaders elected")

	// Produce: records in, summed over the brokers (each counts what it leads), is what was
	// produced, and so are the bytes.
	produced := map[int32]int64{}
	produce := func(n int) {
		t.Helper()
		for i := range n {
			r := &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("value-" + strconv.Itoa(i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
			produced[r.Partition]++
		}
	}
	const first = 300
	produce(first)
	if got := sumAll(c, "kafka_server_brokertopicmetrics_messagesin_total", map[string]string{"topic": topic}); got != first {
		t.Fatalf("messages in: %v, produced %d", got, first)
	}
	if got := sumAll(c, "kafka_server_brokertopicmetrics_bytesin_total", map[string]string{"topic": topic}); got <= 0 {
		t.Fatalf("bytes in: %v", got)
	}
	// The followers replicated the same bytes (acks=all: before each answer).
	in := sumAll(c, "kafka_server_brokertopicmetrics_bytesin_total", map[string]string{"topic": topic})
	if got := sumAll(c, "kafka_server_brokertopicmetrics_replicationbytesin_total", map[string]string{"topic": topic}); got < in {
		t.Fatalf("replication bytes in: %v, produced %v bytes to RF 3", got, in)
	}

	// Consume everything (no group): bytes out move.
	cons := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for got := 0; got < first; {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
		got += fs.NumRecords()
	}
	cons.Close()
	if got := sumAll(c, "kafka_server_brokertopicmetrics_bytesout_total", map[string]string{"topic": topic}); got <= 0 {
		t.Fatalf("bytes out: %v", got)
	}

	// Every API key the clients used has requests and request-time samples.
	for _, api := range []string{"ApiVersions", "Metadata", "CreateTopics", "Produce", "Fetch", "ListOffsets"} {
		if got := sumAll(c, "kafka_network_requestmetrics_requests_total", map[string]string{"request": api}); got <= 0 {
			t.Errorf("%s: no requests counted", api)
		}
		for _, h := range []string{"requestqueuetimems", "localtimems", "remotetimems", "throttletimems", "responsesendtimems", "totaltimems"} {
			if got := sumAll(c, "kafka_network_requestmetrics_"+h, map[string]string{"request": api}); got <= 0 {
				t.Errorf("%s: no %s samples", api, h)
			}
		}
	}

	// A group commits part of each partition: its lag is produced less committed.
	committed := kadm.Offsets{}
	for p, n := range produced {
		committed.Add(kadm.Offset{Topic: topic, Partition: p, At: n / 3, LeaderEpoch: -1})
	}
	if _, err := adm.CommitOffsets(ctx, group, committed); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(t, waitFor, func() bool {
		for p, n := range produced {
			lbl := map[string]string{"consumergroup": group, "topic": topic, "partition": strconv.Itoa(int(p))}
			if sumAll(c, "kafka_consumergroup_lag", lbl) != float64(n-n/3) {
				return false
			}
		}
		return true
	}, "consumer lag = produced - committed")

	// A topic of one replica a partition: the group's coordinator holds at most one of its
	// partitions and asks the other leaders for their high watermarks.
	const single = "observed-rf1"
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, single); err != nil {
		t.Fatal(err)
	}
	singleProduced := map[int32]int64{}
	for i := range 90 {
		r := &kgo.Record{Topic: single, Key: []byte(strconv.Itoa(i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		singleProduced[r.Partition]++
	}
	committed = kadm.Offsets{}
	for p, n := range singleProduced {
		committed.Add(kadm.Offset{Topic: single, Partition: p, At: n / 2, LeaderEpoch: -1})
	}
	if _, err := adm.CommitOffsets(ctx, group, committed); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(t, waitFor, func() bool {
		for p, n := range singleProduced {
			lbl := map[string]string{"consumergroup": group, "topic": single, "partition": strconv.Itoa(int(p))}
			if sumAll(c, "kafka_consumergroup_lag", lbl) != float64(n-n/2) {
				return false
			}
		}
		return true
	}, "consumer lag of partitions led elsewhere = produced - committed")
	// Deleted, its series go.
	if _, err := adm.DeleteTopics(ctx, single); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(t, waitFor, func() bool {
		for _, n := range c.Nodes() {
			if _, ok := scrape(n.HTTPAddr())["kafka_server_brokertopicmetrics_messagesin_total"]; !ok {
				return false
			}
			if present(scrape(n.HTTPAddr()), "kafka_server_brokertopicmetrics_messagesin_total", map[string]string{"topic": single}) {
				return false
			}
		}
		return true
	}, "a deleted topic's metrics gone")

	// The cluster's view: one active controller, nothing offline, nothing under-replicated.
	if got := sumAll(c, "kafka_controller_kafkacontroller_activecontrollercount", nil); got != 1 {
		t.Fatalf("active controllers: %v", got)
	}
	if got := sumAll(c, "kafka_controller_kafkacontroller_offlinepartitionscount", nil); got != 0 {
		t.Fatalf("offline partitions: %v", got)
	}
	c.WaitFor(t, waitFor, func() bool { return sumAll(c, "kafka_server_replicamanager_underreplicatedpartitions", nil) == 0 }, "no under-replicated partitions")

	// Failover: a broker goes down. Its partitions are under-replicated on the survivors, its
	// leaderships move, and the records produced meanwhile are counted by the survivors.
	down := c.Node(3)
	down.Kill()
	survivors := []*testutil.Node{c.Node(1), c.Node(2)}
	// Every partition (the topic's and __consumer_offsets') has a replica on each broker.
	var under, all float64
	c.WaitFor(t, waitFor, func() bool {
		under = sum(survivors, "kafka_server_replicamanager_underreplicatedpartitions", nil)
		all = sum(survivors, "kafka_controller_kafkacontroller_globalpartitioncount", nil)
		return all >= partitions && under == all
	}, "every partition under-replicated with a broker down")
	if got := status(down.HTTPAddr(), "/healthz"); got != 0 {
		t.Fatalf("a killed broker's /healthz answered %d", got)
	}
	before := sum(survivors, "kafka_server_brokertopicmetrics_messagesin_total", map[string]string{"topic": topic})
	const second = 150
	produce(second)
	if got := sum(survivors, "kafka_server_brokertopicmetrics_messagesin_total", map[string]string{"topic": topic}) - before; got != second {
		t.Fatalf("messages in while a broker was down: %v, produced %d", got, second)
	}

	// It returns: the ISRs expand again, nothing is under-replicated, and it is ready.
	down.Start()
	c.WaitFor(t, waitFor, func() bool { return status(down.HTTPAddr(), "/readyz") == http.StatusOK }, "the restarted broker ready")
	c.WaitFor(t, waitFor, func() bool { return sumAll(c, "kafka_server_replicamanager_underreplicatedpartitions", nil) == 0 },
		"no under-replicated partitions once the broker is back")
	if got := sumAll(c, "kafka_server_replicamanager_isrexpands_total", nil); got < 1 {
		t.Fatalf("ISR expansions after the broker returned: %v", got)
	}
	if got := sumAll(c, "kafka_controller_kafkacontroller_activecontrollercount", nil); got != 1 {
		t.Fatalf("active controllers after failover: %v", got)
	}

	// A broker-only node reads the metadata log over the network: it is ready once caught
	// up, and its metadata lag (by the high watermark its controller reports) falls to 0.
	extra := c.AddBroker(4)
	c.WaitFor(t, waitFor, func() bool { return status(extra.HTTPAddr(), "/readyz") == http.StatusOK }, "the broker-only node ready")
	c.WaitFor(t, waitFor, func() bool {
		fams := scrape(extra.HTTPAddr())
		return present(fams, "kafka_server_broker_metadata_metrics_last_applied_record_offset_lag", nil) &&
			value(fams, "kafka_server_broker_metadata_metrics_last_applied_record_offset_lag", nil) == 0 &&
			value(fams, "kafka_server_broker_metadata_metrics_last_applied_record_offset", nil) > 0
	}, "the broker-only node's metadata lag 0")
	if present(scrape(extra.HTTPAddr()), "kafka_controller_kafkacontroller_activecontrollercount", nil) {
		t.Fatal("a broker-only node reports controller gauges")
	}
}

func ptr(s string) *string { return &s }

// status is the HTTP status of GET path on addr; 0 when nothing answers.
func status(addr, path string) int {
	resp, err := httpClient.Get("http://" + addr + path)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0
	}
	return resp.StatusCode
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

// scrape reads addr's /metrics; nil when it does not answer (a broker that is down).
func scrape(addr string) map[string]*dto.MetricFamily {
	resp, err := httpClient.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil
	}
	return fams
}

// value is the sum of the series of name matching labels in fams: a counter's or gauge's
// value, a histogram's sample count.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	total := 0.0
next:
	for _, m := range f.GetMetric() {
		for k, v := range labels {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Histogram != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return total
}

// present reports whether fams has a series of name matching labels.
func present(fams map[string]*dto.MetricFamily, name string, labels map[string]string) bool {
	f := fams[name]
	if f == nil {
		return false
	}
	for _, m := range f.GetMetric() {
		match := true
		for k, v := range labels {
			found := false
			for _, l := range m.GetLabel() {
				found = found || (l.GetName() == k && l.GetValue() == v)
			}
			match = match && found
		}
		if match {
			return true
		}
	}
	return false
}

// sum adds name over the nodes' scrapes.
func sum(nodes []*testutil.Node, name string, labels map[string]string) float64 {
	total := 0.0
	for _, n := range nodes {
		total += value(scrape(n.HTTPAddr()), name, labels)
	}
	return total
}

func sumAll(c *testutil.Cluster, name string, labels map[string]string) float64 {
	return sum(c.Nodes(), name, labels)
}
