package streams

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// checkpointDelta is how many changelog records a task's stores must have taken since its
// last checkpoint before a commit writes a new one (Kafka Streams'
// OFFSET_DELTA_THRESHOLD_FOR_CHECKPOINT); closing a task cleanly always writes one.
const checkpointDelta = 10_000

// taskState is the local state of a task with persistent stores: its locked directory,
// the stores' databases, and what their content covers in the changelogs.
//
// Invariant: for every changelog partition in covered, the stores hold the effect of every
// changelog record up to that offset (restored, or written by this task and acknowledged
// once the App has flushed its producer); a checkpoint never names a later offset than
// covered and the producer's acknowledgements show, and is written after the stores flush.
type taskState struct {
	dir  string
	lock *dirLock
	// checkpoint is the .checkpoint read when the task opened, nil if there was none or it
	// did not parse; restore uses it once.
	checkpoint map[topicPartition]int64
	disks      map[string]diskStore      // persistent stores by name
	tps        map[string]topicPartition // their changelog partitions
	covered    map[topicPartition]int64
	last       map[topicPartition]int64 // offsets of the last checkpoint written
	// dirty is set by a write to a persistent store, and cleared under exactly_once_v2 when
	// a transaction commits: a task that is not dirty holds committed state only, so it can
	// close with a checkpoint even while a transaction of other tasks is aborted.
	dirty bool
}

// makeStore makes one store of the task: persistent (opening the task's directory on the
// first one) when the App has a state directory and the store's type is Persistent, else
// in memory.
func (tk *task) makeStore(d *storeDef, log changelogWriter) (stateStore, error) {
	sd := tk.topo.state
	if sd == nil || d.open == nil {
		return d.make(log), nil
	}
	typ := d.storeType
	if typ == "" {
		typ = sd.defaultStore
	}
	if typ == InMemory {
		return d.make(log), nil
	}
	if tk.state == nil {
		if err := tk.openState(); err != nil {
			return nil, err
		}
	}
	if log != nil {
		inner := log
		log = func(k, v []byte, ts int64) error {
			tk.state.dirty = true
			return inner(k, v, ts)
		}
	}
	s, err := d.open(log, filepath.Join(tk.state.dir, d.name), sd.log)
	if err != nil {
		return nil, err
	}
	if p, ok := s.(persistent); ok && p.disk() != nil {
		tk.state.disks[d.name] = p.disk()
		tp := topicPartition{tk.topo.topicName(tk.appID, d.name+"-changelog"), tk.id.Partition}
		tk.state.tps[d.name] = tp
		if err := tk.state.checkFormat(d, tp); err != nil {
			return nil, errors.Join(err, p.disk().close())
		}
	}
	return s, nil
}

// checkFormat makes a store whose files may be of another layout than d.format (its
// directory has no <store>.<format> marker beside it: written before its values were
// kept so) restore from the changelog's start: the checkpoint is dropped, in memory and
// on disk, so the restore wipes the store, and a crash before the next checkpoint leaves
// none. Then the marker is written.
func (st *taskState) checkFormat(d *storeDef, tp topicPartition) error {
	if d.format == "" {
		return nil
	}
	marker := filepath.Join(st.dir, d.name+"."+d.format)
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	if _, ok := st.checkpoint[tp]; ok {
		delete(st.checkpoint, tp)
		if err := os.Remove(filepath.Join(st.dir, checkpointFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("streams: remove checkpoint: %w", err)
		}
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		return fmt.Errorf("streams: store %s: %w", d.name, err)
	}
	return nil
}

// openState locks the task's directory and reads its checkpoint; under exactly_once_v2 the
// checkpoint is then removed, so a crash before the next clean close leaves none and the
// stores are wiped (they may hold effects of a transaction that aborted).
func (tk *task) openState() error {
	sd := tk.topo.state
	lock, err := sd.lockTask(tk.id)
	if err != nil {
		return err
	}
	st := &taskState{dir: sd.taskDir(tk.id), lock: lock, disks: map[string]diskStore{},
		tps: map[string]topicPartition{}, covered: map[topicPartition]int64{}, last: map[topicPartition]int64{}}
	path := filepath.Join(st.dir, checkpointFile)
	st.checkpoint, err = readCheckpoint(path)
	if err != nil {
		sd.log.Warn("streams: unreadable checkpoint; the task's stores restore from scratch", "task", tk.id, "err", err)
		st.checkpoint = nil
	}
	if sd.eos {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return errors.Join(fmt.Errorf("streams: remove checkpoint of task %s: %w", tk.id, err), lock.unlock())
		}
	}
	tk.state = st
	return nil
}

// cover records that the stores hold the changelog up to offset in tp.
func (st *taskState) cover(tp topicPartition, offset int64) {
	if o, ok := st.covered[tp]; !ok || offset > o {
		st.covered[tp] = offset
	}
}

// checkpoint flushes the persistent stores and writes the offsets they cover, when force
// or when they took more than checkpointDelta records since the last one. acked is the
// last acknowledged offset the App's producer wrote to a changelog partition, -1 if none.
func (tk *task) checkpoint(acked func(topicPartition) int64, force bool) error {
	st := tk.state
	if st == nil || len(st.disks) == 0 {
		return nil
	}
	offsets := map[topicPartition]int64{}
	delta := int64(0)
	for _, tp := range st.tps {
		o, ok := st.covered[tp]
		if a := acked(tp); a >= 0 && (!ok || a > o) {
			o, ok = a, true
		}
		if !ok {
			continue
		}
		offsets[tp] = o
		if l, ok := st.last[tp]; ok {
			delta += o - l
		} else {
			delta += o + 1
		}
	}
	if !force && delta <= checkpointDelta {
		return nil
	}
	for name, d := range st.disks {
		if err := d.flush(); err != nil {
			return fmt.Errorf("streams: task %s: store %s: %w", tk.id, name, err)
		}
	}
	if err := writeCheckpoint(filepath.Join(st.dir, checkpointFile), offsets); err != nil {
		return fmt.Errorf("streams: task %s: write checkpoint: %w", tk.id, err)
	}
	st.last = offsets
	for tp, o := range offsets {
		st.cover(tp, o)
	}
	return nil
}

// closeState closes the persistent stores and releases the task's directory; what was not
// flushed is lost, as a checkpoint does not name it.
func (tk *task) closeState() error {
	st := tk.state
	if st == nil {
		return nil
	}
	tk.state = nil
	var errs []error
	for _, d := range st.disks {
		errs = append(errs, d.close())
	}
	errs = append(errs, st.lock.unlock())
	return errors.Join(errs...)
}

// ack records a changelog record's acknowledged offset.
func (a *App) ack(r *kgo.Record) {
	if !strings.HasSuffix(r.Topic, "-changelog") {
		return
	}
	v, _ := a.acked.LoadOrStore(topicPartition{r.Topic, r.Partition}, new(atomic.Int64))
	o := v.(*atomic.Int64)
	for {
		cur := o.Load()
		if cur >= r.Offset+1 || o.CompareAndSwap(cur, r.Offset+1) {
			return
		}
	}
}

// ackedOffset is the last acknowledged offset written to tp, -1 if none.
func (a *App) ackedOffset(tp topicPartition) int64 {
	if v, ok := a.acked.Load(tp); ok {
		return v.(*atomic.Int64).Load() - 1
	}
	return -1
}

// checkpointTask writes tk's checkpoint (force: whatever the delta). The caller holds mu,
// and has flushed the producer so that every changelog write of tk is acknowledged.
func (a *App) checkpointTask(tk *task, force bool) error {
	return tk.checkpoint(a.ackedOffset, force)
}

// committedLocked is whether tk can close with a checkpoint under exactly_once_v2: its
// persistent stores took no write since the last committed transaction.
func (a *App) committedLocked(tk *task) bool {
	return a.cfg.Guarantee == ExactlyOnceV2 && tk.state != nil && !tk.state.dirty
}

// transactionCommitted marks every task's state as committed.
func (a *App) transactionCommitted() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, tk := range a.mu.tasks {
		if tk.state != nil {
			tk.state.dirty = false
		}
	}
}

// commitAndCheckpoint is the at-least-once commit, then the checkpoint of every task whose
// stores took enough records since its last one.
func (a *App) commitAndCheckpoint(ctx context.Context) error {
	if err := a.commitAtLeastOnce(ctx); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, tk := range a.mu.tasks {
		if err := a.checkpointTask(tk, false); err != nil {
			return err
		}
	}
	return nil
}
