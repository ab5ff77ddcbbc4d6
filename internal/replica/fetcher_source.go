package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/observe"
	"github.com/gregor-project/gregor/internal/wire"
)

// One source broker's fetcher: the goroutine that runs the rounds (see fetcher.go for the
// protocol and the lock rule).

// sourceFetcher fetches every partition this broker follows from one leader.
type sourceFetcher struct {
	f      *Fetchers
	leader int32
	cancel context.CancelFunc
	wake   chan struct{} // capacity 1: the partition set changed
	log    *slog.Logger
	conn   *wire.Conn // the run goroutine's alone

	mu struct {
		sync.Mutex
		parts map[followed]*fetchState
		fetch *parkedFetch // the Fetch in flight (it may wait at the leader); nil otherwise
		// changed: a partition was followed (or restarted) after next() read the set, while
		// no Fetch was in flight to interrupt; the round's Fetch then does not wait.
		changed bool
	}
}

// minInterruptAge is how long a Fetch waiting at the leader runs before a newly followed
// partition interrupts it (interruptLocked): partitions followed in a burst (a broker's
// leaderships moving) join the next round together, and the connection is redialled at most
// once per minInterruptAge.
const minInterruptAge = 20 * time.Millisecond

// parkedFetch is a round's Fetch request in flight. Guarded by sourceFetcher.mu.
type parkedFetch struct {
	cancel      context.CancelFunc
	started     time.Time
	interrupted bool // cancelled, or to be cancelled at started+minInterruptAge
}

// errFetchInterrupted ends a round whose Fetch a newly followed partition interrupted.
var errFetchInterrupted = errors.New("replica: fetch interrupted to add partitions")

// interruptLocked cancels the Fetch in flight, if any, so a partition just followed need not
// wait up to replica.fetch.wait.max.ms for the leader to answer a request without it (a
// follower joining a new leader's ISR holds that leader's acks=all writes until it fetches).
// The cancelled request takes its connection with it; the next round redials. Holding sf.mu.
func (sf *sourceFetcher) interruptLocked() {
	pf := sf.mu.fetch
	if pf == nil {
		sf.mu.changed = true // between next() and the Fetch (dialling, other requests)
		return
	}
	if pf.interrupted {
		return
	}
	pf.interrupted = true
	if wait := minInterruptAge - time.Since(pf.started); wait > 0 {
		time.AfterFunc(wait, pf.cancel)
		return
	}
	pf.cancel()
}

// fetchState is one followed partition in a source fetcher. Guarded by sourceFetcher.mu; a
// partition restarted on another source gets a new one, so a round's answer for an old state
// is recognisably stale.
type fetchState struct {
	p         followed
	topic     string
	partition int32
	core      *Follower
	leaderHW  int64                  // the leader's high watermark in the last fetch answer; -1 none yet
	counters  *observe.TopicCounters // the topic's, looked up on the first bytes replicated
}

// roundPart is one partition's request in a round.
type roundPart struct {
	st  *fetchState
	req FollowerRequest
}

type tp struct {
	topic     string
	partition int32
}

// poke wakes the goroutine if it is idle.
func (sf *sourceFetcher) poke() {
	select {
	case sf.wake <- struct{}{}:
	default:
	}
}

func (sf *sourceFetcher) run(ctx context.Context) {
	defer func() {
		if sf.conn != nil {
			sf.conn.Close()
		}
	}()
	backoff := time.Duration(sf.f.o.BackoffMs) * time.Millisecond
	for ctx.Err() == nil {
		epochs, lists, fetches, wait := sf.next()
		if len(epochs)+len(lists)+len(fetches) == 0 {
			// Every partition is backing off or fenced: look again when the first back-off
			// ends (at most a whole back-off), or sooner when Follow changes the set.
			select {
			case <-ctx.Done():
			case <-sf.wake:
			case <-time.After(min(wait, backoff)):
			}
			continue
		}
		err := sf.round(ctx, epochs, lists, fetches, wait)
		if err == nil || ctx.Err() != nil || errors.Is(err, errFetchInterrupted) {
			continue // an interrupted fetch's connection is dead: the next round redials
		}
		sf.log.Info("replica fetch from leader failed; retrying after the back-off", "err", err, "backoff", backoff)
		if sf.conn != nil {
			sf.conn.Close()
			sf.conn = nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
	}
}

// next asks every partition's core for its request, by kind, and says how long until the
// first partition that is backing off has one (an hour when none is).
func (sf *sourceFetcher) next() (epochs, lists, fetches []roundPart, wait time.Duration) {
	now := sf.f.nowMs()
	wait = time.Hour
	sf.mu.Lock()
	defer sf.mu.Unlock()
	sf.mu.changed = false
	for _, st := range sf.mu.parts {
		req := st.core.Next(st.p.LocalLog(), now)
		if at := st.core.WakeAtMs(now); at >= 0 {
			wait = min(wait, time.Duration(at-now)*time.Millisecond)
		}
		switch req.Kind {
		case RequestFetch:
			fetches = append(fetches, roundPart{st, req})
		case RequestOffsetForLeaderEpoch:
			epochs = append(epochs, roundPart{st, req})
		case RequestListOffsets:
			lists = append(lists, roundPart{st, req})
		}
	}
	return epochs, lists, fetches, wait
}

// round sends the round's requests and applies the answers. An error is the connection's or
// the whole request's: every partition is retried after a back-off.
func (sf *sourceFetcher) round(ctx context.Context, epochs, lists, fetches []roundPart, wait time.Duration) error {
	if sf.conn == nil || sf.conn.Err() != nil {
		addr, ok := sf.f.o.Endpoint(sf.leader)
		if !ok {
			return fmt.Errorf("replica: no endpoint known for leader %d", sf.leader)
		}
		dctx, cancel := context.WithTimeout(ctx, time.Duration(sf.f.o.SocketTimeoutMs)*time.Millisecond)
		c, err := sf.f.o.Dial(dctx, addr)
		cancel()
		if err != nil {
			return err
		}
		sf.conn = c
	}
	if len(epochs) > 0 {
		if err := sf.offsetsForLeaderEpochs(ctx, epochs); err != nil {
			return err
		}
	}
	if len(lists) > 0 {
		if err := sf.listOffsets(ctx, lists); err != nil {
			return err
		}
	}
	if len(fetches) > 0 {
		return sf.fetch(ctx, fetches, wait)
	}
	return nil
}

func (sf *sourceFetcher) request(ctx context.Context, req kmsg.Request, waitMs int32) (kmsg.Response, error) {
	rctx, cancel := context.WithTimeout(ctx, time.Duration(int64(waitMs)+int64(sf.f.o.SocketTimeoutMs))*time.Millisecond)
	defer cancel()
	return sf.conn.Request(rctx, req)
}

// handle feeds one partition's answer to its core and applies the action, unless the
// partition left the set (or was restarted) since its request was made.
func (sf *sourceFetcher) handle(rp roundPart, fn func(local LocalLog, nowMs int64) (FollowerAction, error)) {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if sf.mu.parts[rp.st.p] != rp.st {
		return // unfollowed or moved: a stale answer
	}
	act, err := fn(rp.st.p.LocalLog(), sf.f.nowMs())
	if err != nil {
		sf.log.Debug("replica fetch answer", "topic", rp.st.topic, "partition", rp.st.partition, "err", err)
	}
	sf.applyLocked(rp.st, act)
}

// applyLocked applies a core's action to its partition. Holding sf.mu.
func (sf *sourceFetcher) applyLocked(st *fetchState, act FollowerAction) {
	if act.Empty() {
		return
	}
	if _, err := st.p.ApplyFollower(st.core.LeaderEpoch(), act); err != nil {
		sf.log.Warn("replica: applying the leader's answer failed; backing off", "topic", st.topic, "partition", st.partition, "leader_epoch", st.core.LeaderEpoch(), "err", err)
		st.core.backOff(sf.f.nowMs())
		return
	}
	if n := len(act.Append); n > 0 && sf.f.o.Topics != nil {
		if st.counters == nil {
			st.counters = sf.f.o.Topics.For(st.topic)
		}
		st.counters.Replicated(n)
	}
	if act.HighWatermark >= 0 {
		st.p.SetFollowerHighWatermark(act.HighWatermark)
	}
}

func partitionErr(code int16) error {
	if code == 0 {
		return nil
	}
	return kerr.ErrorForCode(code)
}

// byTopic groups a round's partitions by topic, topics in first-seen order: each group is one
// topic of a request (a request names a topic once).
func byTopic(parts []roundPart) [][]roundPart {
	index := map[string]int{}
	var groups [][]roundPart
	for _, rp := range parts {
		i, ok := index[rp.st.topic]
		if !ok {
			i = len(groups)
			index[rp.st.topic] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], rp)
	}
	return groups
}

// errMissingPartition is the error of a partition the leader's answer left out.
var errMissingPartition = fmt.Errorf("replica: the leader's answer has no entry for the partition: %w", kerr.UnknownTopicOrPartition)

func (sf *sourceFetcher) offsetsForLeaderEpochs(ctx context.Context, parts []roundPart) error {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.SetVersion(offsetForLeaderEpochVersion)
	req.ReplicaID = sf.f.o.LocalID
	for _, group := range byTopic(parts) {
		t := kmsg.NewOffsetForLeaderEpochRequestTopic()
		t.Topic = group[0].st.topic
		for _, rp := range group {
			p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			p.Partition = rp.st.partition
			p.CurrentLeaderEpoch = rp.req.CurrentLeaderEpoch
			p.LeaderEpoch = rp.req.LeaderEpoch
			t.Partitions = append(t.Partitions, p)
		}
		req.Topics = append(req.Topics, t)
	}
	kresp, err := sf.request(ctx, req, 0)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.OffsetForLeaderEpochResponse)
	answers := map[tp]*kmsg.OffsetForLeaderEpochResponseTopicPartition{}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			answers[tp{t.Topic, t.Partitions[j].Partition}] = &t.Partitions[j]
		}
	}
	for _, rp := range parts {
		a := answers[tp{rp.st.topic, rp.st.partition}]
		ans, aerr := EpochEndOffset{}, error(errMissingPartition)
		if a != nil {
			ans, aerr = EpochEndOffset{Epoch: a.LeaderEpoch, EndOffset: a.EndOffset}, partitionErr(a.ErrorCode)
		}
		sf.handle(rp, func(local LocalLog, nowMs int64) (FollowerAction, error) {
			return rp.st.core.HandleEpochEndOffset(rp.req, ans, aerr, local, nowMs)
		})
	}
	return nil
}

// listOffsets asks the leader's log start and end offsets: two requests, as a ListOffsets
// may name a partition once.
func (sf *sourceFetcher) listOffsets(ctx context.Context, parts []roundPart) error {
	type offsets struct {
		off [2]int64 // earliest, latest
		err error
	}
	got := map[tp]*offsets{}
	groups := byTopic(parts)
	for i, ts := range [2]int64{-2, -1} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(listOffsetsVersion)
		req.ReplicaID = sf.f.o.LocalID
		for _, group := range groups {
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = group[0].st.topic
			for _, rp := range group {
				p := kmsg.NewListOffsetsRequestTopicPartition()
				p.Partition = rp.st.partition
				p.CurrentLeaderEpoch = rp.req.CurrentLeaderEpoch
				p.Timestamp = ts
				t.Partitions = append(t.Partitions, p)
			}
			req.Topics = append(req.Topics, t)
		}
		kresp, err := sf.request(ctx, req, 0)
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.ListOffsetsResponse)
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				k := tp{t.Topic, p.Partition}
				o := got[k]
				if o == nil {
					o = &offsets{}
					got[k] = o
				}
				o.off[i] = p.Offset
				if o.err == nil {
					o.err = partitionErr(p.ErrorCode)
				}
			}
		}
	}
	for _, rp := range parts {
		o := got[tp{rp.st.topic, rp.st.partition}]
		if o == nil {
			o = &offsets{err: errMissingPartition}
		}
		sf.handle(rp, func(local LocalLog, nowMs int64) (FollowerAction, error) {
			return rp.st.core.HandleLeaderOffsets(rp.req, o.off[0], o.off[1], o.err, local, nowMs)
		})
	}
	return nil
}

// fetch sends the round's Fetch. It waits at the leader at most MaxWaitMs, and no longer than
// wait, when the first partition backing off has its next request.
func (sf *sourceFetcher) fetch(ctx context.Context, parts []roundPart, wait time.Duration) error {
	rate := sf.f.o.Throttle()
	parts, err := sf.withinQuota(ctx, parts, rate)
	if err != nil {
		return err
	}
	resp, err := sf.send(ctx, sf.fetchRequest(parts, wait))
	if err != nil {
		return err
	}
	answers := map[tp]*kmsg.FetchResponseTopicPartition{}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			answers[tp{t.Topic, t.Partitions[j].Partition}] = &t.Partitions[j]
		}
	}
	if rate > 0 {
		received := 0 // the bytes of throttled replicas draw on the quota
		for _, rp := range parts {
			if a := answers[tp{rp.st.topic, rp.st.partition}]; a != nil && sf.throttled(rate, rp) {
				received += len(a.RecordBatches)
			}
		}
		sf.f.bucket.take(received, rate, sf.f.o.Now)
	}
	sf.handleAnswers(parts, answers)
	return nil
}

// throttled reports whether rp's replica is throttled at rate (bytes/s; 0 is no throttle).
func (sf *sourceFetcher) throttled(rate int64, rp roundPart) bool {
	return rate > 0 && sf.f.o.Throttled(rp.st.topic, rp.st.partition)
}

// inSync reports whether rp's replica had caught up with the leader's high watermark at the
// last answer (Kafka's PartitionFetchState.isReplicaInSync: a known lag of 0).
func (sf *sourceFetcher) inSync(rp roundPart) bool {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	return rp.st.leaderHW >= 0 && rp.st.p.LocalLog().LogEndOffset >= rp.st.leaderHW
}

// withinQuota returns the partitions the round may fetch under the replication throttle:
// all of them while the bucket has tokens; when it is in debt only the unthrottled ones and
// the in-sync ones (Kafka's follower quota: shouldFollowerThrottle spares an in-sync replica,
// so the throttle does not take it out of the ISR), or, if every partition is held back, all
// of them once the bucket is out of debt.
func (sf *sourceFetcher) withinQuota(ctx context.Context, parts []roundPart, rate int64) ([]roundPart, error) {
	if rate <= 0 || !sf.f.bucket.inDebt(rate, sf.f.o.Now) {
		return parts, nil
	}
	kept := parts[:0:0]
	for _, rp := range parts {
		if !sf.throttled(rate, rp) || sf.inSync(rp) {
			kept = append(kept, rp)
		}
	}
	if len(kept) > 0 {
		return kept, nil
	}
	if err := sf.f.bucket.wait(ctx, rate, sf.f.o.Now); err != nil {
		return nil, err
	}
	return parts, nil
}

// fetchRequest is the round's Fetch of parts, without a fetch session, waiting at most
// MaxWaitMs and no longer than wait.
func (sf *sourceFetcher) fetchRequest(parts []roundPart, wait time.Duration) *kmsg.FetchRequest {
	o := &sf.f.o
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(fetchVersion)
	req.ReplicaID = o.LocalID
	req.MaxWaitMillis = int32(min(int64(o.MaxWaitMs), max(wait.Milliseconds(), 0)))
	req.MinBytes = o.MinBytes
	req.MaxBytes = o.ResponseMaxBytes
	req.IsolationLevel = 0
	req.SessionID = 0
	req.SessionEpoch = -1 // no fetch session: every fetch names all its partitions
	for _, group := range byTopic(parts) {
		t := kmsg.NewFetchRequestTopic()
		t.Topic = group[0].st.topic
		for _, rp := range group {
			p := kmsg.NewFetchRequestTopicPartition()
			p.Partition = rp.st.partition
			p.CurrentLeaderEpoch = rp.req.CurrentLeaderEpoch
			p.FetchOffset = rp.req.FetchOffset
			p.LastFetchedEpoch = rp.req.LastFetchedEpoch
			p.LogStartOffset = rp.req.LogStartOffset
			p.PartitionMaxBytes = o.MaxBytes
			t.Partitions = append(t.Partitions, p)
		}
		req.Topics = append(req.Topics, t)
	}
	return req
}

// send sends req to the leader as the parked fetch, which a change to the followed
// partitions may interrupt (errFetchInterrupted): a round starting after such a change does
// not wait at the leader. A top-level error of the answer is returned.
func (sf *sourceFetcher) send(ctx context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pf := &parkedFetch{cancel: cancel, started: time.Now()}
	sf.mu.Lock()
	sf.mu.fetch = pf
	if sf.mu.changed {
		req.MaxWaitMillis = 0 // the next round carries what was followed meanwhile
	}
	sf.mu.Unlock()
	kresp, err := sf.request(fctx, req, req.MaxWaitMillis)
	sf.mu.Lock()
	sf.mu.fetch = nil
	interrupted := pf.interrupted
	sf.mu.Unlock()
	if err != nil {
		if interrupted && ctx.Err() == nil && fctx.Err() != nil {
			return nil, errFetchInterrupted
		}
		return nil, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := partitionErr(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("replica: fetch from leader %d: %w", sf.leader, err)
	}
	return resp, nil
}

// handleAnswers hands each partition of the round its answer (errMissingPartition when the
// leader left it out), recording the leader's high watermark on success.
func (sf *sourceFetcher) handleAnswers(parts []roundPart, answers map[tp]*kmsg.FetchResponseTopicPartition) {
	for _, rp := range parts {
		a := answers[tp{rp.st.topic, rp.st.partition}]
		ans := FetchAnswer{Err: errMissingPartition}
		if a != nil {
			ans = FetchAnswer{Err: partitionErr(a.ErrorCode), HighWatermark: a.HighWatermark, LogStartOffset: a.LogStartOffset, Records: a.RecordBatches}
			if a.DivergingEpoch.EndOffset >= 0 {
				ans.DivergingEpoch = &EpochEndOffset{Epoch: a.DivergingEpoch.Epoch, EndOffset: a.DivergingEpoch.EndOffset}
			}
		}
		sf.handle(rp, func(local LocalLog, nowMs int64) (FollowerAction, error) {
			act, err := rp.st.core.HandleFetch(rp.req, ans, local, nowMs)
			if err == nil && ans.Err == nil {
				rp.st.leaderHW = ans.HighWatermark
			}
			return act, err
		})
	}
}

// throttleBucket is the token bucket of the replication throttle, shared by every source
// fetcher: it holds up to one second of tokens (bytes) at the current rate and may go into
// debt by one fetch's bytes; a fetch waits while it is in debt.
type throttleBucket struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func (b *throttleBucket) refillLocked(rate int64, now time.Time) {
	if !b.last.IsZero() {
		b.tokens += now.Sub(b.last).Seconds() * float64(rate)
	} else {
		b.tokens = float64(rate)
	}
	b.tokens = min(b.tokens, float64(rate))
	b.last = now
}

// wait returns once the bucket is out of debt (or ctx ends).
func (b *throttleBucket) wait(ctx context.Context, rate int64, now func() time.Time) error {
	for {
		b.mu.Lock()
		b.refillLocked(rate, now())
		debt := -b.tokens
		b.mu.Unlock()
		if debt <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(debt / float64(rate) * float64(time.Second))):
		}
	}
}

// inDebt reports whether the bucket has no tokens left.
func (b *throttleBucket) inDebt(rate int64, now func() time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refillLocked(rate, now())
	return b.tokens <= 0
}

// take draws n bytes from the bucket.
func (b *throttleBucket) take(n int, rate int64, now func() time.Time) {
	b.mu.Lock()
	b.refillLocked(rate, now())
	b.tokens -= float64(n)
	b.mu.Unlock()
}
