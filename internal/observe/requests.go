package observe

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Requests are Kafka's RequestMetrics (kafka.network:type=RequestMetrics), per API key: a
// count of requests by version, and histograms in milliseconds of each phase of a request:
//
//	requestqueuetimems   read whole -> taken by the handler (decoding; waiting for request
//	                     memory, queued.max.request.bytes, happens before a request is read)
//	localtimems          in the handler, less the remote time
//	remotetimems         parked: acks=all waiting for the followers, a Fetch long poll
//	throttletimems       the connection muted after the answer (KIP-219 quotas)
//	responsesendtimems   writing the answer
//	totaltimems          read whole -> answer written (the throttle not included)
//
// Lock rule: a key's handles are made once, under mu, and published in byKey; the request
// path only loads them.
type Requests struct {
	vecs struct {
		requests                                    *prometheus.CounterVec
		queue, local, remote, throttle, send, total *prometheus.HistogramVec
	}
	byKey [maxKey]atomic.Pointer[apiRequests]
	mu    sync.Mutex
}

const (
	maxKey     = 256 // API keys are below this (checked before use)
	maxVersion = 32  // versions at or above share the last slot's counter
)

// apiRequests are one API key's handles.
type apiRequests struct {
	name                                        string
	versions                                    [maxVersion]atomic.Pointer[prometheus.Counter]
	queue, local, remote, throttle, send, total prometheus.Observer
}

func newRequests(reg *prometheus.Registry) *Requests {
	r := &Requests{}
	hist := func(name, help string) *prometheus.HistogramVec {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kafka_network_requestmetrics_" + name, Help: help, Buckets: msBuckets}, []string{"request"})
		reg.MustRegister(v)
		return v
	}
	r.vecs.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka_network_requestmetrics_requests_total", Help: "Requests answered, by API and version (RequestsPerSec)."}, []string{"request", "version"})
	reg.MustRegister(r.vecs.requests)
	r.vecs.queue = hist("requestqueuetimems", "From a request read whole to the handler taking it, ms (RequestQueueTimeMs).")
	r.vecs.local = hist("localtimems", "Time in the handler, less the remote time, ms (LocalTimeMs).")
	r.vecs.remote = hist("remotetimems", "Time parked waiting for other brokers or for data (acks=all, Fetch long poll), ms (RemoteTimeMs).")
	r.vecs.throttle = hist("throttletimems", "Time the connection was muted for a quota after the answer, ms (ThrottleTimeMs).")
	r.vecs.send = hist("responsesendtimems", "Time writing the answer, ms (ResponseSendTimeMs).")
	r.vecs.total = hist("totaltimems", "From a request read whole to its answer written, ms (TotalTimeMs).")
	return r
}

// Timing is one request's phases, as the connection loop measured them.
type Timing struct {
	Received, Handling, Handled, Sent time.Time
	Remote, Throttle                  time.Duration
}

// Observe records one answered request of API key and version. Nothing allocates after a
// key's and version's first request.
func (r *Requests) Observe(key, version int16, t *Timing) {
	if r == nil || key < 0 || int(key) >= maxKey {
		return
	}
	a := r.byKey[key].Load()
	if a == nil {
		a = r.make(key)
	}
	v := min(max(int(version), 0), maxVersion-1)
	c := a.versions[v].Load()
	if c == nil {
		c = r.makeVersion(a, v)
	}
	(*c).Inc()
	handler := t.Handled.Sub(t.Handling)
	a.queue.Observe(ms(t.Handling.Sub(t.Received)))
	a.local.Observe(ms(max(handler-t.Remote, 0)))
	a.remote.Observe(ms(t.Remote))
	a.throttle.Observe(ms(t.Throttle))
	a.send.Observe(ms(t.Sent.Sub(t.Handled)))
	a.total.Observe(ms(t.Sent.Sub(t.Received)))
}

func (r *Requests) make(key int16) *apiRequests {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.byKey[key].Load(); a != nil {
		return a
	}
	name := RequestName(key)
	v := &r.vecs
	a := &apiRequests{name: name,
		queue: v.queue.WithLabelValues(name), local: v.local.WithLabelValues(name), remote: v.remote.WithLabelValues(name),
		throttle: v.throttle.WithLabelValues(name), send: v.send.WithLabelValues(name), total: v.total.WithLabelValues(name)}
	r.byKey[key].Store(a)
	return a
}

func (r *Requests) makeVersion(a *apiRequests, v int) *prometheus.Counter {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := a.versions[v].Load(); c != nil {
		return c
	}
	c := r.vecs.requests.WithLabelValues(a.name, strconv.Itoa(v))
	a.versions[v].Store(&c)
	return &c
}

// RequestName is Kafka's name of an API key (ApiKeys.name: Produce, Fetch, ...), the request
// label of the request metrics.
func RequestName(key int16) string {
	if n := kmsg.NameForKey(key); n != "Unknown" && n != "" {
		return n
	}
	return "Unknown" + strconv.Itoa(int(key))
}
