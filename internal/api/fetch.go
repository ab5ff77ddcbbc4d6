package api

import (
	"context"
	"encoding/binary"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/fetchsession"
	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/storage"
)

// Fetch v0-v17. Reads whole batches below the high watermark; from v4 a consumer with
// isolation_level read_committed reads only below the last stable offset (no batch of a
// transaction still open), and its answer lists the aborted transactions that overlap the
// range it may have read (from the segments' transaction indexes, Log.AbortedTxns), so it can
// drop their records; every answer from v4 carries the last stable offset. When fewer
// than min_bytes are available the request parks until a watched partition gets an append,
// max_wait passes, or the connection closes (long poll). Total bytes are bounded by max_bytes
// and the broker's fetch.max.bytes (responseMaxBytes) and each partition by its
// partition_max_bytes, except that from v3 on the first partition with data returns at least
// one whole batch (KIP-74). A partition named more than once is read and answered once
// (fetchunique.go). From v7 a client may open a fetch
// session (KIP-227, fetchsession.go) and then name only the partitions that changed and be
// answered only those with something new. v0-v3 get records down-converted to message
// format v0/v1.
//
// Replication. A fetch with a replica id >= 0 (replica_id, or replica_state.replica_id from
// v15) is a follower's: it reads up to the leader's log end offset, not the high watermark;
// its fetch offset is the follower's position (Partition.FollowerFetch), which may advance the
// high watermark; and from v12 a last_fetched_epoch that parts from the leader's log is
// answered with the diverging epoch and no records (KIP-320). A follower's fetch must go to
// the partition's leader (NOT_LEADER_OR_FOLLOWER elsewhere), and every fetch is fenced by its
// current_leader_epoch from v9 (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).
//
// Reading from followers (KIP-392). From v11 a consumer may fetch from a follower, which
// serves it as the leader would but up to its own high watermark (Kafka's fetchRecords without
// fetchOnlyLeader): an offset past that but within the log is answered empty (the request
// parks until the follower's high watermark moves), one past the log end OFFSET_OUT_OF_RANGE.
// Older consumers still get NOT_LEADER_OR_FOLLOWER there. With replica.selector.class the
// leader may answer a consumer's partition with a preferred read replica instead of records
// (replicaselector.go).

func handleFetch(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.FetchRequest)
	deadline := h.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	f := fetchPool.Get().(*fetch)
	f.h, f.req = h, req
	f.im = h.Meta.Image()
	if err := f.openSession(); err != nil {
		// A session error answers the error alone (Kafka's SessionErrorContext).
		f.raw = Raw{Parts: f.enc.encode(req.Version, code(err), fetchsession.InvalidSessionID, nil, false), Done: f.done}
		return Reply{Raw: &f.raw}
	}
	if f.kind != sessionIncremental {
		f.want = f.unique(f.want)
	}
	f.replicaID = req.ReplicaID
	if req.Version >= 15 {
		f.replicaID = req.ReplicaState.ID
	}
	f.committed = f.replicaID < 0 && req.Version >= 4 && req.IsolationLevel == readCommitted
	// Authorization (authorize.go): a follower needs CLUSTER_ACTION on the cluster, a
	// consumer READ on each topic.
	f.readable, f.replicaDenied = nil, false
	if f.replicaID >= 0 {
		f.replicaDenied = !h.authorizedCluster(c, kmsg.ACLOperationClusterAction)
	} else {
		f.readable = h.authorizedNames(c, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic)
	}
	f.resolve()
	f.maxBytes = responseMaxBytes(req, h.Cfg.Current().FetchMaxBytes, sizeHint(f.topics))
	f.maxBytes = h.fetchQuotaBytes(c, f.replicaID, f.maxBytes)
	minBytes := min(req.MinBytes, f.maxBytes)
	f.rack = clientRack(h, f.im, req.Version, f.replicaID, req.Rack)
	if f.rack != "" {
		f.listener = h.listenerOf(c)
	}
	f.reread = false
	start, waited := h.Now(), time.Duration(0) // request_percentage leaves out the waits
	for {
		total, anyErr := f.read()
		f.reread = true
		done := total >= int(minBytes) || anyErr || req.MaxWaitMillis <= 0
		if !done {
			w := h.Now()
			h.fetchesWaiting.Add(1)
			done = !f.wait(ctx, deadline)
			h.fetchesWaiting.Add(-1)
			waited += h.Now().Sub(w)
		}
		if done {
			var reply Reply
			if d := h.fetchThrottle(c, f.replicaID, h.Now().Sub(start)-waited, total); d > 0 {
				reply = f.throttled(d)
			} else {
				reply = f.answer()
			}
			reply.Remote = waited
			return reply
		}
		f.release()
	}
}

// responseMaxBytes is the record bytes a Fetch may answer, as Kafka's handleFetchRequest
// bounds them: the request's max_bytes (v0-v2 carry none: Kafka reads them as 2^31-1) and the
// broker's fetch.max.bytes, whichever is smaller, for consumers and followers alike (a
// follower asks for replica.fetch.response.max.bytes: the leader's fetch.max.bytes still
// bounds it). Unlike Kafka it also leaves room for the rest of the frame, whose length is an
// int32: overhead bounds the encoding outside the records (sizeHint). The first partition
// with data may still exceed the result by one batch (KIP-74, read).
func responseMaxBytes(req *kmsg.FetchRequest, fetchMaxBytes int32, overhead int) int32 {
	maxBytes := int32(math.MaxInt32)
	if req.Version >= 3 {
		maxBytes = max(req.MaxBytes, 0)
	}
	room := int64(math.MaxInt32) - maxFrameHeader - int64(overhead)
	return int32(max(0, min(int64(maxBytes), int64(fetchMaxBytes), room)))
}

// maxFrameHeader bounds a response frame's bytes before its body: the length, the
// correlation id and the flexible header's tags.
const maxFrameHeader = 4 + 4 + 1

// answer encodes the answer to the partitions read, settling the fetch's session.
func (f *fetch) answer() Reply {
	id, errCode, pruned := f.sessionAnswer()
	topics := f.topics
	if errCode != 0 {
		topics = nil // the session moved on under this fetch: the error alone
	}
	f.count(topics)
	f.raw = Raw{Parts: f.enc.encode(f.req.Version, errCode, id, topics, pruned), Done: f.done}
	return Reply{Raw: &f.raw}
}

// throttled encodes the answer to a consumer throttled for d, as Kafka's
// getThrottledResponse: no partitions, and the fetch's session unchanged but for the epoch
// this fetch moved it to (or INVALID_FETCH_SESSION_EPOCH if another fetch moved it since); a
// full fetch creates no session. The records read are released with the answer.
func (f *fetch) throttled(d time.Duration) Reply {
	id, errCode := int32(fetchsession.InvalidSessionID), int16(0)
	if f.kind == sessionIncremental {
		if f.view.Current() {
			id = f.view.Session().ID
		} else {
			errCode = code(fetchsession.ErrInvalidEpoch)
		}
	}
	f.raw = Raw{Parts: f.enc.encode(f.req.Version, errCode, id, nil, false), Done: f.done}
	// The body starts with throttle_time_ms from v1 (fetch_response.go).
	if f.req.Version >= 1 && len(f.raw.Parts) > 0 && f.raw.Parts[0].File == nil && len(f.raw.Parts[0].B) >= 4 {
		binary.BigEndian.PutUint32(f.raw.Parts[0].B, uint32(throttleMillis(d)))
	}
	return Reply{Raw: &f.raw, Throttle: d}
}

// fetch is one Fetch request being answered. Its slices, encoder buffer and wait channel are
// reused from request to request (fetchPool): a consumer of a thousand partitions needs
// ~150 KB of answer state per fetch, which would otherwise be garbage every few milliseconds.
type fetch struct {
	h         *Handler
	req       *kmsg.FetchRequest
	maxBytes  int32
	replicaID int32 // >= 0: a follower's fetch
	// readable is READ TOPIC for a consumer (nil for a follower); replicaDenied is a
	// follower without CLUSTER_ACTION (authorize.go).
	readable      *authorizedSet
	replicaDenied bool
	committed     bool   // a consumer's read_committed fetch (v4+): reads up to the last stable offset
	rack          string // the consumer's rack when a preferred read replica may be chosen (KIP-392)
	listener      string // the listener the consumer came in on (with rack)
	im            *metadata.Image
	topics        []fetchTopic
	parts         [][]*replica.Partition // parallel to topics[i].parts; nil where unknown
	slices        []storage.Slice
	enc           fetchEncoder
	raw           Raw
	// The fetch's session (fetchsession.go): want is what is read, the request's topics or
	// (incremental) the session's partitions, whose slots are in slots in the same order;
	// the rest are scratch space kept with the pooled fetch.
	kind    sessionKind
	view    fetchsession.View
	want    []kmsg.FetchRequestTopic
	wantBuf []kmsg.FetchRequestTopic
	slots   []int32
	added   []fetchsession.Added
	forget  []fetchsession.Key
	created []fetchsession.Created
	answers []fetchsession.Answer
	done    func()        // f.finish, bound once
	ch      chan struct{} // wakes a parked fetch
	timer   *time.Timer
	// seen is unique's scratch map (fetchunique.go), empty between requests.
	seen map[wantKey]wantSeen
	// reread is set once the request has been read once: a parked follower fetch that wakes
	// has recorded its position already, so it only re-checks the leadership, lock-free.
	reread bool
}

// fetchPool holds answered fetches for reuse (its New is set in init: finish refers to it).
var fetchPool sync.Pool

func init() {
	fetchPool.New = func() any {
		f := &fetch{ch: make(chan struct{}, 1)}
		f.done = f.finish
		return f
	}
}

// maxPooledFetch bounds the answer state kept in the pool: a fetch of more partitions, or
// with a larger encoded body (down-converted records), is left to the garbage collector.
const (
	maxPooledFetchParts = 1 << 14
	maxPooledFetchBytes = 1 << 20
)

// finish is Raw.Done: it drops the segment references once the answer is written and puts
// the fetch back in the pool.
func (f *fetch) finish() {
	f.release()
	n := 0
	for i := range f.topics {
		n += cap(f.topics[i].parts)
		clear(f.topics[i].parts) // no stale records or files kept alive
	}
	for i := range f.parts {
		clear(f.parts[i])
	}
	f.h, f.req, f.raw, f.im = nil, nil, Raw{}, nil
	f.view, f.want = fetchsession.View{}, nil
	clear(f.created) // no topic names kept alive
	clear(f.added)
	if len(f.seen) > maxPooledFetchParts {
		f.seen = nil // clear keeps a map's buckets
	}
	clear(f.seen)
	if n > maxPooledFetchParts || cap(f.slots) > maxPooledFetchParts || cap(f.enc.b) > maxPooledFetchBytes {
		return
	}
	f.enc.reset()
	select {
	case <-f.ch: // a signal that came after the answer was decided
	default:
	}
	fetchPool.Put(f)
}

// resolve maps the topics to read (by name, or by id from v13) to partitions, reusing the
// answer slices of a pooled fetch when they are large enough. An incremental fetch by id
// names each topic by the name its id first resolved to, as Kafka's session does: unknown
// yet is UNKNOWN_TOPIC_ID, a name now held by another topic id INCONSISTENT_TOPIC_ID (the
// topic was deleted and made again), a name gone UNKNOWN_TOPIC_OR_PARTITION.
func (f *fetch) resolve() {
	im := f.im
	f.topics = resize(f.topics, len(f.want))
	f.parts = resize(f.parts, len(f.want))
	for ti, rt := range f.want {
		var t *metadata.Topic
		topicErr := int16(0)
		switch {
		case f.req.Version < 13:
			t = im.Topic(rt.Topic)
		case f.kind != sessionIncremental:
			if t = im.TopicByID(rt.TopicID); t == nil {
				topicErr = kerr.UnknownTopicID.Code
			}
		case rt.Topic == "":
			topicErr = kerr.UnknownTopicID.Code
		default:
			if t = im.Topic(rt.Topic); t != nil && t.ID != rt.TopicID {
				t, topicErr = nil, kerr.InconsistentTopicID.Code
			}
		}
		if topicErr == 0 && !f.topicAuthorized(rt.Topic, t) {
			t, topicErr = nil, kerr.TopicAuthorizationFailed.Code
		}
		ft := &f.topics[ti]
		ft.name, ft.id = rt.Topic, rt.TopicID
		ft.parts = resize(ft.parts, len(rt.Partitions))
		ps := resize(f.parts[ti], len(rt.Partitions))
		var tps replica.TopicPartitions // one lookup of the topic for all its partitions
		if t != nil {
			tps = f.h.Replicas.Topic(t.Name)
		}
		for i, rp := range rt.Partitions {
			fp := &ft.parts[i]
			*fp = fetchPartition{partition: rp.Partition, hw: -1, lso: -1, logStart: -1, end: -1, preferred: -1}
			ps[i] = tps.Get(rp.Partition)
			switch {
			case topicErr != 0:
				fp.errCode = topicErr
			case ps[i] == nil && t != nil && rp.Partition >= 0 && rp.Partition < t.Partitions:
				// In the metadata but not on this broker (Kafka's getPartitionOrError).
				fp.errCode = kerr.NotLeaderForPartition.Code
			case ps[i] == nil:
				fp.errCode = kerr.UnknownTopicOrPartition.Code
			}
		}
		f.parts[ti] = ps
	}
}

// topicAuthorized reports whether the fetch may read the topic named name (by name, before
// v13 or in an incremental session) or t (resolved by id): as Kafka, a topic is judged before
// its existence, and an id that names no topic stays UNKNOWN_TOPIC_ID.
func (f *fetch) topicAuthorized(name string, t *metadata.Topic) bool {
	if f.replicaDenied {
		return false
	}
	if f.readable == nil {
		return true
	}
	if t != nil {
		name = t.Name
	}
	return f.readable.ok(name)
}

// resize returns s with length n, reusing its array when large enough. Elements are not
// cleared: callers overwrite every one.
func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// read fills every known partition's answer; it returns the record bytes gathered and
// whether any partition has an error (which answers the fetch at once, as Kafka does).
func (f *fetch) read() (int, bool) {
	total := 0
	anyErr := false
	for ti, rt := range f.want {
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			p := f.parts[ti][pi]
			fp := &f.topics[ti].parts[pi]
			if p == nil {
				anyErr = true
				continue
			}
			fp.records, fp.file, fp.aborted = nil, Part{}, nil
			fp.errCode = 0
			if zstdRefused(f.req.Version, p) {
				fp.errCode = kerr.UnsupportedCompressionType.Code
				anyErr = true
				continue
			}
			if err := f.check(p, rp, fp); err != nil {
				fp.errCode = code(err)
				if fp.errCode == unknownServerError {
					f.h.Log.Error("fetch failed", "topic", p.Topic, "partition", p.Index, "err", err)
				}
				anyErr = true
				continue
			}
			if fp.diverging || fp.preferred >= 0 {
				anyErr = true // answered at once, as Kafka completes such a fetch
				continue
			}
			limit := min(rp.PartitionMaxBytes, f.maxBytes-int32(total))
			if limit <= 0 && total > 0 {
				continue
			}
			// The leader's replication quota: the bytes of a throttled replica draw on it, and
			// one that is not in the ISR gets no records while it is exceeded; an in-sync one
			// is never held back, as in Kafka (ReplicaManager.shouldLeaderThrottle: no ISR
			// thrashing). See replicationquota.go.
			rate := int64(0)
			if f.replicaID >= 0 {
				if rate = f.h.leaderThrottleRate(); rate > 0 && !f.h.leaderThrottled(p) {
					rate = 0
				}
			}
			if rate > 0 && !slices.Contains(p.LeaderISR(), f.replicaID) && f.h.leaderQuota().inDebt(rate, f.h.Now()) {
				continue
			}
			n, err := f.readPartition(p, fp, rp.FetchOffset, limit, total == 0 && f.req.Version >= 3)
			if rate > 0 && err == nil {
				f.h.leaderQuota().take(n, rate, f.h.Now())
			}
			if err != nil {
				fp.errCode = code(err)
				if fp.errCode == unknownServerError {
					f.h.Log.Error("fetch failed", "topic", p.Topic, "partition", p.Index, "err", err)
				}
				anyErr = true
				continue
			}
			total += n
		}
	}
	return total, anyErr
}

// check decides whether the partition's part of the fetch may be read and up to where
// (fp.end), filling in the high watermark and log start offset: a consumer reads up to the
// high watermark of this replica (the leader's, or from v11 a follower's), unless the leader
// directs it to another replica (fp.preferred); a follower up to the log end offset, after the
// leader records its position (or finds its log diverging: fp.diverging).
func (f *fetch) check(p *replica.Partition, rp *kmsg.FetchRequestTopicPartition, fp *fetchPartition) error {
	epoch := int32(-1)
	if f.req.Version >= 9 {
		epoch = rp.CurrentLeaderEpoch
	}
	if f.replicaID < 0 {
		_, leaderEpoch, leads := p.Role()
		if err := consumerCheck(p, epoch, f.req.Version); err != nil {
			return err
		}
		hw, lso := p.HighWatermark(), p.LastStableOffset()
		fp.hw, fp.lso, fp.logStart, fp.end = hw, lso, p.Log().LogStartOffset(), hw
		if f.committed {
			fp.end = lso
		}
		fp.leads, fp.leaderEpoch = leads, leaderEpoch
		fp.preferred = -1
		if leads && f.rack != "" {
			fp.preferred = preferredReadReplica(f.h, f.im, f.listener, f.rack, p, rp.FetchOffset)
		}
		return nil
	}
	if f.reread && p.CheckLeader(epoch) == nil {
		// Woken from parking: the follower's position (recorded on the first read) and the
		// divergence check (passed then) stand; only the log's bounds moved.
		fp.hw, fp.lso, fp.logStart, fp.end = p.HighWatermark(), p.LastStableOffset(), p.Log().LogStartOffset(), p.Log().LogEndOffset()
		return nil
	}
	lastFetched, logStart := int32(-1), int64(-1)
	if f.req.Version >= 12 {
		lastFetched = rp.LastFetchedEpoch
	}
	if f.req.Version >= 5 {
		logStart = rp.LogStartOffset
	}
	st, err := p.FollowerFetch(f.replicaID, epoch, rp.FetchOffset, logStart, lastFetched, f.h.nowMs())
	if err != nil {
		return err
	}
	fp.hw, fp.lso, fp.logStart, fp.end = st.HighWatermark, min(p.LastStableOffset(), st.HighWatermark), st.LogStartOffset, st.LogEndOffset
	if d := st.Diverging; d != nil && f.req.Version >= 12 {
		fp.diverging, fp.divergingEpoch, fp.divergingEnd = true, d.Epoch, d.EndOffset
	}
	return nil
}

// consumerCheck admits a consumer's fetch after the current leader epoch check: the leader
// serves it, and from v11 (KIP-392) a follower too, as Kafka's localLogWithEpochOrThrow
// without requireLeader. A replica waiting for its first role (leader epoch -1) serves none.
func consumerCheck(p *replica.Partition, currentLeaderEpoch int32, version int16) error {
	if version < 11 {
		return p.CheckLeader(currentLeaderEpoch)
	}
	_, leaderEpoch, leads := p.Role()
	if leads || leaderEpoch < 0 {
		return p.CheckLeader(currentLeaderEpoch)
	}
	return replica.CheckCurrentLeaderEpoch(leaderEpoch, currentLeaderEpoch)
}

// zstdRefused: like Kafka (KIP-110), Fetch versions below 10 (clients older than zstd) get
// UNSUPPORTED_COMPRESSION_TYPE instead of records from a topic whose compression.type is zstd.
func zstdRefused(version int16, p *replica.Partition) bool {
	s := p.Settings()
	return version < 10 && s.Recompress && s.Compression == batch.CodecZstd
}

// readPartition reads one partition's batches into fp, returning the bytes read.
func (f *fetch) readPartition(p *replica.Partition, fp *fetchPartition, offset int64, limit int32, minOne bool) (int, error) {
	read := p.Log().Read // a follower copies every batch, emptied ones too
	if f.replicaID < 0 {
		read = p.Log().ReadRecords
	}
	s, err := read(offset, limit, fp.end, minOne)
	if err != nil {
		return 0, err
	}
	if s.Size == 0 {
		s.Release()
		return 0, nil
	}
	if f.committed {
		// The aborted transactions overlapping the records returned, as Kafka bounds them by
		// the end of the fetched data: bounded by the last stable offset instead, a consumer
		// catching up would get (and the broker collect, index after index) every abort of
		// the rest of the log with each fetch.
		upper, err := readEnd(s)
		if err == nil {
			fp.aborted, err = p.Log().AbortedTxns(offset, upper)
		}
		if err != nil {
			s.Release()
			return 0, err
		}
	}
	if f.req.Version <= 3 || s.File.OSFile() == nil {
		defer s.Release()
		b := make([]byte, s.Size)
		if _, err := s.File.ReadAt(b, s.Pos); err != nil {
			return 0, err
		}
		if f.req.Version <= 3 {
			magic := int8(0)
			if f.req.Version >= 2 {
				magic = 1
			}
			if b, err = batch.DownConvert(b, magic); err != nil {
				return 0, err
			}
		}
		fp.records = b
		return len(b), nil
	}
	f.slices = append(f.slices, s)
	fp.file = Part{File: s.File.OSFile(), Pos: s.Pos, N: int(s.Size)}
	return int(s.Size), nil
}

// readEnd is the offset after the last batch of s (whole batches), from the batch headers:
// one read of a header per batch returned.
func readEnd(s storage.Slice) (int64, error) {
	var hb [batch.HeaderSize]byte
	end := int64(-1)
	for pos, stop := s.Pos, s.Pos+int64(s.Size); pos < stop; {
		if _, err := s.File.ReadAt(hb[:], pos); err != nil {
			return -1, err
		}
		h, err := batch.ParseHeader(hb[:])
		if err != nil {
			return -1, err
		}
		end = h.LastOffset() + 1
		pos += int64(h.Size())
	}
	return end, nil
}

// count adds the answer's partitions to their topics' BrokerTopicMetrics: the record bytes
// sent (BytesOut for a consumer, ReplicationBytesOut for a follower) and a consumer's failed
// partitions. One counter lookup per topic, none per partition.
func (f *fetch) count(topics []fetchTopic) {
	if f.h.Topics == nil {
		return
	}
	follower := f.replicaID >= 0
	for i := range topics {
		t := &topics[i]
		// The name from a partition held here: a topic fetched by id has none in the
		// request, and a name no partition has is not a topic (no counters are made for
		// names a client makes up).
		name := ""
		for _, p := range f.parts[i] {
			if p != nil {
				name = p.Topic
				break
			}
		}
		if name == "" {
			continue
		}
		tc := f.h.Topics.For(name)
		for j := range t.parts {
			p := &t.parts[j]
			switch n := len(p.records) + p.file.N; {
			case p.errCode != 0 && !follower:
				tc.FetchFailed()
			case p.errCode == 0:
				tc.Fetched(n, follower)
			}
		}
	}
}

// FetchesWaiting is the Fetch requests parked now (long poll): the Fetch purgatory's size.
func (h *Handler) FetchesWaiting() int { return int(h.fetchesWaiting.Load()) }

// release drops the segment references taken by read.
func (f *fetch) release() {
	for _, s := range f.slices {
		s.Release()
	}
	f.slices = f.slices[:0]
}

// moved reports whether a parked partition has more to read than when fp was answered (a
// consumer's high watermark, a follower's log end offset) or changed role: a follower's fetch
// parks only on a leader, a consumer's on the role (and leader epoch) it was read in.
func (f *fetch) moved(p *replica.Partition, fp *fetchPartition) bool {
	_, leaderEpoch, leads := p.Role()
	if f.replicaID >= 0 {
		return !leads || p.Log().LogEndOffset() > fp.end
	}
	if leads != fp.leads || leaderEpoch != fp.leaderEpoch {
		return true
	}
	if f.committed {
		// The last stable offset moves when the high watermark passes a marker or records
		// outside transactions; both wake parked fetches (notify), which re-check here.
		return p.LastStableOffset() > fp.end
	}
	return p.HighWatermark() > fp.end
}

// wait parks until a partition gets new records, the deadline passes or ctx ends; false
// means answer now.
func (f *fetch) wait(ctx context.Context, deadline time.Time) bool {
	d := deadline.Sub(f.h.Now())
	if d <= 0 {
		return false
	}
	ch := f.ch
	select {
	case <-ch: // a stale signal from an earlier wait of this request
	default:
	}
	for _, ps := range f.parts {
		for _, p := range ps {
			if p != nil {
				p.Watch(ch)
			}
		}
	}
	// One deferred loop, not a defer per partition: deferring in a loop heap-allocates a
	// record per call, a thousand per wait for a consumer of a thousand partitions.
	defer func() {
		for _, ps := range f.parts {
			for _, p := range ps {
				if p != nil {
					p.Unwatch(ch)
				}
			}
		}
	}()
	// Records may have arrived, or the topic been deleted (Remove unpublishes, then wakes
	// its watchers), between the read and the Watch: check once more. A removed partition is
	// answered UNKNOWN_TOPIC_OR_PARTITION; parking on it would wait out max_wait.
	for ti, ps := range f.parts {
		for pi, p := range ps {
			if p == nil {
				continue
			}
			if f.h.Replicas.Get(p.Topic, p.Index) != p {
				p.Unwatch(ch)
				ps[pi] = nil
				fp := &f.topics[ti].parts[pi]
				fp.errCode, fp.records, fp.file = kerr.UnknownTopicOrPartition.Code, nil, Part{}
				return true
			}
			if f.moved(p, &f.topics[ti].parts[pi]) {
				return true
			}
		}
	}
	if f.timer == nil {
		f.timer = time.NewTimer(d)
	} else {
		f.timer.Reset(d) // since Go 1.23 Reset after Stop never sees a stale tick
	}
	defer f.timer.Stop()
	select {
	case <-ch:
		return true
	case <-f.timer.C:
		return false
	case <-ctx.Done():
		return false
	}
}
