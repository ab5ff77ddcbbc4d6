package replica

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/gregor-project/gregor/internal/quota"
	"github.com/gregor-project/gregor/internal/storage"
)

// Moving a replica between log dirs (AlterReplicaLogDirs), as Kafka's
// ReplicaAlterLogDirsThread does: a mover goroutine per partition copies the current log into
// the future log the storage manager made in the destination (storage.CopyBatches) while the
// partition serves; once a copy round finds less than moveChunk left it takes the partition's
// lock (stopping appends and truncations), copies the rest and swaps the logs
// (storage.Manager.SwapFuture). The leader epoch checkpoint is carried over, the producer
// state stays in memory and is snapshotted into the new directory.
//
// A mover stops when its move is replaced (another destination), the partition is removed,
// the copy fails (the move is dropped and logged) or the manager closes; a move a stop
// interrupted resumes when the partition is opened again (Manager.Open).

// moveChunk is the most bytes one copy round reads.
const moveChunk = 1 << 20

// moveThrottleWaitMax bounds one wait of the throttle, so that a cancelled move and a new
// rate are seen soon.
const moveThrottleWaitMax = 100 * time.Millisecond

// copyChunk is the most bytes the next copy round reads: moveChunk, or a tenth of a second's
// worth at the throttle's rate (at least 4 KiB), so a throttled move copies in small steps.
func (m *Manager) copyChunk() int32 {
	if m.MoveRate != nil {
		if rate := m.MoveRate(); rate > 0 && rate != math.MaxInt64 {
			return int32(min(max(rate/10, 4<<10), moveChunk))
		}
	}
	return moveChunk
}

// throttleMove takes n bytes from the movers' bucket, waiting while it is empty, at the rate
// MoveRate gives now (0: none). It fails once ctx is cancelled.
func (m *Manager) throttleMove(ctx context.Context, n int) error {
	for n > 0 {
		rate := int64(0)
		if m.MoveRate != nil {
			rate = m.MoveRate()
		}
		if rate <= 0 || rate == math.MaxInt64 {
			m.moves.Lock()
			m.moves.bucket = nil
			m.moves.Unlock()
			return nil
		}
		now := time.Now()
		m.moves.Lock()
		if m.moves.bucket == nil {
			m.moves.bucket = &quota.Bucket{Rate: rate, Burst: rate}
		} else if m.moves.bucket.Rate != rate {
			m.moves.bucket.SetRate(now, rate, rate)
		}
		n -= m.moves.bucket.Take(now, n)
		m.moves.Unlock()
		if n <= 0 {
			return nil
		}
		t := time.NewTimer(max(min(time.Duration(float64(n)/float64(rate)*float64(time.Second)), moveThrottleWaitMax), time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// moves are the movers running. Guarded by its mutex; wg counts the goroutines. bucket is
// the throttle every mover draws on (replica.alter.log.dirs.io.max.bytes.per.second, one
// quota per broker as in Kafka), nil while unthrottled; guarded by the mutex too.
type moves struct {
	sync.Mutex
	running map[tpKey]*move
	closed  bool
	bucket  *quota.Bucket
	wg      sync.WaitGroup
}

type move struct {
	future *storage.Log
	cancel context.CancelFunc
}

// AlterLogDir moves the partition's replica to the log dir dest (an absolute path of
// log.dirs). It returns once the move is started (or, dest being its dir already, any move in
// progress given up): storage.ErrLogDirNotFound for a dest not in log.dirs,
// ErrNotLeaderOrFollower for a partition this broker does not hold, storage.ErrLogOffline for
// an offline one.
func (m *Manager) AlterLogDir(topic string, part int32, dest string) error {
	p := m.Get(topic, part)
	if p == nil {
		// As Kafka: remember the dir for when the replica is created here.
		if err := m.logs.SetPreferredDir(topic, part, dest); err != nil {
			return err
		}
		return fmt.Errorf("%w: %s-%d is not on this broker", ErrNotLeaderOrFollower, topic, part)
	}
	if p.Log().Offline() {
		return fmt.Errorf("%w: %s-%d", storage.ErrLogOffline, topic, part)
	}
	// Holding moves from the future log's creation on: two requests for one partition start
	// one mover, for the future log the later made. Lock order: moves, then the log manager's.
	m.moves.Lock()
	defer m.moves.Unlock()
	fl, created, err := m.logs.CreateFuture(topic, part, dest)
	if err != nil {
		if errors.Is(err, storage.ErrNoPartition) {
			return fmt.Errorf("%w: %v", ErrNotLeaderOrFollower, err)
		}
		return err
	}
	k := tpKey{topic, part}
	if old := m.moves.running[k]; old != nil && old.future != fl {
		old.cancel()
		delete(m.moves.running, k)
	}
	if fl == nil || !created && m.moves.running[k] != nil {
		return nil
	}
	if m.moves.closed {
		return fmt.Errorf("%w: stopping", storage.ErrLogClosed)
	}
	ctx, cancel := context.WithCancel(context.Background())
	mv := &move{future: fl, cancel: cancel}
	if m.moves.running == nil {
		m.moves.running = map[tpKey]*move{}
	}
	m.moves.running[k] = mv
	m.moves.wg.Add(1)
	go func() {
		defer m.moves.wg.Done()
		err := m.runMove(ctx, p, fl)
		m.moves.Lock()
		if m.moves.running[k] == mv {
			delete(m.moves.running, k)
		}
		m.moves.Unlock()
		cancel()
		if err != nil && ctx.Err() == nil {
			m.log.Error("moving a replica to another log dir failed; the copy is removed", "topic", topic, "partition", part, "dest", dest, "err", err)
			if cur, _ := m.logs.Future(topic, part); cur == fl {
				if derr := m.logs.DropFuture(topic, part); derr != nil {
					m.log.Warn("removing the copy of a failed move", "topic", topic, "partition", part, "err", derr)
				}
			}
		}
	}()
	return nil
}

// stopMoves stops every mover and waits for them (Close); moves not finished are left to the
// storage manager's Close.
func (m *Manager) stopMoves() {
	m.moves.Lock()
	m.moves.closed = true
	for _, mv := range m.moves.running {
		mv.cancel()
	}
	m.moves.Unlock()
	m.moves.wg.Wait()
}

// stopMove stops the partition's mover, if any, without waiting (Remove: the storage manager
// drops the future log with the partition).
func (m *Manager) stopMove(topic string, part int32) {
	m.moves.Lock()
	defer m.moves.Unlock()
	k := tpKey{topic, part}
	if mv := m.moves.running[k]; mv != nil {
		mv.cancel()
		delete(m.moves.running, k)
	}
}

// runMove copies p's log into fl until it has nearly caught up, then finishes under p's lock
// and swaps. It returns nil when the move is done or given up (ctx cancelled, the future log
// replaced).
func (m *Manager) runMove(ctx context.Context, p *Partition, fl *storage.Log) error {
	// A resumed copy keeps what it holds below the high watermark (records there are never
	// truncated); above it the current log may have changed while the copy waited.
	since := p.Log().Truncations()
	if hw := p.HighWatermark(); fl.LogEndOffset() > hw {
		var err error
		if hw < fl.LogStartOffset() {
			since, err = storage.RestartCopy(fl, p.Log())
		} else {
			err = fl.TruncateTo(hw)
		}
		if err != nil {
			return err
		}
	}
	for ctx.Err() == nil {
		chunk := m.copyChunk()
		n, err := storage.CopyBatches(fl, p.Log(), chunk, since)
		switch {
		case storage.IsCopyRestart(err):
			if since, err = storage.RestartCopy(fl, p.Log()); err != nil {
				return err
			}
			continue
		case errors.Is(err, storage.ErrOffsetOutOfRange):
			continue // retention moved the start meanwhile: the next round starts past it
		case errors.Is(err, storage.ErrLogClosed):
			return nil // the partition or the move went away
		case err != nil:
			return err
		}
		if n < int(chunk) {
			done, err := m.finishMove(ctx, p, fl, since)
			if done || err != nil {
				return err
			}
		}
		if err := m.throttleMove(ctx, n); err != nil {
			return nil // cancelled
		}
	}
	return nil
}

// finishMove copies the rest holding p's lock and swaps the logs. done false: the source was
// truncated meanwhile and the copy goes on.
func (m *Manager) finishMove(ctx context.Context, p *Partition, fl *storage.Log, since uint64) (done bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ctx.Err() != nil {
		return true, nil
	}
	if cur, _ := m.logs.Future(p.Topic, p.Index); cur != fl {
		return true, nil
	}
	for {
		n, err := storage.CopyBatches(fl, p.Log(), moveChunk, since)
		if storage.IsCopyRestart(err) || errors.Is(err, storage.ErrOffsetOutOfRange) {
			return false, nil
		}
		if err != nil {
			return true, err
		}
		if n == 0 {
			break
		}
	}
	nl, err := m.logs.SwapFuture(p.Topic, p.Index, []string{storage.LeaderEpochCheckpointFile})
	if err != nil {
		return true, err
	}
	nl.SetHighWatermark(p.hw.Load())
	nl.SetLastStableOffset(p.lso.Load())
	p.logp.Store(nl)
	p.mu.epochs = nil // reopened from the new directory's copy of the checkpoint
	p.mu.snapshotAt = -1
	if err := p.snapshotProducersLocked(); err != nil {
		// The next start replays the log instead: still correct.
		m.log.Warn("producer snapshot in the new log dir failed", "topic", p.Topic, "partition", p.Index, "err", err)
	}
	p.notify() // parked fetches re-read from the new log
	return true, nil
}
