package api

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/observe"
	"github.com/gregor-project/gregor/internal/replica"
)

// Produce v0-v12. Each partition's records are split into batches and validated (size, magic,
// CRC, codec) before anything is appended; legacy v0/v1 message sets (produce v0-v2 only) are
// up-converted to one v2 batch. Only the partition's leader appends (NOT_LEADER_OR_FOLLOWER
// elsewhere), stamping its leader epoch. acks=0 gets no response; acks=1 is answered once the
// records are in the leader's log; acks=all once they are committed (the high watermark passed
// them: at once on a sole replica), every partition's wait running in parallel up to the
// request's timeout (REQUEST_TIMED_OUT for those not committed by then).
//
// A partition named more than once in a request is appended and answered once, with its last
// copy of records (collapseDuplicatePartitions), as Kafka does.
//
// Transactions. A client may not write control batches, nor a transactional batch without a
// producer id, nor a producer id without a sequence (INVALID_RECORD). A transactional batch
// that would start a transaction on its partition is appended only once the transaction
// coordinator of the request's transactional_id confirms the partition was added to the
// transaction (KIP-890 part 1, produceverify.go); a late or stray write is refused
// INVALID_TXN_STATE and never opens a transaction the coordinator does not know of.

func handleProduce(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ProduceRequest)
	collapseDuplicatePartitions(req)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	start := h.Now()
	now := start.UnixMilli()
	acksAll := req.Acks == -1
	failed := false
	// The answer slices are sized up front and the batch headers of each partition reuse one
	// scratch slice: a request carries batches for up to every partition a producer writes.
	resp.Topics = make([]kmsg.ProduceResponseTopic, 0, len(req.Topics))
	var hdrs []batch.Header
	var waits []produceWait
	// A transactional producer's request (transactional_id set) is validated whole first:
	// the partitions its batches would open a transaction on are verified with the
	// coordinator before any is appended (produceverify.go).
	var pending []pendingAppend
	transactional := req.Version >= 3 && req.TransactionID != nil
	// Authorization (authorize.go): transactional records need WRITE on the transactional
	// id, or the whole request fails; each topic needs WRITE. Under an authorizer,
	// transactional records without a transactional id fail the same way, as in Kafka;
	// without one they keep the answers the checks below give them (INVALID_RECORD,
	// INVALID_TXN_STATE).
	txnDenied := false
	if hasTransactionalRecords(req) {
		if req.TransactionID != nil {
			txnDenied = !h.authorized(c, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, *req.TransactionID)
		} else {
			txnDenied = h.authorizing()
		}
	}
	writable := h.authorizedNames(c, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic)
	im := h.Meta.Image()
	for ti, rt := range req.Topics {
		var tc *observe.TopicCounters // nil for a name that is no topic: no series made for it
		if h.Topics != nil && im.Topic(rt.Topic) != nil {
			tc = h.Topics.For(rt.Topic)
		}
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, 0, len(rt.Partitions))
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			var res replica.AppendResult
			var err error
			switch {
			case req.Acks < -1 || req.Acks > 1:
				err = kerr.InvalidRequiredAcks // Kafka refuses the whole request, appending nothing
			case txnDenied:
				err = kerr.TransactionalIDAuthorizationFailed
			case !writable.ok(rt.Topic):
				err = kerr.TopicAuthorizationFailed
			case transactional:
				var pa pendingAppend
				pa, err = h.prepareProduce(req.Version, rt.Topic, rp.Partition, rp.Records, nil)
				if err == nil {
					pa.topic, pa.part = ti, len(st.Partitions)
					pending = append(pending, pa)
				}
			default:
				res, hdrs, err = h.produce(req.Version, rt.Topic, rp.Partition, rp.Records, now, acksAll, int64(req.TimeoutMillis), hdrs[:0])
			}
			if err == nil && res.Wait != nil {
				waits = append(waits, produceWait{topic: ti, part: len(st.Partitions), ch: res.Wait})
			}
			if err != nil {
				failed = true
				h.produceFailed(&sp, rt.Topic, err)
				tc.ProduceFailed(rejectedBytes(sp.ErrorCode, rp.Records))
			} else {
				if !transactional {
					tc.Produced(recordCount(hdrs), len(rp.Records))
				}
				sp.BaseOffset = res.BaseOffset
				sp.LogAppendTime = res.LogAppendTime
				sp.LogStartOffset = res.LogStartOffset
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(pending) > 0 {
		var verifyFailed bool
		waits, verifyFailed = h.appendTransactional(ctx, req, resp, pending, waits, now)
		failed = failed || verifyFailed
	}
	busy := h.Now().Sub(start) // request_percentage leaves out the wait for acks
	if req.Acks == 0 {
		// No response; a failure closes the connection so the producer notices (as Kafka).
		return h.throttleProduce(c, req, busy, Reply{None: true, Close: failed})
	}
	var waited time.Duration
	if len(waits) > 0 {
		// The records are in the log: the request's bytes are not read again, and its buffer
		// must not stay held while the followers catch up (their fetches need pool memory too).
		c.FreeRequest()
		w := h.Now()
		h.awaitCommit(ctx, resp, waits, time.Duration(req.TimeoutMillis)*time.Millisecond)
		waited = h.Now().Sub(w)
	}
	if failed && req.Version >= 10 {
		h.produceLeaderHints(resp, h.listenerOf(c))
	}
	reply := h.throttleProduce(c, req, busy, msg(resp))
	reply.Remote = waited
	return reply
}

// recordCount is the records of a partition's batches (MessagesInPerSec counts records).
func recordCount(hdrs []batch.Header) int {
	n := 0
	for i := range hdrs {
		n += int(hdrs[i].RecordCount)
	}
	return n
}

// rejectedBytes is the bytes of a partition's records refused as too large or invalid, as
// Kafka's BytesRejectedPerSec counts them; 0 for any other failure.
func rejectedBytes(errCode int16, records []byte) int {
	switch errCode {
	case kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code, kerr.CorruptMessage.Code, kerr.InvalidRecord.Code:
		return len(records)
	}
	return 0
}

// collapseDuplicatePartitions leaves each partition of req named once, as Kafka's
// handleProduceRequest does by collecting the partitions into a map keyed by topic and
// partition (every version): a partition named several times keeps its last copy of records,
// and is appended and answered once; a topic named in several entries becomes one entry, at
// its first place. A request without duplicates is left as it is, allocating nothing.
func collapseDuplicatePartitions(req *kmsg.ProduceRequest) {
	if !hasDuplicatePartitions(req.Topics) {
		return
	}
	type tp struct {
		topic string
		part  int32
	}
	topicAt := map[string]int{}
	partAt := map[tp][2]int{} // index of the topic entry and of the partition in it
	var topics []kmsg.ProduceRequestTopic
	for _, rt := range req.Topics {
		ti, ok := topicAt[rt.Topic]
		if !ok {
			ti = len(topics)
			topicAt[rt.Topic] = ti
			nt := rt
			nt.Partitions = nil
			topics = append(topics, nt)
		}
		for _, rp := range rt.Partitions {
			k := tp{rt.Topic, rp.Partition}
			if at, ok := partAt[k]; ok {
				topics[at[0]].Partitions[at[1]] = rp // the last copy wins
				continue
			}
			partAt[k] = [2]int{ti, len(topics[ti].Partitions)}
			topics[ti].Partitions = append(topics[ti].Partitions, rp)
		}
	}
	req.Topics = topics
}

// hasDuplicatePartitions reports whether a topic and partition is named more than once
// (a topic named in two entries counts, whatever their partitions). Small requests, the
// usual producer's, are checked without allocating.
func hasDuplicatePartitions(topics []kmsg.ProduceRequestTopic) bool {
	n := 0
	for _, rt := range topics {
		n += len(rt.Partitions)
	}
	if n <= 16 {
		for i, rt := range topics {
			for _, other := range topics[i+1:] {
				if other.Topic == rt.Topic {
					return true
				}
			}
			for j, rp := range rt.Partitions {
				for _, o := range rt.Partitions[j+1:] {
					if o.Partition == rp.Partition {
						return true
					}
				}
			}
		}
		return false
	}
	seenTopic := make(map[string]bool, len(topics))
	for _, rt := range topics {
		if seenTopic[rt.Topic] {
			return true
		}
		seenTopic[rt.Topic] = true
		seen := make(map[int32]bool, len(rt.Partitions))
		for _, rp := range rt.Partitions {
			if seen[rp.Partition] {
				return true
			}
			seen[rp.Partition] = true
		}
	}
	return false
}

// hasTransactionalRecords reports whether a partition's first batch is transactional (the
// attributes' bit 4 of a magic 2 batch), as Kafka's RequestUtils.hasTransactionalRecords
// tells the requests that need the transactional id's authorization.
func hasTransactionalRecords(req *kmsg.ProduceRequest) bool {
	const magicAt, attrsAt, txnBit = 16, 21, 0x10
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if b := rp.Records; len(b) > attrsAt+1 && b[magicAt] == 2 && b[attrsAt+1]&txnBit != 0 {
				return true
			}
		}
	}
	return false
}

// produceFailed sets a partition's answer to err (logging errors with no Kafka meaning).
func (h *Handler) produceFailed(sp *kmsg.ProduceResponseTopicPartition, topic string, err error) {
	sp.ErrorCode = code(err)
	sp.ErrorMessage = errMsg(err)
	sp.BaseOffset = -1
	sp.LogAppendTime = -1
	sp.LogStartOffset = -1
	if sp.ErrorCode == unknownServerError {
		h.Log.Error("produce failed", "topic", topic, "partition", sp.Partition, "err", err)
	}
}

// produceLeaderHints fills KIP-951's hints into a v10+ answer: each partition refused with
// NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names the current leader and epoch from this
// broker's image, and the answer carries those leaders' endpoints on the client's listener,
// so the producer retries at the new leader without a metadata round trip.
func (h *Handler) produceLeaderHints(resp *kmsg.ProduceResponse, listener string) {
	im := h.Meta.Image()
	named := map[int32]bool{}
	for ti := range resp.Topics {
		st := &resp.Topics[ti]
		t := im.Topic(st.Topic)
		for pi := range st.Partitions {
			sp := &st.Partitions[pi]
			if sp.ErrorCode != kerr.NotLeaderForPartition.Code && sp.ErrorCode != kerr.FencedLeaderEpoch.Code {
				continue
			}
			var pp *metadata.Partition
			if t != nil {
				pp = t.Partition(sp.Partition)
			}
			if pp == nil || pp.Leader < 0 || pp.Leader == h.NodeID {
				continue
			}
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = pp.Leader, pp.LeaderEpoch
			if named[pp.Leader] {
				continue
			}
			if host, port, ok := im.Endpoint(pp.Leader, listener); ok {
				named[pp.Leader] = true
				b := kmsg.NewProduceResponseBroker()
				b.NodeID, b.Host, b.Port = pp.Leader, host, port
				if br := im.Broker(pp.Leader); br != nil && br.Rack != "" {
					rack := br.Rack
					b.Rack = &rack
				}
				resp.Brokers = append(resp.Brokers, b)
			}
		}
	}
}

// produceWait is an acks=all partition answer waiting for its records to be committed.
type produceWait struct {
	topic, part int // index in the response
	ch          <-chan error
}

// awaitCommit waits for every acks=all partition of resp to be committed, at most timeout
// (the partitions' purgatories answer at the same deadline; this bound holds without them),
// and sets the errors of those that failed.
func (h *Handler) awaitCommit(ctx context.Context, resp *kmsg.ProduceResponse, waits []produceWait, timeout time.Duration) {
	timer := time.NewTimer(max(timeout, 0))
	defer timer.Stop()
	expired := false
	for _, w := range waits {
		var err error
		// An answer already there wins over the deadline: with timeout_ms 0 (or negative)
		// the timer fires at once, and a batch the high watermark already covers (a sole
		// in-sync replica) is committed, not timed out (Kafka's DelayedProduce tries to
		// complete before it expires).
		select {
		case err = <-w.ch:
			if err != nil {
				failProduceWait(resp, w, err)
			}
			continue
		default:
		}
		if expired {
			select {
			case err = <-w.ch:
			default:
				err = replica.ErrRequestTimedOut
			}
		} else {
			select {
			case err = <-w.ch:
			case <-timer.C:
				expired = true
				err = replica.ErrRequestTimedOut
			case <-ctx.Done():
				expired = true
				err = replica.ErrRequestTimedOut
			}
		}
		if err != nil {
			failProduceWait(resp, w, err)
		}
	}
}

// failProduceWait sets the answer of w's partition to err.
func failProduceWait(resp *kmsg.ProduceResponse, w produceWait, err error) {
	sp := &resp.Topics[w.topic].Partitions[w.part]
	sp.ErrorCode, sp.ErrorMessage = code(err), errMsg(err)
	sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
}

// produce validates and appends one partition's records. hdrs is scratch space for the
// batch headers, returned (grown) for the next partition.
func (h *Handler) produce(version int16, topic string, part int32, records []byte, nowMs int64, acksAll bool, timeoutMs int64, hdrs []batch.Header) (replica.AppendResult, []batch.Header, error) {
	pa, err := h.prepareProduce(version, topic, part, records, hdrs)
	if err != nil {
		return replica.AppendResult{}, pa.hdrs, err
	}
	res, err := pa.p.AppendWait(pa.raw, pa.hdrs, nowMs, -1, acksAll, timeoutMs)
	return res, pa.hdrs, err
}

// pendingAppend is one partition's validated records, ready to append.
type pendingAppend struct {
	topic, part int // indexes in the response
	p           *replica.Partition
	raw         []byte
	hdrs        []batch.Header
}

// prepareProduce checks that this broker leads the partition and validates its records
// (prepareBatches), the headers going into hdrs[:0].
func (h *Handler) prepareProduce(version int16, topic string, part int32, records []byte, hdrs []batch.Header) (pendingAppend, error) {
	if t := h.Meta.Image().Topic(topic); t != nil && t.Internal {
		// Only the coordinators write internal topics (Kafka: "Cannot append to internal
		// topic"), checked first, as Kafka's appendToLocalLog does.
		return pendingAppend{hdrs: hdrs}, fmt.Errorf("%w: cannot append to internal topic %s", errInvalidTopic, topic)
	}
	p, err := h.partition(topic, part)
	if err != nil {
		return pendingAppend{hdrs: hdrs}, err
	}
	if err := p.CheckLeader(-1); err != nil {
		return pendingAppend{hdrs: hdrs}, err // before the work of validating
	}
	raw, hdrs, err := prepareBatches(version, records, p.Settings(), hdrs)
	return pendingAppend{p: p, raw: raw, hdrs: hdrs}, err
}

// prepareBatches turns a produce request's records into validated v2 batches ready to append:
// raw is either the request's own bytes (the common case: no copy) or new bytes when a batch
// was up-converted or recompressed. The headers are appended to hdrs[:0].
func prepareBatches(version int16, records []byte, s *replica.Settings, hdrs []batch.Header) ([]byte, []batch.Header, error) {
	hdrs = hdrs[:0]
	if len(records) == 0 {
		return nil, hdrs, fmt.Errorf("%w: no records", batch.ErrCorrupt)
	}
	parts, err := batch.Split(records)
	if err != nil {
		return nil, hdrs, err
	}
	rewritten := false
	for i, b := range parts {
		magic, err := batch.Magic(b)
		if err != nil {
			return nil, hdrs, err
		}
		if magic < 2 {
			if version > 2 {
				return nil, hdrs, errLegacyInNewFormat
			}
			if b, err = batch.UpConvert(b); err != nil {
				return nil, hdrs, err
			}
			rewritten = true
		}
		if len(b) > int(s.MaxMessageBytes) {
			return nil, hdrs, fmt.Errorf("%w: %d bytes > %d", errMessageTooLarge, len(b), s.MaxMessageBytes)
		}
		// Compressed batches are opened and their records checked, as Kafka's leader does.
		hdr, err := batch.ValidateRecords(b)
		if err != nil {
			return nil, hdrs, err
		}
		if err := checkProducerFields(&hdr); err != nil {
			return nil, hdrs, err
		}
		if s.Recompress && hdr.Codec() != s.Compression {
			if b, err = batch.Recompress(b, s.Compression); err != nil {
				return nil, hdrs, err
			}
			if hdr, err = batch.ParseHeader(b); err != nil {
				return nil, hdrs, err
			}
			rewritten = true
		}
		parts[i] = b
		hdrs = append(hdrs, hdr)
	}
	if !rewritten {
		return records, hdrs, nil
	}
	var raw []byte
	for _, b := range parts {
		raw = append(raw, b...)
	}
	return raw, hdrs, nil
}

// checkProducerFields applies Kafka's LogValidator rules for a client's batch: no control
// batches (only coordinators write markers), no transactional batch without a producer id,
// and no producer id without a sequence (a batch of sequence -1 is a coordinator's, which
// skips the sequence checks).
func checkProducerFields(h *batch.Header) error {
	switch {
	case h.IsControl():
		return errClientControlBatch
	case h.IsTransactional() && h.ProducerID < 0:
		return errTxnWithoutProducer
	case h.ProducerID >= 0 && h.BaseSequence < 0:
		return fmt.Errorf("%w: invalid sequence number %d in a batch of producer id %d", batch.ErrInvalidRecord, h.BaseSequence, h.ProducerID)
	}
	return nil
}
