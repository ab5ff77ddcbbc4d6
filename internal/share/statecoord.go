package share

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/coordinator"
	"github.com/gregor-project/gregor/internal/replica"
)

// StateCoordinator is the share coordinator (Kafka's ShareCoordinatorService): the third
// user of coordinator.Runtime, over __share_group_state. The leader of the partition
// StatePartitionFor(StateKey(k)) owns share-partition k's state: it replays the partition on
// election (the latest ShareSnapshot per key with the ShareUpdates after it), answers Read
// from memory, and makes each Write durable on the ISR (acks=all) before it answers and
// before the state it answers from changes.
//
// Each Write appends one ShareSnapshot record (the whole state: start offset, leader epoch,
// state epoch, batches), so compaction keeps exactly the latest state of each key; Kafka
// writes ShareUpdates between snapshots, which replay understands (a later step writes
// them too, bounded by share.coordinator.snapshot.update.records.per.snapshot).
//
// Lock rule: the runtime's lock and a shard's mu are never held together. A shard's mu is
// held across one Write's append and its wait for the ISR: the writes of a partition are
// serialised, so its log order is its state order.
type StateCoordinator struct {
	log       *slog.Logger
	timeoutMs int64
	rt        *coordinator.Runtime[*stateShard]
}

// StateOptions wire a StateCoordinator into its broker.
type StateOptions struct {
	Replicas *replica.Manager
	Log      *slog.Logger
	// Manual: the broker reports leadership with Elect and Resign (coordinator.Config.Manual).
	Manual bool
	// EnsureTopic returns __share_group_state's partition count (0 if it does not exist),
	// creating it first with create.
	EnsureTopic func(create bool) (int32, error)
	// CommitTimeoutMs bounds a Write's wait for the ISR.
	CommitTimeoutMs int64
}

// stateShard is one __share_group_state partition's state for one term of leadership.
type stateShard struct {
	term *coordinator.Term
	mu   struct {
		sync.Mutex
		loaded bool
		failed bool
		gone   *kerr.Error
		states map[Key]PartitionState
	}
}

func (sh *stateShard) Term() *coordinator.Term { return sh.term }

// NewStateCoordinator makes a share coordinator; Start loads what this broker leads.
func NewStateCoordinator(o StateOptions) *StateCoordinator {
	c := &StateCoordinator{log: o.Log, timeoutMs: o.CommitTimeoutMs}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.timeoutMs <= 0 {
		c.timeoutMs = 30000
	}
	c.rt = coordinator.New(coordinator.Config[*stateShard]{
		Topic: StateTopic, Name: "share coordinator", Keys: "share_partitions",
		Replicas: o.Replicas, Log: c.log, Manual: o.Manual,
		EnsureTopic: o.EnsureTopic, PartitionFor: StatePartitionFor,
		NewShard: func(t *coordinator.Term) *stateShard { return &stateShard{term: t} },
		Load:     c.load,
		Unload:   c.unload,
	})
	return c
}

// Start elects and loads (without Manual); Close unloads every shard and waits.
func (c *StateCoordinator) Start() error { return c.rt.Start() }
func (c *StateCoordinator) Close()       { c.rt.Close() }

// Elect and Resign report leadership of a __share_group_state partition.
func (c *StateCoordinator) Elect(partition, leaderEpoch int32)  { c.rt.Elect(partition, leaderEpoch) }
func (c *StateCoordinator) Resign(partition, leaderEpoch int32) { c.rt.Resign(partition, leaderEpoch) }

// PartitionFor is the __share_group_state partition of k, or -1 while the topic does not
// exist.
func (c *StateCoordinator) PartitionFor(k Key) int32 { return c.rt.PartitionFor(StateKey(k)) }

func (c *StateCoordinator) load(sh *stateShard) (keys, records int) {
	states := map[Key]PartitionState{}
	skipped := 0
	err := coordinator.Replay(sh.term.Ctx, sh.term.Partition, func(h batch.Header, raw []byte, from int64) error {
		if h.IsControl() {
			return nil
		}
		recs, err := batch.Records(raw)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if h.BaseOffset+int64(r.OffsetDelta) < from {
				continue
			}
			records++
			if err := replayState(states, r.Key, r.Value); err != nil {
				skipped++
			}
		}
		return nil
	})
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if err != nil {
		if sh.term.Ctx.Err() == nil {
			sh.mu.failed = true
			c.log.Error("share coordinator could not load its partition; its share-partitions are unavailable", "partition", sh.term.Index, "err", err)
		}
		return 0, 0
	}
	if skipped > 0 {
		c.log.Warn("share coordinator skipped records it does not understand", "partition", sh.term.Index, "skipped", skipped)
	}
	if sh.mu.gone != nil {
		return 0, 0
	}
	sh.mu.states, sh.mu.loaded = states, true
	return len(states), records
}

// replayState applies one record of __share_group_state to states.
func replayState(states map[Key]PartitionState, key, value []byte) error {
	typ, k, err := parseStateKey(key)
	if err != nil {
		return err
	}
	if value == nil { // tombstone: DeleteShareGroupState
		delete(states, k)
		return nil
	}
	if typ == recSnapshot {
		s, err := parseSnapshot(value)
		if err != nil {
			return err
		}
		states[k] = s
		return nil
	}
	le, start, bs, err := parseUpdate(value)
	if err != nil {
		return err
	}
	if s, ok := states[k]; ok {
		states[k] = applyUpdate(s, le, start, bs)
	}
	return nil
}

func (c *StateCoordinator) unload(sh *stateShard, why *kerr.Error) {
	sh.mu.Lock()
	sh.mu.gone, sh.mu.states = why, nil
	sh.mu.Unlock()
}

// shard returns k's shard locked, or why it cannot serve: NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE.
func (c *StateCoordinator) shard(k Key) (*stateShard, error) {
	sh, kerrv := c.rt.Shard(StateKey(k))
	if kerrv != nil {
		return nil, kerrv
	}
	sh.mu.Lock()
	switch {
	case sh.mu.gone != nil:
		err := sh.mu.gone
		sh.mu.Unlock()
		return nil, err
	case sh.mu.failed:
		sh.mu.Unlock()
		return nil, kerr.CoordinatorNotAvailable
	case !sh.mu.loaded:
		sh.mu.Unlock()
		return nil, kerr.CoordinatorLoadInProgress
	}
	return sh, nil
}

// Read is ReadShareGroupState for one share-partition: its state and whether it has one.
// A reader in leaderEpoch older than the state's is FENCED_LEADER_EPOCH (a stale leader).
func (c *StateCoordinator) Read(k Key, leaderEpoch int32) (PartitionState, bool, error) {
	sh, err := c.shard(k)
	if err != nil {
		return PartitionState{}, false, err
	}
	defer sh.mu.Unlock()
	s, ok := sh.mu.states[k]
	if ok && leaderEpoch >= 0 && leaderEpoch < s.LeaderEpoch {
		return PartitionState{}, false, kerr.FencedLeaderEpoch
	}
	return s, ok, nil
}

// Write is WriteShareGroupState for one share-partition: s replaces its state once the
// record holding it is on the ISR. A writer whose leader epoch is older than the state's is
// FENCED_LEADER_EPOCH; a state epoch other than the state's is FENCED_STATE_EPOCH.
func (c *StateCoordinator) Write(k Key, s PartitionState) error {
	sh, err := c.shard(k)
	if err != nil {
		return err
	}
	defer sh.mu.Unlock()
	if cur, ok := sh.mu.states[k]; ok {
		if s.LeaderEpoch < cur.LeaderEpoch {
			return kerr.FencedLeaderEpoch
		}
		if s.StateEpoch != cur.StateEpoch {
			return kerr.FencedStateEpoch
		}
	}
	now := time.Now().UnixMilli()
	rec := coordinator.Record{Key: stateRecordKey(recSnapshot, k), Value: snapshotValue(0, s)}
	wait, err := coordinator.Append(sh.term, []coordinator.Record{rec}, nil, now, c.timeoutMs)
	if err == nil && wait != nil {
		err = coordinator.AwaitCommit(sh.term.Ctx, wait, time.Duration(c.timeoutMs)*time.Millisecond+time.Second)
	}
	if err != nil {
		return stateAppendError(err)
	}
	sh.mu.states[k] = s
	return nil
}

// Initialize is InitializeShareGroupState for one share-partition, as Kafka's
// ShareCoordinatorShard.initializeState: its state becomes start offset start in state
// epoch stateEpoch, leader epoch 0 and no batches, once the record holding it is on the ISR.
// A state epoch older than the state's is FENCED_STATE_EPOCH.
func (c *StateCoordinator) Initialize(k Key, stateEpoch int32, start int64) error {
	sh, err := c.shard(k)
	if err != nil {
		return err
	}
	defer sh.mu.Unlock()
	if cur, ok := sh.mu.states[k]; ok && cur.StateEpoch > stateEpoch {
		return kerr.FencedStateEpoch
	}
	s := PartitionState{StateEpoch: stateEpoch, Start: start}
	now := time.Now().UnixMilli()
	rec := coordinator.Record{Key: stateRecordKey(recSnapshot, k), Value: snapshotValue(0, s)}
	wait, err := coordinator.Append(sh.term, []coordinator.Record{rec}, nil, now, c.timeoutMs)
	if err == nil && wait != nil {
		err = coordinator.AwaitCommit(sh.term.Ctx, wait, time.Duration(c.timeoutMs)*time.Millisecond+time.Second)
	}
	if err != nil {
		return stateAppendError(err)
	}
	sh.mu.states[k] = s
	return nil
}

// Delete is DeleteShareGroupState for one share-partition: its state is gone (a tombstone
// of its ShareSnapshot key, which compaction then removes) once the tombstone is on the
// ISR; a share-partition with no state is no error.
func (c *StateCoordinator) Delete(k Key) error {
	sh, err := c.shard(k)
	if err != nil {
		return err
	}
	defer sh.mu.Unlock()
	if _, ok := sh.mu.states[k]; !ok {
		return nil
	}
	now := time.Now().UnixMilli()
	rec := coordinator.Record{Key: stateRecordKey(recSnapshot, k)}
	wait, err := coordinator.Append(sh.term, []coordinator.Record{rec}, nil, now, c.timeoutMs)
	if err == nil && wait != nil {
		err = coordinator.AwaitCommit(sh.term.Ctx, wait, time.Duration(c.timeoutMs)*time.Millisecond+time.Second)
	}
	if err != nil {
		return stateAppendError(err)
	}
	delete(sh.mu.states, k)
	return nil
}

// stateAppendError names an append failure as Kafka's share coordinator answers it: a
// partition no longer led here is NOT_COORDINATOR, anything else that may pass
// COORDINATOR_NOT_AVAILABLE (the writer retries), a record too large is kept.
func stateAppendError(err error) error {
	var ke *kerr.Error
	switch {
	case errors.Is(err, replica.ErrFencedLeaderEpoch), errors.Is(err, replica.ErrNotLeaderOrFollower):
		return fmt.Errorf("%w: %v", kerr.NotCoordinator, err)
	case errors.As(err, &ke) && ke == kerr.MessageTooLarge:
		return err
	}
	return fmt.Errorf("%w: %v", kerr.CoordinatorNotAvailable, err)
}
