package api

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/authz"
	"github.com/gregor-project/gregor/internal/quota"
)

// Client quotas (KIP-13, KIP-124, KIP-219), enforced by internal/quota's managers against the
// quotas in this broker's metadata image, for the connection's user (its principal's name)
// and client id:
//
//   - Produce records the bytes of its record batches (producer_byte_rate);
//   - a consumer's Fetch records the bytes of its answer (consumer_byte_rate), and asks for
//     no more than the quota allows over quota.window.num-1 windows, as Kafka caps
//     fetch.max.bytes; followers' fetches are replication, never client-throttled;
//   - Produce, Fetch and the requests in requestTimed record the time they were handled,
//     in percent of a second (request_percentage). Produce and Fetch leave out the time
//     they wait for acks or data; the forwarded admin requests, group and transaction
//     requests, which wait on other nodes and appends, are not measured.
//
// The larger throttle of a request's quotas goes in the response's throttle_time_ms and in
// Reply.Throttle, for which the server reads nothing more from the connection (KIP-219).
//
// Unlike Kafka, a throttled Fetch still carries its records (Kafka answers it empty and takes
// back its bytes): the records were read and the session moved on; the mute that follows
// keeps the consumer's rate at its quota all the same.

// requestTimed are the API keys whose whole handling time counts for request_percentage
// (they do not park).
var requestTimed = map[int16]bool{
	kmsg.ApiVersions.Int16():           true,
	kmsg.Metadata.Int16():              true,
	kmsg.ListOffsets.Int16():           true,
	kmsg.DescribeConfigs.Int16():       true,
	kmsg.OffsetFetch.Int16():           true,
	kmsg.FindCoordinator.Int16():       true,
	kmsg.DescribeGroups.Int16():        true,
	kmsg.ListGroups.Int16():            true,
	kmsg.DescribeCluster.Int16():       true,
	kmsg.DescribeLogDirs.Int16():       true,
	kmsg.DescribeProducers.Int16():     true,
	kmsg.DescribeTransactions.Int16():  true,
	kmsg.ListTransactions.Int16():      true,
	kmsg.DescribeClientQuotas.Int16():  true,
	kmsg.ConsumerGroupDescribe.Int16(): true,
}

// clientQuotas are the broker's quota managers, made at first use from the static
// quota.window.num and quota.window.size.seconds.
type clientQuotas struct {
	once                     sync.Once
	produce, fetch, requests *quota.Manager
	window                   quota.Window
}

func (h *Handler) quotas() *clientQuotas {
	q := &h.clientQuotas
	q.once.Do(func() {
		cfg := h.Cfg.Current()
		q.window = quota.Window{Num: int(cfg.QuotaWindowNum), Size: time.Duration(cfg.QuotaWindowSizeSeconds) * time.Second}
		q.produce = quota.NewManager(quota.ProducerByteRate, q.window)
		q.fetch = quota.NewManager(quota.ConsumerByteRate, q.window)
		q.requests = quota.NewManager(quota.RequestPercentage, q.window)
	})
	return q
}

// quotaUser is the quota "user" of c: its principal's name, as Kafka's (unsanitized: Gregor
// keys entities by the name itself). A connection whose principal was never set is
// authz.Anonymous, as the server's contract on api.Conn.Principal says it is.
func quotaUser(c *Conn) string {
	if c.Principal == (authz.Principal{}) {
		return authz.Anonymous.Name
	}
	return c.Principal.Name
}

// percentOfSecond is d in percent of one second (Kafka's nanosToPercentage).
func percentOfSecond(d time.Duration) float64 { return float64(max(d, 0)) * 100 / float64(time.Second) }

// requestThrottle records busy as c's handling time and returns its throttle.
func (h *Handler) requestThrottle(c *Conn, busy time.Duration, now time.Time) time.Duration {
	return h.quotas().requests.Record(h.Meta.Image().ClientQuotas, quotaUser(c), c.ClientID, percentOfSecond(busy), now)
}

// withRequestQuota runs handle; for the keys in requestTimed it records the time taken and
// throttles the reply.
func (h *Handler) withRequestQuota(ctx context.Context, c *Conn, req kmsg.Request, handle func(*Handler, context.Context, *Conn, kmsg.Request) Reply) Reply {
	if !requestTimed[req.Key()] {
		return handle(h, ctx, c, req)
	}
	start := h.Now()
	reply := handle(h, ctx, c, req)
	now := h.Now()
	return throttleReply(reply, h.requestThrottle(c, now.Sub(start), now))
}

// throttleReply sets d as the reply's throttle and, for a kmsg answer, its throttle_time_ms.
func throttleReply(r Reply, d time.Duration) Reply {
	if d <= 0 {
		return r
	}
	r.Throttle = d
	if t, ok := r.Msg.(kmsg.SetThrottleResponse); ok {
		t.SetThrottle(throttleMillis(d))
	}
	return r
}

func throttleMillis(d time.Duration) int32 {
	return int32(min(d.Milliseconds(), math.MaxInt32))
}

// throttleProduce records a Produce request's bytes and handling time and throttles
// its reply by the larger throttle (Kafka's handleProduceRequest).
func (h *Handler) throttleProduce(c *Conn, req *kmsg.ProduceRequest, busy time.Duration, r Reply) Reply {
	n := c.RequestSize // the whole request, as Kafka's produce quota counts it
	if n == 0 {        // a request not read from a connection (handler tests): its batches
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				n += len(p.Records)
			}
		}
	}
	now := h.Now()
	tab := h.Meta.Image().ClientQuotas
	d := h.quotas().produce.Record(tab, quotaUser(c), c.ClientID, float64(n), now)
	d = max(d, h.requestThrottle(c, busy, now))
	return throttleReply(r, d)
}

// fetchQuotaBytes caps a consumer's fetch at what its consumer_byte_rate allows over
// quota.window.num-1 windows (Kafka's getMaxValueInQuotaWindow), so one answer is never
// certain to be throttled.
func (h *Handler) fetchQuotaBytes(c *Conn, replicaID int32, maxBytes int32) int32 {
	if replicaID >= 0 {
		return maxBytes
	}
	q := h.quotas()
	limit, ok := q.fetch.Limit(h.Meta.Image().ClientQuotas, quotaUser(c), c.ClientID)
	if !ok {
		return maxBytes
	}
	most := limit * float64(max(q.window.Num-1, 1)) * q.window.Size.Seconds()
	return int32(min(float64(maxBytes), most))
}

// fetchThrottle records a consumer's Fetch answer of size bytes and its handling time and
// returns how long to throttle it (0 for a follower, which has no client quota). A throttled
// consumer is answered without records (Kafka's handleFetchRequest answers it
// getThrottledResponse), so the bytes it is not sent are taken off its rate again
// (unrecordQuotaSensor).
func (h *Handler) fetchThrottle(c *Conn, replicaID int32, busy time.Duration, size int) time.Duration {
	if replicaID >= 0 {
		return 0
	}
	now := h.Now()
	tab := h.Meta.Image().ClientQuotas
	q := h.quotas()
	d := q.fetch.Record(tab, quotaUser(c), c.ClientID, float64(size), now)
	d = max(d, h.requestThrottle(c, busy, now))
	if d > 0 {
		q.fetch.Unrecord(tab, quotaUser(c), c.ClientID, float64(size), now)
	}
	return d
}
