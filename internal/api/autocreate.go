package api

import (
	"context"
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/quota"
)

// Auto-creation of topics named in a Metadata request, as a KRaft broker does it (Kafka's
// AutoTopicCreationManager.sendCreateTopicRequest): the broker sends the creation to the
// controller and answers the Metadata request at once, each such topic
// UNKNOWN_TOPIC_OR_PARTITION with no partitions, in every version; the client retries
// Metadata until the topic shows. A name whose creation is in flight is not sent again (it is
// answered the same way), and it stays in flight until the controller answered and this
// broker's image shows the topic, so a client retrying meanwhile triggers nothing.
//
// Bounds (Gregor's; Kafka has none of its own here, and no config key for them):
//
//   - autoCreatePerRequest: the most topics one Metadata request sends for creation;
//   - autoCreateRate and autoCreateBurst: a broker-wide token bucket of topics a second.
//
// A topic beyond them is answered UNKNOWN_TOPIC_OR_PARTITION and not sent, which is what a
// Kafka client sees when the controller refuses an auto-creation with
// THROTTLING_QUOTA_EXCEEDED (the Metadata answer went out before the controller's, and the
// client retries). Kafka's own bound is the controller_mutation_rate client quota, not served
// yet. Without a bound one Metadata request naming 100,000 unknown topics created ~20,000
// before the broker ran out of file descriptors, and was never answered.
const (
	autoCreatePerRequest = 100
	autoCreateRate       = 50
	autoCreateBurst      = autoCreatePerRequest
)

// autoCreator is the Handler's auto-creation state.
type autoCreator struct {
	mu struct {
		sync.Mutex
		inflight map[string]struct{} // names sent to the controller, not yet settled
		bucket   quota.Bucket
		ctx      context.Context // ends at Close: the forwards in flight give up
		cancel   context.CancelFunc
		closed   bool
	}
	wg sync.WaitGroup // the forwards in flight
}

// autoCreate sends the creation of the named topics (valid names, absent from the image) to
// the controller within the bounds, without waiting for it. Every name is answered
// UNKNOWN_TOPIC_OR_PARTITION whether it was sent or not.
func (h *Handler) autoCreate(names []string) {
	a := &h.autoCreation
	a.mu.Lock()
	if a.mu.closed {
		a.mu.Unlock()
		return
	}
	if a.mu.inflight == nil {
		a.mu.inflight = map[string]struct{}{}
		a.mu.bucket = quota.Bucket{Rate: autoCreateRate, Burst: autoCreateBurst}
		a.mu.ctx, a.mu.cancel = context.WithCancel(context.Background())
	}
	var fresh []string
	for _, n := range names {
		if len(fresh) == autoCreatePerRequest {
			break
		}
		if _, ok := a.mu.inflight[n]; ok {
			continue
		}
		a.mu.inflight[n] = struct{}{} // also skips a name repeated in this request
		fresh = append(fresh, n)
	}
	granted := a.mu.bucket.Take(h.Now(), len(fresh))
	for _, n := range fresh[granted:] {
		delete(a.mu.inflight, n)
	}
	fresh = fresh[:granted]
	if len(fresh) < len(names) {
		h.Log.Debug("auto-creation bounded", "asked", len(names), "sent", len(fresh))
	}
	if len(fresh) == 0 {
		a.mu.Unlock()
		return
	}
	ctx := a.mu.ctx
	a.wg.Add(1)
	a.mu.Unlock()
	go h.sendAutoCreate(ctx, fresh)
}

// sendAutoCreate forwards the creation of names to the controller and waits, within
// autoCreateTimeout, until this broker's image shows them; then they leave the in-flight set.
func (h *Handler) sendAutoCreate(ctx context.Context, names []string) {
	a := &h.autoCreation
	defer a.wg.Done()
	defer func() {
		a.mu.Lock()
		for _, n := range names {
			delete(a.mu.inflight, n)
		}
		a.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ctx, autoCreateTimeout)
	defer cancel()
	specs := make([]topicSpec, 0, len(names))
	for _, n := range names {
		s := topicSpec{name: n, partitions: -1, rf: -1}
		if err := h.checkTopic(&s); err != nil {
			h.Log.Warn("auto-creation refused", "topic", n, "err", err)
			continue
		}
		specs = append(specs, s)
	}
	h.Log.Info("sent auto-creation to the controller", "topics", len(specs), "first", names[0])
	// One CreateTopics of num.partitions partitions per topic must stay within the
	// controller's maxRecordsPerUserOp, or it is refused whole.
	per := max(1, maxRecordsPerUserOp/max(1, int(h.Cfg.Current().NumPartitions)))
	for len(specs) > 0 {
		n := min(per, len(specs))
		for i, res := range h.createTopics(ctx, specs[:n], false) {
			if res.err != nil && !errors.Is(res.err, kerr.TopicAlreadyExists) {
				h.Log.Warn("auto-creation failed", "topic", specs[i].name, "err", res.err)
			}
		}
		specs = specs[n:]
	}
}

// Close stops auto-creation: the forwards in flight end (their context is cancelled) before
// it returns, and none starts after. The broker calls it before it closes its controller
// channel.
func (h *Handler) Close() {
	a := &h.autoCreation
	a.mu.Lock()
	a.mu.closed = true
	if a.mu.cancel != nil {
		a.mu.cancel()
	}
	a.mu.Unlock()
	a.wg.Wait()
}
