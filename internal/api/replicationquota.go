package api

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/replica"
)

// The leader side of the replication throttle (Kafka's leader replication quota): the bytes a
// leader serves to followers for the replicas listed in a topic's
// leader.replication.throttled.replicas draw on one token bucket per broker, filled at
// leader.replication.throttled.rate bytes per second (a one-second burst); while it is in debt
// a follower that is not in the partition's ISR gets no records for those replicas, so moving
// a partition does not take the leader's bandwidth from producers and the other followers.
// An in-sync follower's bytes count but are never held back (Kafka's shouldLeaderThrottle),
// so a throttle over "*" does not take replicas out of the ISR. The follower side is
// replica.FetcherOptions.Throttle.

// leaderQuota is the bucket. Safe for concurrent use.
type leaderQuota struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func (h *Handler) leaderQuota() *leaderQuota { return &h.replicationQuota }

// leaderThrottleRate is leader.replication.throttled.rate, 0 when unthrottled.
func (h *Handler) leaderThrottleRate() int64 {
	r := h.Cfg.Current().LeaderReplicationThrottledRate
	if r <= 0 || r == math.MaxInt64 {
		return 0
	}
	return r
}

// leaderThrottled reports whether this broker's (leader) replica of p is listed in its
// topic's leader.replication.throttled.replicas.
func (h *Handler) leaderThrottled(p *replica.Partition) bool {
	t := h.Meta.Image().Topic(p.Topic)
	if t == nil {
		return false
	}
	v := t.Configs["leader.replication.throttled.replicas"]
	if v == "" {
		return false
	}
	all, pairs, err := config.ParseThrottledReplicas(v)
	return err == nil && (all || slices.Contains(pairs[p.Index], h.NodeID))
}

func (q *leaderQuota) refillLocked(rate int64, now time.Time) {
	if q.last.IsZero() {
		q.tokens = float64(rate)
	} else {
		q.tokens = min(q.tokens+now.Sub(q.last).Seconds()*float64(rate), float64(rate))
	}
	q.last = now
}

// inDebt reports whether the bucket is empty.
func (q *leaderQuota) inDebt(rate int64, now time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refillLocked(rate, now)
	return q.tokens <= 0
}

// take draws n bytes.
func (q *leaderQuota) take(n int, rate int64, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refillLocked(rate, now)
	q.tokens -= float64(n)
}
