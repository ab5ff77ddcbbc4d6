package api

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/share"
	"github.com/gregor-project/gregor/internal/storage"
)

// ShareFetch v1 (KIP-932), on the leader of each partition: a share group member fetches
// records it then holds under an acquisition lock (group.share.record.lock.duration.ms),
// answered as whole batches plus AcquiredRecords (the offset ranges it holds, with their
// delivery counts; the client drops the batches' other records). The request may carry
// acknowledgements of records fetched earlier (applied first, answered per partition in
// AcknowledgeErrorCode). Share sessions: epoch 0 opens one with the partitions named, later
// epochs (each the next) add partitions and forget ForgottenTopicsData, -1 closes it after
// its acknowledgements, releasing what the member still holds. A fetch acquiring nothing
// (no partition with min_bytes to give) parks until a partition's high watermark moves, an
// acknowledgement or release frees records, a lock expires or max_wait passes.
//
// A share-partition with no state starts where its group's share.auto.offset.reset says
// when first fetched (shareInitialOffset; latest, the high watermark, by default); its state
// is kept by the share coordinator (internal/share's doc). The group's
// share.record.lock.duration.ms sets the locks, and its share.isolation.level=read_committed
// bounds reads at the last stable offset and archives aborted transactions' records.

// shareAckMax bounds the offsets one acknowledgement batch may name, so a malformed range
// cannot make the broker walk billions of offsets.
const shareAckMax = 1 << 20

func handleShareFetch(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	fail := func(err error) Reply {
		resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
		return msg(resp)
	}
	group, member := shareMember(req.GroupID), shareMember(req.MemberID)
	cfg := h.shareConfig(group)
	resp.AcquisitionLockTimeoutMillis = int32(cfg.LockDurationMs)
	if group == "" || member == "" {
		return fail(fmt.Errorf("%w: a share fetch names its group and member", kerr.InvalidRequest))
	}
	// Authorization (authorize.go): READ on the group, READ on each topic.
	if !h.groupReadable(c, group) {
		return fail(kerr.GroupAuthorizationFailed)
	}
	readable := h.authorizedNames(c, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic)
	im := h.Meta.Image()
	acks := false
	var add, forget []share.TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			add = append(add, share.TopicPartition{Topic: t.TopicID, Partition: p.Partition})
			acks = acks || len(p.AcknowledgementBatches) > 0
		}
	}
	for _, t := range req.ForgottenTopicsData {
		for _, p := range t.Partitions {
			forget = append(forget, share.TopicPartition{Topic: t.TopicID, Partition: p})
		}
	}
	if req.ShareSessionEpoch == 0 && acks {
		return fail(share.ErrAckOnOpen)
	}
	mgr := h.shareManager()
	if req.ShareSessionEpoch == -1 {
		add = nil // a closing request only acknowledges
	}
	parts, err := mgr.Session(group, member, req.ShareSessionEpoch, add, forget)
	if err != nil {
		return fail(err)
	}
	ans := newShareAnswer(im, readable)
	// Acknowledgements first: they may free records this fetch then acquires.
	now := h.nowMs()
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if len(p.AcknowledgementBatches) == 0 {
				continue
			}
			batches := make([]shareAck, len(p.AcknowledgementBatches))
			for i, b := range p.AcknowledgementBatches {
				batches[i] = shareAck{b.FirstOffset, b.LastOffset, b.AcknowledgeTypes}
			}
			rp := ans.part(t.TopicID, p.Partition)
			rp.AcknowledgeErrorCode = code(h.shareAcknowledge(ans, group, member, t.TopicID, p.Partition, batches, now))
		}
	}
	if req.ShareSessionEpoch == -1 {
		mgr.CloseSession(group, member)
		resp.Topics = ans.topics()
		return msg(resp)
	}
	maxRecords := int(req.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = 500 // the share consumer's max.poll.records default
	}
	maxBytes := h.Cfg.Current().FetchMaxBytes // fetch.max.bytes bounds a share fetch too
	if req.MaxBytes > 0 {
		maxBytes = min(maxBytes, req.MaxBytes)
	}
	deadline := h.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	ch := make(chan struct{}, 1)
	// A session opened by this request checks each share-partition held in memory against
	// its persisted state once (shareStateMoved): a reset or deletion made while the group
	// was empty shows to the group's next members.
	opened := map[share.TopicPartition]bool{}
	if req.ShareSessionEpoch == 0 {
		for _, tp := range parts {
			opened[tp] = true
		}
	}
	for {
		// min_bytes holds records back until a partition has that many bytes to acquire;
		// once max_wait has passed, whatever there is is acquired.
		final := !h.Now().Before(deadline)
		minBytes := min(req.MinBytes, maxBytes)
		if final {
			minBytes = 0
		}
		got, nextLock := h.shareAcquire(ans, group, member, parts, maxRecords, maxBytes, minBytes, cfg, opened)
		wait := deadline.Sub(h.Now())
		if got > 0 || ans.failed || final || ctx.Err() != nil {
			break
		}
		if wait <= 0 {
			continue // one last attempt, min_bytes aside
		}
		if nextLock > 0 {
			wait = min(wait, time.UnixMilli(nextLock).Sub(h.Now()))
		}
		if !h.shareWait(ctx, ans, ch, wait) {
			break
		}
	}
	resp.Topics = ans.topics()
	return msg(resp)
}

// shareWait parks until a partition of the answer gets records, wait passes or ctx ends;
// false means answer now.
func (h *Handler) shareWait(ctx context.Context, ans *shareAnswer, ch chan struct{}, wait time.Duration) bool {
	if wait <= 0 {
		return true // a lock expired: acquire again
	}
	for _, p := range ans.watched {
		p.Watch(ch)
	}
	for _, p := range ans.parts {
		p.Watch(ch)
	}
	defer func() {
		for _, p := range ans.watched {
			p.Unwatch(ch)
		}
		for _, p := range ans.parts {
			p.Unwatch(ch)
		}
	}()
	for _, p := range ans.watched {
		if p.HighWatermark() > ans.hw[p] {
			return true
		}
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// shareAcquire fetches for member from every partition of its session: reads batches from
// each share-partition's first available offset and acquires what they hold, up to
// maxRecords and maxBytes in all, from a partition only when it has at least minBytes to
// give (min_bytes, applied per partition). It returns the records acquired and the earliest lock
// deadline of the partitions read (0: none).
//
// opened holds the partitions still to be checked against their persisted state (a session
// opened by this fetch); each is checked once and removed.
func (h *Handler) shareAcquire(ans *shareAnswer, group, member string, parts []share.TopicPartition, maxRecords int, maxBytes, minBytes int32, cfg share.Config, opened map[share.TopicPartition]bool) (int, int64) {
	got, nextLock := 0, int64(0)
	ans.watched, ans.parts = ans.watched[:0], ans.parts[:0]
	for _, tp := range parts {
		if got >= maxRecords || maxBytes <= 0 {
			break
		}
		t := ans.im.TopicByID(metadata.TopicID(tp.Topic))
		if t == nil || tp.Partition < 0 || tp.Partition >= t.Partitions {
			ans.part(tp.Topic, tp.Partition).ErrorCode = unknownSharePartition(t).Code
			ans.failed = true
			continue
		}
		if !ans.readable.ok(t.Name) {
			ans.part(tp.Topic, tp.Partition).ErrorCode = kerr.TopicAuthorizationFailed.Code
			ans.failed = true
			continue
		}
		p := h.Replicas.Get(t.Name, tp.Partition)
		if p == nil {
			ans.part(tp.Topic, tp.Partition).ErrorCode = kerr.NotLeaderForPartition.Code
			ans.failed = true
			continue
		}
		leader, epoch, leads := p.Role()
		if !leads {
			rp := ans.part(tp.Topic, tp.Partition)
			rp.ErrorCode = kerr.NotLeaderForPartition.Code
			ans.failed = true
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = leader, epoch
			continue
		}
		ans.watched = append(ans.watched, p)
		verify := opened[tp]
		delete(opened, tp)
		n, bytes, lock, err := h.shareRead(ans, p, epoch, group, member, tp, maxRecords-got, maxBytes, minBytes, cfg, verify)
		if err != nil {
			ans.part(tp.Topic, tp.Partition).ErrorCode = code(err)
			ans.failed = true
			if code(err) == unknownServerError {
				h.Log.Error("share fetch", "topic", t.Name, "partition", tp.Partition, "err", err)
			}
			continue
		}
		got += n
		maxBytes -= bytes
		if lock > 0 && (nextLock == 0 || lock < nextLock) {
			nextLock = lock
		}
	}
	return got, nextLock
}

// shareRead acquires records of one partition for member.
// With verify, a share-partition held in memory is first checked against its persisted state
// and read back if that was reset or deleted meanwhile.
func (h *Handler) shareRead(ans *shareAnswer, p *replica.Partition, leaderEpoch int32, group, member string, tp share.TopicPartition, maxRecords int, maxBytes, minBytes int32, cfg share.Config, verify bool) (int, int32, int64, error) {
	hw := p.HighWatermark()
	ans.hw[p] = hw
	k := share.Key{Group: group, Topic: tp.Topic, Partition: tp.Partition}
	part := h.shareManager().Existing(k)
	if verify && part != nil && part.LeaderEpoch() == leaderEpoch && h.shareStateMoved(k, part) {
		h.shareManager().Drop(k, part)
		part = nil
	}
	if part == nil || part.LeaderEpoch() != leaderEpoch {
		// First fetch in this leader epoch: the state is read back from the share
		// coordinator (acknowledged records stay done, acquired ones are Available again
		// with their delivery counts); a share-partition with none starts where the
		// group's share.auto.offset.reset says (shareInitialOffset).
		s, ok, err := h.readShareState(k, leaderEpoch)
		if err != nil {
			return 0, 0, 0, shareStateUnavailable(err)
		}
		var sp *share.Partition
		stateEpoch := int32(0)
		if ok {
			sp, stateEpoch = share.Restore(cfg, s.Start, s.Batches), s.StateEpoch
		} else {
			start, err := h.shareInitialOffset(p, group, hw)
			if err != nil {
				return 0, 0, 0, err
			}
			sp = share.NewPartition(cfg, start)
		}
		if !ok {
			// The start offset is made durable first (Kafka's InitializeShareGroupState),
			// so records acquired before a crash and never acknowledged are delivered
			// again rather than skipped by a new start at a later high watermark.
			if err := h.writeShareState(k, sp.State(leaderEpoch, 0)); err != nil {
				return 0, 0, 0, shareStateUnavailable(err)
			}
		}
		part = h.shareManager().Install(k, leaderEpoch, stateEpoch, sp)
	}
	ans.parts = append(ans.parts, part)
	sp := part.Lock()
	defer part.Unlock()
	sp.SetConfig(cfg) // the group's lock duration as it is now
	now := h.nowMs()
	sp.SkipTo(p.Log().LogStartOffset())
	// share.isolation.level=read_committed: records up to the last stable offset only, and
	// those of aborted transactions archived rather than delivered.
	limit := hw
	committed := h.Cfg.GroupValue(h.groupConfigs(group), config.GroupShareIsolationLevel) == "read_committed"
	if committed {
		limit = min(hw, p.LastStableOffset())
	}
	// A read whose records all belonged to aborted transactions acquires nothing but moves
	// the window past them: read on, a few times, before answering empty.
	for attempt := 0; ; attempt++ {
		from := sp.FirstAvailable(now, limit)
		if from < 0 {
			return 0, 0, sp.NextDeadline(), nil
		}
		n, size, archived, err := h.shareAcquireRead(ans, p, sp, member, tp, from, limit, maxRecords, maxBytes, minBytes, committed, now)
		if err != nil || n > 0 || !archived || attempt == 8 {
			return n, size, sp.NextDeadline(), err
		}
	}
}

// shareAcquireRead reads p's log from offset from (below limit) and acquires for member what
// the batches read hold, skipping aborted transactions' records when committed; it answers
// them on ans. archived reports that the read only archived records (aborted ones).
func (h *Handler) shareAcquireRead(ans *shareAnswer, p *replica.Partition, sp *share.Partition, member string, tp share.TopicPartition, from, limit int64, maxRecords int, maxBytes, minBytes int32, committed bool, now int64) (n int, size int32, archived bool, err error) {
	s, err := p.Log().ReadRecords(from, maxBytes, limit, true)
	if err != nil {
		return 0, 0, false, err
	}
	defer s.Release()
	if s.Size == 0 || int32(s.Size) < minBytes {
		return 0, 0, false, nil
	}
	end, err := readEnd(s)
	if err != nil {
		return 0, 0, false, err
	}
	var skip func(int64) bool
	if committed {
		if skip, err = abortedRecords(p, s, from, end); err != nil {
			return 0, 0, false, err
		}
	}
	if skip != nil {
		aborted := skip
		skip = func(off int64) bool {
			if aborted(off) {
				archived = true
				return true
			}
			return false
		}
	}
	runs := sp.AcquireSkipping(member, now, min(end, limit), maxRecords, skip)
	if len(runs) == 0 {
		return 0, 0, archived, nil
	}
	// Only the batches up to the last record acquired are sent: the rest may go to others.
	total, err := batchesThrough(s, runs[len(runs)-1].Last)
	if err != nil {
		return 0, 0, false, err
	}
	b := make([]byte, total)
	if _, err := s.File.ReadAt(b, s.Pos); err != nil {
		return 0, 0, false, err
	}
	rp := ans.part(tp.Topic, tp.Partition)
	rp.Records = b
	for _, run := range runs {
		rp.AcquiredRecords = append(rp.AcquiredRecords, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{
			FirstOffset: run.First, LastOffset: run.Last, DeliveryCount: run.Deliveries,
		})
		n += int(run.Last - run.First + 1)
	}
	return n, int32(len(b)), false, nil
}

// abortedRecords returns whether an offset of s belongs to an aborted transaction: a
// transactional data batch whose producer has an aborted transaction (in the log's
// transaction index) spanning the batch's first offset, as a read_committed consumer tells
// them apart. nil when no transaction was aborted in [from, end).
func abortedRecords(p *replica.Partition, s storage.Slice, from, end int64) (func(int64) bool, error) {
	txns, err := p.Log().AbortedTxns(from, end)
	if err != nil || len(txns) == 0 {
		return nil, err
	}
	var spans [][2]int64
	var hb [batch.HeaderSize]byte
	for pos, stop := s.Pos, s.Pos+int64(s.Size); pos < stop; {
		if _, err := s.File.ReadAt(hb[:], pos); err != nil {
			return nil, err
		}
		bh, err := batch.ParseHeader(hb[:])
		if err != nil {
			return nil, err
		}
		pos += int64(bh.Size())
		if !bh.IsTransactional() || bh.IsControl() {
			continue
		}
		for _, a := range txns {
			if a.ProducerID == bh.ProducerID && a.FirstOffset <= bh.BaseOffset && bh.BaseOffset <= a.LastOffset {
				spans = append(spans, [2]int64{bh.BaseOffset, bh.LastOffset()})
				break
			}
		}
	}
	return func(off int64) bool {
		for _, sp := range spans {
			if off >= sp[0] && off <= sp[1] {
				return true
			}
		}
		return false
	}, nil
}

// shareInitialOffset is where a share-partition of group with no state starts, decided
// once, when it is initialized, by the group's share.auto.offset.reset: latest (Kafka's
// default) the high watermark hw, so only records produced later are delivered; earliest
// the log start offset; by_duration:D the first record whose timestamp is at least now - D
// (a time lookup, as ListOffsets by timestamp), or hw when no record is that recent.
func (h *Handler) shareInitialOffset(p *replica.Partition, group string, hw int64) (int64, error) {
	reset, err := config.ParseShareAutoOffsetReset(h.Cfg.GroupValue(h.groupConfigs(group), config.GroupShareAutoOffsetReset))
	if err != nil {
		return hw, nil // validated when set; an unreadable value is the default
	}
	switch {
	case reset.Earliest:
		return min(p.Log().LogStartOffset(), hw), nil
	case reset.ByDuration:
		off, _, ok, err := p.Log().OffsetForTimestamp(h.nowMs() - reset.Duration.Milliseconds())
		if err != nil {
			return 0, err
		}
		if !ok || off >= hw {
			return hw, nil
		}
		return off, nil
	}
	return hw, nil
}

// batchesThrough is the size of the leading batches of s up to and including the one holding
// offset last.
func batchesThrough(s storage.Slice, last int64) (int64, error) {
	var hb [batch.HeaderSize]byte
	for pos, stop := s.Pos, s.Pos+int64(s.Size); pos < stop; {
		if _, err := s.File.ReadAt(hb[:], pos); err != nil {
			return 0, err
		}
		h, err := batch.ParseHeader(hb[:])
		if err != nil {
			return 0, err
		}
		pos += int64(h.Size())
		if h.LastOffset() >= last {
			return pos - s.Pos, nil
		}
	}
	return int64(s.Size), nil
}

// unknownSharePartition is the error for a partition the image does not have: UNKNOWN_TOPIC_ID
// when its topic id is unknown (share requests name topics by id), else
// UNKNOWN_TOPIC_OR_PARTITION.
func unknownSharePartition(t *metadata.Topic) *kerr.Error {
	if t == nil {
		return kerr.UnknownTopicID
	}
	return kerr.UnknownTopicOrPartition
}

// shareAck is one acknowledgement batch of ShareFetch or ShareAcknowledge: one type for the
// whole range, or one per offset.
type shareAck struct {
	first, last int64
	types       []int8
}

// shareAcknowledge applies acknowledgement batches of one partition for member.
func (h *Handler) shareAcknowledge(ans *shareAnswer, group, member string, topic [16]byte, partition int32, batches []shareAck, now int64) error {
	t := ans.im.TopicByID(metadata.TopicID(topic))
	if t == nil || partition < 0 || partition >= t.Partitions {
		return unknownSharePartition(t)
	}
	if !ans.readable.ok(t.Name) {
		return kerr.TopicAuthorizationFailed
	}
	rp := h.Replicas.Get(t.Name, partition)
	if rp == nil {
		return kerr.NotLeaderForPartition
	}
	_, epoch, leads := rp.Role()
	if !leads {
		return kerr.NotLeaderForPartition
	}
	part := h.shareManager().Existing(share.Key{Group: group, Topic: topic, Partition: partition})
	if part == nil || part.LeaderEpoch() != epoch {
		return share.ErrInvalidRecordState // nothing was acquired from this leader epoch
	}
	sp := part.Lock()
	defer part.UnlockChanged()
	// The acknowledgements are answered only once the state they make is durable on the
	// share coordinator; if it cannot be written, the share-partition goes back to where it
	// was, and the member's records stay acquired for it to acknowledge again.
	before := sp.Clone()
	if err := applyShareAcks(sp, member, batches, now); err != nil {
		*sp = *before
		return err
	}
	k := share.Key{Group: group, Topic: topic, Partition: partition}
	if err := h.writeShareState(k, sp.State(epoch, part.StateEpoch())); err != nil {
		*sp = *before
		return err
	}
	return nil
}

// applyShareAcks applies one partition's acknowledgement batches to sp.
func applyShareAcks(sp *share.Partition, member string, batches []shareAck, now int64) error {
	for _, b := range batches {
		n := b.last - b.first + 1
		if n <= 0 || n > shareAckMax || len(b.types) == 0 || (len(b.types) != 1 && int64(len(b.types)) != n) {
			return share.ErrInvalidAck
		}
		if len(b.types) == 1 {
			if err := sp.Acknowledge(member, b.first, b.last, share.AckType(b.types[0]), now); err != nil {
				return err
			}
			continue
		}
		for i, typ := range b.types {
			off := b.first + int64(i)
			if err := sp.Acknowledge(member, off, off, share.AckType(typ), now); err != nil {
				return err
			}
		}
	}
	return nil
}

// shareAnswer collects the partitions of a ShareFetch or ShareAcknowledge answer.
type shareAnswer struct {
	im       *metadata.Image
	readable *authorizedSet
	order    [][16]byte
	byTopic  map[[16]byte][]kmsg.ShareFetchResponseTopicPartition
	watched  []*replica.Partition
	hw       map[*replica.Partition]int64
	parts    []*share.Part // share-partitions read, woken by acknowledgements
	failed   bool          // a partition is answered with an error: the fetch does not wait
}

func newShareAnswer(im *metadata.Image, readable *authorizedSet) *shareAnswer {
	return &shareAnswer{im: im, readable: readable, byTopic: map[[16]byte][]kmsg.ShareFetchResponseTopicPartition{}, hw: map[*replica.Partition]int64{}}
}

// part is the answer's entry for a partition, added on first use.
func (a *shareAnswer) part(topic [16]byte, partition int32) *kmsg.ShareFetchResponseTopicPartition {
	ps, ok := a.byTopic[topic]
	if !ok {
		a.order = append(a.order, topic)
	}
	for i := range ps {
		if ps[i].Partition == partition {
			return &a.byTopic[topic][i]
		}
	}
	p := kmsg.NewShareFetchResponseTopicPartition()
	p.Partition = partition
	p.Records = []byte{} // never null: Kafka's schema makes records non-nullable
	p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
	a.byTopic[topic] = append(ps, p)
	return &a.byTopic[topic][len(ps)]
}

func (a *shareAnswer) topics() []kmsg.ShareFetchResponseTopic {
	out := make([]kmsg.ShareFetchResponseTopic, 0, len(a.order))
	for _, id := range a.order {
		out = append(out, kmsg.ShareFetchResponseTopic{TopicID: id, Partitions: a.byTopic[id]})
	}
	return out
}
