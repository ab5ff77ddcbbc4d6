package replica

import (
	"errors"
	"fmt"

	"github.com/gregor-project/gregor/internal/storage"
)

// Leader epoch checks a leader makes on requests that carry epochs: current_leader_epoch
// fencing (KIP-320) on Fetch, ListOffsets, OffsetForLeaderEpoch; the answer to
// OffsetForLeaderEpoch (KIP-101/279); and the diverging-epoch check of a Fetch that carries
// last_fetched_epoch (KIP-320, "truncation on fetch"). Pure functions over the leader epoch
// cache.

var (
	// ErrFencedLeaderEpoch: the request's current leader epoch is older than the partition's:
	// the sender has stale metadata. FENCED_LEADER_EPOCH.
	ErrFencedLeaderEpoch = errors.New("replica: the request's leader epoch is older than the partition's")
	// ErrUnknownLeaderEpoch: the request's current leader epoch is newer than the partition's:
	// this broker has not caught up with metadata yet. UNKNOWN_LEADER_EPOCH.
	ErrUnknownLeaderEpoch = errors.New("replica: the request's leader epoch is newer than the partition's")
)

// EpochLookup is what the replication cores read from a leader epoch cache
// (*storage.LeaderEpochCache implements it).
type EpochLookup interface {
	// EndOffsetFor is OffsetForLeaderEpoch's answer for requested with log end offset leo.
	EndOffsetFor(requested int32, leo int64) (epoch int32, endOffset int64)
	// LatestEpoch is the newest epoch in the cache, storage.UndefinedEpoch when empty.
	LatestEpoch() int32
}

var _ EpochLookup = (*storage.LeaderEpochCache)(nil)

// EpochEndOffset is an epoch and the offset where it ends: an OffsetForLeaderEpoch answer, or
// the diverging epoch of a Fetch answer.
type EpochEndOffset struct {
	Epoch     int32
	EndOffset int64
}

// CheckCurrentLeaderEpoch compares a request's current_leader_epoch with the partition's
// leader epoch on this broker. -1 (the request does not say) always passes.
func CheckCurrentLeaderEpoch(local, requested int32) error {
	switch {
	case requested < 0 || requested == local:
		return nil
	case requested < local:
		return fmt.Errorf("%w: request epoch %d, partition epoch %d", ErrFencedLeaderEpoch, requested, local)
	default:
		return fmt.Errorf("%w: request epoch %d, partition epoch %d", ErrUnknownLeaderEpoch, requested, local)
	}
}

// LastOffsetForLeaderEpoch answers OffsetForLeaderEpoch for epoch on a log whose end offset
// is leo: the largest epoch <= epoch and where it ends (see storage.LeaderEpochCache
// .EndOffsetFor); (UndefinedEpoch, UndefinedEpochOffset) when unknown.
func LastOffsetForLeaderEpoch(epochs EpochLookup, leo int64, epoch int32) EpochEndOffset {
	e, off := epochs.EndOffsetFor(epoch, leo)
	if off == storage.UndefinedEpochOffset {
		return EpochEndOffset{storage.UndefinedEpoch, storage.UndefinedEpochOffset}
	}
	return EpochEndOffset{e, off}
}

// DivergingEpoch checks a fetch at fetchOffset whose last fetched epoch is lastFetchedEpoch
// against the leader's epochs (Kafka's check in Partition.fetchRecords). It returns:
//   - nil, nil when the fetcher's log agrees with the leader's up to fetchOffset (or the fetch
//     carries no last fetched epoch, -1): read and answer as usual;
//   - the diverging epoch when the leader's log parts from the fetcher's before fetchOffset
//     (the leader's largest epoch <= lastFetchedEpoch is older than it, or ends before
//     fetchOffset): answer with it and no records, and do not count the fetch as the
//     follower's position;
//   - an error wrapping storage.ErrOffsetOutOfRange when the leader cannot place the epoch,
//     or fetchOffset is below the log start offset.
func DivergingEpoch(epochs EpochLookup, logStartOffset, leo, fetchOffset int64, lastFetchedEpoch int32) (*EpochEndOffset, error) {
	if lastFetchedEpoch < 0 {
		return nil, nil
	}
	e := LastOffsetForLeaderEpoch(epochs, leo, lastFetchedEpoch)
	if e.EndOffset == storage.UndefinedEpochOffset || e.Epoch == storage.UndefinedEpoch {
		return nil, fmt.Errorf("%w: cannot find the end offset of last fetched epoch %d", storage.ErrOffsetOutOfRange, lastFetchedEpoch)
	}
	if fetchOffset < logStartOffset {
		return nil, fmt.Errorf("%w: fetch offset %d is below the log start offset %d", storage.ErrOffsetOutOfRange, fetchOffset, logStartOffset)
	}
	if e.Epoch < lastFetchedEpoch || e.EndOffset < fetchOffset {
		return &e, nil
	}
	return nil, nil
}
