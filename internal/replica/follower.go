package replica

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/storage"
)

// The follower side of replication for one partition, as a deterministic core (after Kafka's
// AbstractFetcherThread and ReplicaFetcherThread): it says what to ask the leader next and,
// given the answer, what to do to the local log — truncate, append, move the high watermark
// and log start offset. The fetcher goroutine (one per source broker, carrying every partition
// it follows from that broker) sends the requests and applies the actions
// (ApplyFollowerAction); this core holds no log and no clock.
//
// Truncation. A follower never truncates to its high watermark on start or on a new leader
// (the KIP-101 loss: a follower that restarts before learning the high watermark that covered
// its last batch, then becomes leader, would have dropped an acknowledged record). It finds
// where its log parts from the leader's by leader epochs instead, in one of two ways:
//   - truncation on fetch (KIP-320, the default): every Fetch carries the epoch of the
//     follower's last batch; a leader whose log parts from it answers with the diverging
//     epoch and no records;
//   - OffsetForLeaderEpoch (KIP-101/279; FollowerConfig.UseOffsetForLeaderEpoch): before
//     fetching, ask the leader where the follower's latest epoch ends.
//
// Either way the leader's (epoch, endOffset) gives the truncation offset (Kafka's
// getOffsetTruncationState): if the follower knows that epoch, the smaller of where it ends
// on each side; if not, the end of the follower's largest epoch below it, and ask again
// (each round removes the follower's newest epoch, so it ends).
//
// Not safe for concurrent use: its fetcher owns it.

// FollowerConfig is the follower's settings.
type FollowerConfig struct {
	LocalID   int32 // this broker's node id: the replica_id of its fetches
	BackoffMs int64 // replica.fetch.backoff.ms: pause after a failed fetch
	// UseOffsetForLeaderEpoch truncates with OffsetForLeaderEpoch before fetching, instead of
	// by the diverging epoch of fetch answers.
	UseOffsetForLeaderEpoch bool
}

// LocalLog is the follower's own log as the core sees it; LocalLogOf builds it from the log.
type LocalLog struct {
	LogStartOffset int64
	LogEndOffset   int64
	HighWatermark  int64
	Epochs         EpochLookup
}

// LocalLogOf describes l, whose leader epoch cache is epochs and high watermark hw.
func LocalLogOf(l *storage.Log, epochs *storage.LeaderEpochCache, hw int64) LocalLog {
	return LocalLog{LogStartOffset: l.LogStartOffset(), LogEndOffset: l.LogEndOffset(), HighWatermark: hw, Epochs: epochs}
}

// FollowerPhase is where a follower is in its protocol.
type FollowerPhase int8

const (
	PhaseFetching   FollowerPhase = iota // fetching (truncating on diverging epochs)
	PhaseTruncating                      // asking OffsetForLeaderEpoch before fetching
	PhaseOutOfRange                      // asking the leader's log start and end offsets (ListOffsets)
	PhaseFenced                          // our leader epoch is stale: idle until metadata moves on
)

func (p FollowerPhase) String() string {
	switch p {
	case PhaseFetching:
		return "fetching"
	case PhaseTruncating:
		return "truncating"
	case PhaseOutOfRange:
		return "out of range"
	case PhaseFenced:
		return "fenced"
	}
	return fmt.Sprintf("FollowerPhase(%d)", int8(p))
}

// RequestKind says what a FollowerRequest asks.
type RequestKind int8

const (
	RequestNone                 RequestKind = iota // nothing now (backing off, or fenced)
	RequestFetch                                   // Fetch with replica_id
	RequestOffsetForLeaderEpoch                    // OffsetForLeaderEpoch with replica_id
	RequestListOffsets                             // the leader's earliest and latest offsets, with replica_id
)

// FollowerRequest is the partition's part of the next request to its leader.
type FollowerRequest struct {
	Kind               RequestKind
	CurrentLeaderEpoch int32 // every kind: fencing (KIP-320)
	FetchOffset        int64 // Fetch: the local log end offset
	LastFetchedEpoch   int32 // Fetch: the epoch of the last local batch (-1: none)
	LogStartOffset     int64 // Fetch: the local log start offset
	LeaderEpoch        int32 // OffsetForLeaderEpoch: the epoch whose end is asked
}

// FetchAnswer is the partition's part of the leader's Fetch response.
type FetchAnswer struct {
	Err            error // nil, or the partition's error (a *kerr.Error)
	HighWatermark  int64
	LogStartOffset int64
	DivergingEpoch *EpochEndOffset // set when the leader found our log diverging
	Records        []byte          // whole batches from FetchOffset on (a trailing partial batch is ignored)
}

// FollowerAction is what to do to the local log, in field order. A negative offset means no
// change; ApplyFollowerAction does it.
type FollowerAction struct {
	TruncateFullyAt int64  // empty the log and start it at this offset
	TruncateTo      int64  // remove everything at and after this offset
	Append          []byte // whole batches, with the leader's offsets and epochs
	HighWatermark   int64  // the follower's new high watermark
	LogStartOffset  int64  // move the log start offset up to this
}

// NoAction changes nothing.
func NoAction() FollowerAction {
	return FollowerAction{TruncateFullyAt: -1, TruncateTo: -1, HighWatermark: -1, LogStartOffset: -1}
}

// Empty reports whether a changes nothing.
func (a FollowerAction) Empty() bool {
	return a.TruncateFullyAt < 0 && a.TruncateTo < 0 && len(a.Append) == 0 && a.HighWatermark < 0 && a.LogStartOffset < 0
}

// quickRetryMs is the first pause after the leader answered that it is not yet the leader of
// the epoch this follower asks about (UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER). Both
// brokers learn a leadership from the same metadata record, so the leader is usually only
// milliseconds behind; the pause doubles with each such answer up to replica.fetch.backoff.ms.
// Waiting the whole back-off (1 s by default) at once held acks=all writes for a second after
// a controlled shutdown whenever the remaining follower asked the new leader first.
const quickRetryMs = 10

// Follower is the follower-side state of one partition.
type Follower struct {
	cfg          FollowerConfig
	leader       int32
	leaderEpoch  int32
	phase        FollowerPhase
	delayUntilMs int64
	behind       int // answers in a row saying the leader is behind (the quick retry's exponent)
}

// NewFollower starts following leader in leaderEpoch. The local log is not truncated: the
// first answers from the leader say where it diverges. A log holding records without any
// leader epoch (written before epochs existed) has nothing to compare, so the returned action
// truncates it to its high watermark, Kafka's fallback for such logs.
func NewFollower(cfg FollowerConfig, leader, leaderEpoch int32, local LocalLog) (*Follower, FollowerAction) {
	f := &Follower{cfg: cfg, leader: leader, leaderEpoch: leaderEpoch}
	return f, f.start(local)
}

func (f *Follower) start(local LocalLog) FollowerAction {
	f.delayUntilMs, f.behind = 0, 0
	f.phase = PhaseFetching
	if f.cfg.UseOffsetForLeaderEpoch {
		f.phase = PhaseTruncating
	}
	act := NoAction()
	if local.Epochs.LatestEpoch() < 0 && local.LogEndOffset > local.LogStartOffset && local.HighWatermark < local.LogEndOffset {
		act.TruncateTo = max(local.HighWatermark, local.LogStartOffset)
		f.phase = PhaseFetching
	}
	return act
}

// UpdateLeader applies metadata: a newer leader epoch (with its leader) restarts the protocol
// against it (applied true, with the action NewFollower would give); an epoch not newer than
// the one followed is ignored.
func (f *Follower) UpdateLeader(leader, leaderEpoch int32, local LocalLog) (applied bool, act FollowerAction) {
	if leaderEpoch <= f.leaderEpoch {
		return false, NoAction()
	}
	f.leader, f.leaderEpoch = leader, leaderEpoch
	return true, f.start(local)
}

func (f *Follower) Leader() int32        { return f.leader }
func (f *Follower) LeaderEpoch() int32   { return f.leaderEpoch }
func (f *Follower) Phase() FollowerPhase { return f.phase }

// WakeAtMs is when a follower that is backing off has its next request, or -1 when it is
// not backing off (it has a request now, or it is fenced until metadata changes).
func (f *Follower) WakeAtMs(nowMs int64) int64 {
	if f.phase == PhaseFenced || nowMs >= f.delayUntilMs {
		return -1
	}
	return f.delayUntilMs
}

// Next is the request to make for this partition now (RequestNone while backing off or
// fenced).
func (f *Follower) Next(local LocalLog, nowMs int64) FollowerRequest {
	r := FollowerRequest{Kind: RequestNone, CurrentLeaderEpoch: f.leaderEpoch, FetchOffset: -1, LastFetchedEpoch: -1, LogStartOffset: -1, LeaderEpoch: -1}
	if f.phase == PhaseFenced || nowMs < f.delayUntilMs {
		return r
	}
	switch f.phase {
	case PhaseFetching:
		r.Kind = RequestFetch
		r.FetchOffset = local.LogEndOffset
		r.LastFetchedEpoch = local.Epochs.LatestEpoch()
		r.LogStartOffset = local.LogStartOffset
	case PhaseTruncating:
		if latest := local.Epochs.LatestEpoch(); latest >= 0 {
			r.Kind = RequestOffsetForLeaderEpoch
			r.LeaderEpoch = latest
		} else {
			// Nothing to compare (an empty log): fetch.
			f.phase = PhaseFetching
			return f.Next(local, nowMs)
		}
	case PhaseOutOfRange:
		r.Kind = RequestListOffsets
	}
	return r
}

// HandleFetch takes the leader's answer to req (a RequestFetch from Next) given the local log
// now. An answer to an outdated request (another leader epoch, or the log end offset moved
// since) is ignored. Records that do not line up with the local log end offset are an error
// (and a back-off): the leader's batches must start at or past it, never straddle it.
func (f *Follower) HandleFetch(req FollowerRequest, ans FetchAnswer, local LocalLog, nowMs int64) (FollowerAction, error) {
	if req.Kind != RequestFetch || req.CurrentLeaderEpoch != f.leaderEpoch || f.phase != PhaseFetching || req.FetchOffset != local.LogEndOffset {
		return NoAction(), nil
	}
	if ans.Err != nil {
		return NoAction(), f.answerError(ans.Err, nowMs)
	}
	f.behind = 0
	if d := ans.DivergingEpoch; d != nil {
		off, _ := truncationOffset(local, *d)
		// Complete or not, keep fetching: the next fetch carries the new last epoch, and the
		// leader checks it again.
		return truncateAction(local, off), nil
	}
	act := NoAction()
	leo := local.LogEndOffset
	start, end := -1, 0
	for off := 0; off < len(ans.Records); {
		h, err := batch.ParseHeader(ans.Records[off:])
		if err != nil || h.Size() > len(ans.Records)-off {
			break // a partial batch at the end
		}
		one := ans.Records[off : off+h.Size()]
		off += h.Size()
		if h.LastOffset() < leo {
			continue // already here
		}
		if h.BaseOffset < leo {
			f.delayUntilMs = nowMs + f.cfg.BackoffMs
			return NoAction(), fmt.Errorf("%w: leader batch %d..%d straddles the local log end offset %d", storage.ErrOffsetOutOfOrder, h.BaseOffset, h.LastOffset(), leo)
		}
		if _, err := batch.CheckCRC(one); err != nil {
			f.delayUntilMs = nowMs + f.cfg.BackoffMs
			return NoAction(), fmt.Errorf("replica: batch at offset %d from the leader: %w", h.BaseOffset, err)
		}
		if start < 0 {
			start = off - h.Size()
		}
		end = off
		leo = h.LastOffset() + 1
	}
	if start >= 0 {
		act.Append = ans.Records[start:end]
	}
	act.HighWatermark = max(min(ans.HighWatermark, leo), local.LogStartOffset)
	if ans.LogStartOffset > local.LogStartOffset {
		if lso := min(ans.LogStartOffset, act.HighWatermark); lso > local.LogStartOffset {
			act.LogStartOffset = lso
		}
	}
	return act, nil
}

// HandleEpochEndOffset takes the leader's OffsetForLeaderEpoch answer (or error) to req. When
// the truncation is complete the follower starts fetching; otherwise it asks again about its
// new latest epoch.
func (f *Follower) HandleEpochEndOffset(req FollowerRequest, ans EpochEndOffset, err error, local LocalLog, nowMs int64) (FollowerAction, error) {
	if req.Kind != RequestOffsetForLeaderEpoch || req.CurrentLeaderEpoch != f.leaderEpoch || f.phase != PhaseTruncating {
		return NoAction(), nil
	}
	if err != nil {
		return NoAction(), f.answerError(err, nowMs)
	}
	f.behind = 0
	off, complete := truncationOffset(local, ans)
	if complete {
		f.phase = PhaseFetching
	}
	return truncateAction(local, off), nil
}

// HandleLeaderOffsets takes the leader's log start and end offsets (ListOffsets earliest and
// latest) after an OFFSET_OUT_OF_RANGE fetch (Kafka's fetchOffsetAndTruncate):
//   - the leader's log ends below ours (an unclean election, or records the leader lost):
//     truncate to its end;
//   - the leader's log starts past our end (we were away while retention ran): empty our log
//     and start at its start;
//   - otherwise fetch again from our end.
func (f *Follower) HandleLeaderOffsets(req FollowerRequest, leaderStart, leaderEnd int64, err error, local LocalLog, nowMs int64) (FollowerAction, error) {
	if req.Kind != RequestListOffsets || req.CurrentLeaderEpoch != f.leaderEpoch || f.phase != PhaseOutOfRange {
		return NoAction(), nil
	}
	if err != nil {
		return NoAction(), f.answerError(err, nowMs)
	}
	f.behind = 0
	f.phase = PhaseFetching
	act := NoAction()
	switch {
	case leaderEnd < local.LogEndOffset:
		act = truncateAction(local, leaderEnd)
	case leaderStart > local.LogEndOffset:
		act.TruncateFullyAt = leaderStart
		act.HighWatermark = leaderStart
	}
	return act, nil
}

// answerError moves the follower on after a failed request: FENCED_LEADER_EPOCH stops it
// until metadata brings a newer epoch; OFFSET_OUT_OF_RANGE on a fetch asks for the leader's
// offsets; UNKNOWN_LEADER_EPOCH and NOT_LEADER_OR_FOLLOWER (the leader has not applied the
// metadata yet) retry soon, then less and less often (quickRetryMs); anything else
// (UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR, a network error) backs off. The error
// is returned for the caller to log.
func (f *Follower) answerError(err error, nowMs int64) error {
	switch {
	case errors.Is(err, kerr.FencedLeaderEpoch) || errors.Is(err, ErrFencedLeaderEpoch):
		f.phase = PhaseFenced
	case (errors.Is(err, kerr.OffsetOutOfRange) || errors.Is(err, storage.ErrOffsetOutOfRange)) && f.phase == PhaseFetching:
		f.phase = PhaseOutOfRange
	case errors.Is(err, kerr.UnknownLeaderEpoch) || errors.Is(err, ErrUnknownLeaderEpoch) ||
		errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, ErrNotLeaderOrFollower):
		delay := f.cfg.BackoffMs
		if f.behind < 20 && quickRetryMs<<f.behind < delay {
			delay = quickRetryMs << f.behind
		}
		f.behind++
		f.delayUntilMs = nowMs + delay
	default:
		f.delayUntilMs = nowMs + f.cfg.BackoffMs
	}
	return err
}

// truncationOffset is where the follower's log must be cut, given the leader's epoch and end
// offset for it (Kafka's getOffsetTruncationState), and whether that is final.
func truncationOffset(local LocalLog, leader EpochEndOffset) (int64, bool) {
	leo := local.LogEndOffset
	switch {
	case leader.EndOffset == storage.UndefinedEpochOffset:
		// The leader cannot place our epoch: fall back to our high watermark. Safe while we
		// follow (the leader has everything below it that we have), though not a position a
		// follower that may become leader should use when it has a choice.
		return min(local.HighWatermark, leo), true
	case leader.Epoch == storage.UndefinedEpoch:
		return min(leader.EndOffset, leo), true
	}
	fe, fend := local.Epochs.EndOffsetFor(leader.Epoch, leo)
	switch {
	case fend == storage.UndefinedEpochOffset:
		// We know no epoch at or below the leader's: trust its end offset.
		return min(leader.EndOffset, leo), true
	case fe != leader.Epoch:
		// We do not know the leader's epoch: cut where our largest epoch below it ends and
		// ask again.
		return min(fend, leo), false
	default:
		return min(fend, leader.EndOffset, leo), true
	}
}

// truncateAction truncates the local log to off and lowers the high watermark to match. An
// off at or past the log end offset still truncates at the log end offset: the log does not
// change, but the leader epoch cache drops an epoch that starts there with no records (a
// leader that lost its leadership before writing anything), which would otherwise be the last
// fetched epoch forever, diverging on every fetch (as Kafka's UnifiedLog.truncateTo).
func truncateAction(local LocalLog, off int64) FollowerAction {
	act := NoAction()
	act.TruncateTo = min(off, local.LogEndOffset)
	if local.HighWatermark > act.TruncateTo {
		act.HighWatermark = act.TruncateTo
	}
	return act
}

// ApplyFollowerAction does act to a follower's log and its leader epoch cache, keeping them in
// step (storage.LeaderEpochCache's rules): a truncation cuts the log, then the cache; an append
// assigns the batches' epochs, then appends (rolling the cache back if the append fails); the
// high watermark and log start offset follow. It returns the log end offset afterwards. The
// caller publishes act.HighWatermark (when >= 0) as the partition's high watermark and
// updates its producer state (rebuilt after a truncation, advanced by the appended batches).
func ApplyFollowerAction(l *storage.Log, epochs *storage.LeaderEpochCache, act FollowerAction) (int64, error) {
	if act.TruncateFullyAt >= 0 {
		if err := l.TruncateFullyAndStartAt(act.TruncateFullyAt); err != nil {
			return l.LogEndOffset(), err
		}
		if err := epochs.Clear(); err != nil {
			return l.LogEndOffset(), err
		}
	}
	if act.TruncateTo >= 0 {
		if err := l.TruncateTo(act.TruncateTo); err != nil {
			return l.LogEndOffset(), err
		}
		if err := epochs.TruncateFromEnd(l.LogEndOffset()); err != nil {
			return l.LogEndOffset(), err
		}
	}
	if len(act.Append) > 0 {
		if err := epochs.AssignBatches(act.Append); err != nil {
			return l.LogEndOffset(), err
		}
		if _, err := l.Append(act.Append, storage.AppendOptions{}); err != nil {
			if terr := epochs.TruncateFromEnd(l.LogEndOffset()); terr != nil {
				err = errors.Join(err, terr)
			}
			return l.LogEndOffset(), err
		}
	}
	if act.HighWatermark >= 0 {
		l.SetHighWatermark(act.HighWatermark)
	}
	if act.LogStartOffset > l.LogStartOffset() {
		if err := l.SetLogStartOffset(act.LogStartOffset); err != nil {
			return l.LogEndOffset(), err
		}
		if err := epochs.TruncateFromStart(l.LogStartOffset()); err != nil {
			return l.LogEndOffset(), err
		}
	}
	return l.LogEndOffset(), nil
}
