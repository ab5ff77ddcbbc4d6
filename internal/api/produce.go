package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/replica"
)

// Produce v0-v12. Each partition's records are split into batches and validated (size, magic,
// CRC, codec) before anything is appended; legacy v0/v1 message sets (produce v0-v2 only) are
// up-converted to one v2 batch. acks=0 gets no response; acks=1 and acks=all are answered
// once the records are in the log, which on a single node is also when they are committed.

// leaderEpoch is the partition leader epoch stamped on appended batches (single node: 0).
const leaderEpoch = 0

func handleProduce(h *Handler, _ context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	now := h.nowMs()
	acksAll := req.Acks == -1
	failed := false
	// The answer slices are sized up front and the batch headers of each partition reuse one
	// scratch slice: a request carries batches for up to every partition a producer writes.
	resp.Topics = make([]kmsg.ProduceResponseTopic, 0, len(req.Topics))
	var hdrs []batch.Header
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, 0, len(rt.Partitions))
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			var res replica.AppendResult
			var err error
			if req.Acks < -1 || req.Acks > 1 {
				err = kerr.InvalidRequiredAcks // Kafka refuses the whole request, appending nothing
			} else {
				res, hdrs, err = h.produce(req.Version, rt.Topic, rp.Partition, rp.Records, now, acksAll, hdrs[:0])
			}
			if err != nil {
				failed = true
				sp.ErrorCode = code(err)
				sp.ErrorMessage = errMsg(err)
				sp.BaseOffset = -1
				sp.LogAppendTime = -1
				sp.LogStartOffset = -1
				if sp.ErrorCode == unknownServerError {
					h.Log.Error("produce failed", "topic", rt.Topic, "partition", rp.Partition, "err", err)
				}
			} else {
				sp.BaseOffset = res.BaseOffset
				sp.LogAppendTime = res.LogAppendTime
				sp.LogStartOffset = res.LogStartOffset
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if req.Acks == 0 {
		// No response; a failure closes the connection so the producer notices (as Kafka).
		return Reply{None: true, Close: failed}
	}
	return msg(resp)
}

// produce validates and appends one partition's records. hdrs is scratch space for the
// batch headers, returned (grown) for the next partition.
func (h *Handler) produce(version int16, topic string, part int32, records []byte, nowMs int64, acksAll bool, hdrs []batch.Header) (replica.AppendResult, []batch.Header, error) {
	p, err := h.partition(topic, part)
	if err != nil {
		return replica.AppendResult{}, hdrs, err
	}
	if t := h.Meta.Image().Topic(topic); t != nil && t.Internal {
		// Only the coordinators write internal topics (Kafka: "Cannot append to internal topic").
		return replica.AppendResult{}, hdrs, fmt.Errorf("%w: cannot append to internal topic %s", errInvalidTopic, topic)
	}
	s := p.Settings()
	raw, hdrs, err := prepareBatches(version, records, s, hdrs)
	if err != nil {
		return replica.AppendResult{}, hdrs, err
	}
	res, err := p.Append(raw, hdrs, nowMs, leaderEpoch, acksAll)
	return res, hdrs, err
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
