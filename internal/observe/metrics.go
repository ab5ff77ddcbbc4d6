package observe

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics is one broker's metrics: a registry of its own (several brokers may run in one
// process) and the hot-path handles registered in it.
type Metrics struct {
	Registry *prometheus.Registry
	Requests *Requests
	Topics   *Topics
	Replica  *ReplicaCounters
	Log      *LogCounters
	Raft     *RaftCounters
	Groups   *GroupCounters
}

// New makes a broker's metrics with the Go runtime and process collectors registered.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		Requests: newRequests(reg),
		Topics:   newTopics(reg),
		Replica:  newReplicaCounters(reg),
		Log:      newLogCounters(reg),
		Raft:     newRaftCounters(reg),
		Groups:   newGroupCounters(reg),
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Watch registers the scrape-time gauges read from src.
func (m *Metrics) Watch(src Source) { m.Registry.MustRegister(&Collector{Source: src}) }

// msBuckets are the buckets of the millisecond histograms (request times, flush, raft
// commit): 0.1 ms to 30 s.
var msBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000}

// ms is d in (fractional) milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ReplicaCounters are Kafka's ReplicaManager meters: ISR changes made by this broker's
// leaders (counted when the controller accepts them, as Kafka marks them).
type ReplicaCounters struct {
	shrinks, expands prometheus.Counter
}

func newReplicaCounters(reg *prometheus.Registry) *ReplicaCounters {
	r := &ReplicaCounters{
		shrinks: prometheus.NewCounter(prometheus.CounterOpts{Name: "kafka_server_replicamanager_isrshrinks_total", Help: "ISR shrinks of the partitions this broker leads (IsrShrinksPerSec)."}),
		expands: prometheus.NewCounter(prometheus.CounterOpts{Name: "kafka_server_replicamanager_isrexpands_total", Help: "ISR expansions of the partitions this broker leads (IsrExpandsPerSec)."}),
	}
	reg.MustRegister(r.shrinks, r.expands)
	return r
}

// ISRChanged counts one ISR change the controller accepted: an expansion or a shrink.
func (r *ReplicaCounters) ISRChanged(expand bool) {
	switch {
	case r == nil:
	case expand:
		r.expands.Inc()
	default:
		r.shrinks.Inc()
	}
}

// LogCounters are Kafka's LogFlushStats.
type LogCounters struct {
	flush prometheus.Histogram
}

func newLogCounters(reg *prometheus.Registry) *LogCounters {
	l := &LogCounters{flush: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "kafka_log_logflushstats_logflushrateandtimems", Help: "Time of one log flush (fsync of a partition's segments), ms (LogFlushRateAndTimeMs).", Buckets: msBuckets})}
	reg.MustRegister(l.flush)
	return l
}

// Flushed records one log flush that took d.
func (l *LogCounters) Flushed(d time.Duration) {
	if l != nil {
		l.flush.Observe(ms(d))
	}
}

// RaftCounters time the controller quorum's commits.
type RaftCounters struct {
	commit prometheus.Histogram
}

func newRaftCounters(reg *prometheus.Registry) *RaftCounters {
	r := &RaftCounters{commit: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "kafka_server_raft_metrics_commit_latency_ms", Help: "Time from proposing a metadata record batch to its commit by the quorum, ms, on the active controller (raft-metrics commit-latency).", Buckets: msBuckets})}
	reg.MustRegister(r.commit)
	return r
}

// Committed records one proposal committed d after it was proposed.
func (r *RaftCounters) Committed(d time.Duration) {
	if r != nil {
		r.commit.Observe(ms(d))
	}
}

// GroupCounters are the group coordinator's meters.
type GroupCounters struct {
	rebalances prometheus.Counter
}

func newGroupCounters(reg *prometheus.Registry) *GroupCounters {
	g := &GroupCounters{rebalances: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kafka_server_group_coordinator_metrics_group_rebalance_count", Help: "Rebalances started by the groups this broker coordinates (group-rebalance-count)."})}
	reg.MustRegister(g.rebalances)
	return g
}

// Rebalanced counts one rebalance started.
func (g *GroupCounters) Rebalanced() {
	if g != nil {
		g.rebalances.Inc()
	}
}

// Topics are Kafka's BrokerTopicMetrics, per topic.
type Topics struct {
	vecs struct {
		messagesIn, bytesIn, bytesOut, bytesRejected, totalProduce, totalFetch *prometheus.CounterVec
		failedProduce, failedFetch, replBytesIn, replBytesOut                  *prometheus.CounterVec
	}
	mu struct {
		sync.RWMutex
		byName map[string]*TopicCounters
	}
}

// TopicCounters are one topic's BrokerTopicMetrics meters. Its methods are safe on nil.
type TopicCounters struct {
	messagesIn, bytesIn, bytesOut, bytesRejected prometheus.Counter
	totalProduce, totalFetch                     prometheus.Counter
	failedProduce, failedFetch                   prometheus.Counter
	replBytesIn, replBytesOut                    prometheus.Counter
}

// Produced counts one partition's records appended: records of them, bytes as received.
func (c *TopicCounters) Produced(records, bytes int) {
	if c != nil {
		c.totalProduce.Inc()
		c.messagesIn.Add(float64(records))
		c.bytesIn.Add(float64(bytes))
	}
}

// ProduceFailed counts one partition's produce that failed; rejected is the bytes refused as
// too large or invalid (0 for other failures).
func (c *TopicCounters) ProduceFailed(rejected int) {
	if c != nil {
		c.totalProduce.Inc()
		c.failedProduce.Inc()
		if rejected > 0 {
			c.bytesRejected.Add(float64(rejected))
		}
	}
}

// Fetched counts one partition of a Fetch answered with bytes of records; follower says a
// follower fetched them (replication, not BytesOut).
func (c *TopicCounters) Fetched(bytes int, follower bool) {
	switch {
	case c == nil:
	case follower:
		c.replBytesOut.Add(float64(bytes))
	default:
		c.totalFetch.Inc()
		c.bytesOut.Add(float64(bytes))
	}
}

// FetchFailed counts one partition of a consumer's Fetch that failed.
func (c *TopicCounters) FetchFailed() {
	if c != nil {
		c.totalFetch.Inc()
		c.failedFetch.Inc()
	}
}

// Replicated counts bytes this broker's follower fetched from the partition's leader.
func (c *TopicCounters) Replicated(bytes int) {
	if c != nil {
		c.replBytesIn.Add(float64(bytes))
	}
}

func newTopics(reg *prometheus.Registry) *Topics {
	t := &Topics{}
	vec := func(name, help string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka_server_brokertopicmetrics_" + name + "_total", Help: help}, []string{"topic"})
		reg.MustRegister(v)
		return v
	}
	t.vecs.messagesIn = vec("messagesin", "Records appended to the topic's partitions this broker leads (MessagesInPerSec).")
	t.vecs.bytesIn = vec("bytesin", "Record bytes produced to the topic on this broker (BytesInPerSec).")
	t.vecs.bytesOut = vec("bytesout", "Record bytes fetched from the topic by consumers on this broker (BytesOutPerSec).")
	t.vecs.bytesRejected = vec("bytesrejected", "Record bytes refused as too large or invalid (BytesRejectedPerSec).")
	t.vecs.totalProduce = vec("totalproducerequests", "Produce requests' partitions of the topic (TotalProduceRequestsPerSec).")
	t.vecs.totalFetch = vec("totalfetchrequests", "Consumer Fetch requests' partitions of the topic (TotalFetchRequestsPerSec).")
	t.vecs.failedProduce = vec("failedproducerequests", "Produce requests' partitions of the topic that failed (FailedProduceRequestsPerSec).")
	t.vecs.failedFetch = vec("failedfetchrequests", "Fetch requests' partitions of the topic that failed (FailedFetchRequestsPerSec).")
	t.vecs.replBytesIn = vec("replicationbytesin", "Record bytes this broker's followers fetched from leaders (ReplicationBytesInPerSec).")
	t.vecs.replBytesOut = vec("replicationbytesout", "Record bytes followers fetched from this broker's leaders (ReplicationBytesOutPerSec).")
	t.mu.byName = map[string]*TopicCounters{}
	return t
}

// For is topic's counters, made on first use; nil on a nil Topics. A hit takes a read lock
// and allocates nothing.
func (t *Topics) For(topic string) *TopicCounters {
	if t == nil {
		return nil
	}
	t.mu.RLock()
	c := t.mu.byName[topic]
	t.mu.RUnlock()
	if c != nil {
		return c
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c = t.mu.byName[topic]; c == nil {
		v := &t.vecs
		c = &TopicCounters{
			messagesIn: v.messagesIn.WithLabelValues(topic), bytesIn: v.bytesIn.WithLabelValues(topic),
			bytesOut: v.bytesOut.WithLabelValues(topic), bytesRejected: v.bytesRejected.WithLabelValues(topic),
			totalProduce: v.totalProduce.WithLabelValues(topic), totalFetch: v.totalFetch.WithLabelValues(topic),
			failedProduce: v.failedProduce.WithLabelValues(topic), failedFetch: v.failedFetch.WithLabelValues(topic),
			replBytesIn: v.replBytesIn.WithLabelValues(topic), replBytesOut: v.replBytesOut.WithLabelValues(topic),
		}
		t.mu.byName[topic] = c
	}
	return c
}

// Forget drops a deleted topic's counters, as Kafka removes its topic metrics.
func (t *Topics) Forget(topic string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.mu.byName[topic]; !ok {
		return
	}
	delete(t.mu.byName, topic)
	v := &t.vecs
	for _, vec := range []*prometheus.CounterVec{v.messagesIn, v.bytesIn, v.bytesOut, v.bytesRejected, v.totalProduce, v.totalFetch, v.failedProduce, v.failedFetch, v.replBytesIn, v.replBytesOut} {
		vec.DeleteLabelValues(topic)
	}
}
