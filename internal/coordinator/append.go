package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/replica"
)

// Record is a record of a coordinator's topic; a nil Value is a tombstone.
type Record struct {
	Key, Value []byte
}

// Producer is the transactional producer a batch is written for.
type Producer struct {
	ID    int64
	Epoch int16
}

// Append writes recs to t's partition as one uncompressed batch, as its leader in t's epoch
// with acks=all, and returns the partition's wait for the ISR to have them (nil if they are
// committed already) or the failure, unnamed: each coordinator names it with the Kafka
// errors its core maps. A batch over the partition's max.message.bytes is MESSAGE_TOO_LARGE.
//
// In t's epoch: once the partition has moved on to a newer term, it refuses the append
// (replica.ErrFencedLeaderEpoch) even if the broker's Resign has not reached the shard yet,
// so a stale coordinator never writes. The partition fails the wait with
// REQUEST_TIMED_OUT after timeoutMs, or at once when its leadership changes.
//
// With txn the batch is transactional for that producer, with BaseSequence -1 as Kafka's
// coordinators write it: the partition checks the producer's epoch (a fenced producer is
// INVALID_PRODUCER_EPOCH) but no sequence.
func Append(t *Term, recs []Record, txn *Producer, now, timeoutMs int64) (<-chan error, error) {
	brs := make([]batch.Record, len(recs))
	for i, r := range recs {
		brs[i] = batch.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
	}
	h := batch.Header{
		PartitionLeaderEpoch: -1, LastOffsetDelta: int32(len(recs) - 1), BaseTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
	}
	if txn != nil {
		h.ProducerID, h.ProducerEpoch = txn.ID, txn.Epoch
		h.Attributes |= batch.AttrTransactional
	}
	raw, err := batch.Build(h, brs, batch.CodecNone)
	if err != nil {
		return nil, err
	}
	if s := t.Partition.Settings(); int64(len(raw)) > int64(s.MaxMessageBytes) {
		return nil, fmt.Errorf("%w: %d-byte batch, max.message.bytes %d", kerr.MessageTooLarge, len(raw), s.MaxMessageBytes)
	}
	hdr, err := batch.ParseHeader(raw)
	if err != nil {
		return nil, err
	}
	res, err := t.Partition.AppendWait(raw, []batch.Header{hdr}, now, t.Epoch, true, timeoutMs)
	if err != nil {
		return nil, err
	}
	return res.Wait, nil
}

// AwaitCommit waits for an acks=all append's outcome (nil once the ISR has it), at most
// backstop, or until ctx (the shard's term) ends: then it is NOT_LEADER_OR_FOLLOWER, and
// after backstop REQUEST_TIMED_OUT. An outcome already there wins.
func AwaitCommit(ctx context.Context, wait <-chan error, backstop time.Duration) error {
	select {
	case err := <-wait:
		return err
	default:
	}
	tm := time.NewTimer(backstop)
	defer tm.Stop()
	select {
	case err := <-wait:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: the coordinator resigned while its append waited for the ISR", replica.ErrNotLeaderOrFollower)
	case <-tm.C:
		return fmt.Errorf("%w: no answer from the partition within %v", replica.ErrRequestTimedOut, backstop)
	}
}
