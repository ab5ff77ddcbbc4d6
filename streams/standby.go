package streams

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// standbys keeps this instance's standby tasks (num.standby.replicas): for each, a warm
// copy of the task's stores, fed by one reader of their changelog partitions
// (read_committed, so it never holds an effect an exactly-once transaction aborted). No
// processor runs in a standby and nothing writes its stores but the reader. When the
// assignment makes a standby task active here, the new task takes the copy and the
// position reached, and restores only the changelog's tail from there.
//
// Lock rules: mu guards tasks, gen and cancel. The reader applies each fetch under mu, and
// only if gen has not changed since it made its client; a change (set, take, stop) bumps gen
// and cancels the reader's poll, so the reader remakes its client for the new partitions.
// Queries of stale stores read the copies under mu.
type standbys struct {
	a       *App
	byTopic map[string]string // changelog topic (full name) -> store name
	subOf   map[string]int    // store name -> the sub-topology owning it

	mu     sync.Mutex
	tasks  map[TaskID]*standbyTask
	gen    int
	cancel context.CancelFunc // the reader's current poll, nil when none
}

// standbyTask is one standby task's warm stores and how far their changelogs were read.
type standbyTask struct {
	id     TaskID
	stores map[string]stateStore // by store name
	next   map[string]int64      // by store name: the next changelog offset to read
}

func newStandbys(a *App) *standbys {
	s := &standbys{a: a, byTopic: map[string]string{}, subOf: map[string]int{}, tasks: map[TaskID]*standbyTask{}}
	for _, sub := range a.topo.subs {
		for _, name := range sub.stores {
			s.subOf[name] = sub.id
		}
	}
	for name, d := range a.topo.b.stores {
		if d.changelog {
			s.byTopic[a.topo.topicName(a.cfg.ApplicationID, name+"-changelog")] = name
		}
	}
	return s
}

// set makes the standby tasks those of a new assignment. A standby task now active here is
// kept until the task created for it takes it; the others not in standby are dropped.
func (s *standbys) set(standby, active []TaskID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.tasks {
		if !slices.Contains(standby, id) && !slices.Contains(active, id) {
			delete(s.tasks, id)
		}
	}
	for _, id := range standby {
		if _, ok := s.tasks[id]; ok || id.Subtopology < 0 || id.Subtopology >= len(s.a.topo.subs) {
			continue
		}
		st := &standbyTask{id: id, stores: map[string]stateStore{}, next: map[string]int64{}}
		for _, name := range s.a.topo.subs[id.Subtopology].stores {
			if d := s.a.topo.b.stores[name]; d.changelog {
				st.stores[name] = d.make(nil)
			}
		}
		if len(st.stores) > 0 {
			s.tasks[id] = st
		}
	}
	s.changedLocked()
}

// take removes and returns the standby task id, nil when there is none.
func (s *standbys) take(id TaskID) *standbyTask {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.tasks[id]
	if st != nil {
		delete(s.tasks, id)
		s.changedLocked()
	}
	return st
}

// stop drops every standby task (the stream thread ended).
func (s *standbys) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.tasks)
	s.changedLocked()
}

func (s *standbys) changedLocked() {
	s.gen++
	if s.cancel != nil {
		s.cancel()
	}
}

// warmTasks are the standby tasks held now, ordered.
func (s *standbys) warmTasks() []TaskID {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := slices.Collect(maps.Keys(s.tasks))
	return sortTasks(ids)
}

// run is the standby reader, until ctx is done.
func (s *standbys) run(ctx context.Context) {
	for ctx.Err() == nil {
		s.mu.Lock()
		gen := s.gen
		parts := map[string]map[int32]kgo.Offset{}
		for id, st := range s.tasks {
			for name := range st.stores {
				topic := s.a.topo.topicName(s.a.cfg.ApplicationID, name+"-changelog")
				if parts[topic] == nil {
					parts[topic] = map[int32]kgo.Offset{}
				}
				parts[topic][id.Partition] = kgo.NewOffset().At(st.next[name])
			}
		}
		pctx, cancel := context.WithCancel(ctx)
		s.cancel = cancel
		s.mu.Unlock()
		if len(parts) == 0 {
			<-pctx.Done()
			cancel()
			continue
		}
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.a.cfg.Brokers...), kgo.ConsumePartitions(parts),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
			s.a.cfg.ClientOpts...)...)
		if err != nil {
			s.a.log.Error("streams: standby client", "err", err)
			<-pctx.Done()
			cancel()
			continue
		}
		for pctx.Err() == nil {
			fs := cl.PollFetches(pctx)
			s.mu.Lock()
			if s.gen == gen {
				fs.EachRecord(func(r *kgo.Record) {
					name := s.byTopic[r.Topic]
					st := s.tasks[TaskID{Subtopology: s.subOf[name], Partition: r.Partition}]
					if st == nil {
						return
					}
					restoreOne(st.stores[name], r.Key, r.Value, r.Timestamp.UnixMilli())
					st.next[name] = r.Offset + 1
				})
			}
			s.mu.Unlock()
		}
		cl.Close()
		cancel()
	}
}

// rawStore is a store whose entries can be copied as bytes: a promoted standby's stores are
// copied into the new task's, which then restores the changelog from the standby's
// position. A store that is not one is restored from the start.
type rawStore interface {
	// each yields the entries as changelog records: key, value and timestamp.
	each(f func(key, value []byte, ts int64))
}

// each copies the entries out (a persistent store's bytes are only valid during a scan);
// a failed scan ends early and is kept for the store's next operation.
func (s *kvStore[K, V]) each(f func(key, value []byte, ts int64)) {
	err := s.b.scan(func(k, v []byte) bool {
		ts := int64(-1)
		if s.stamped {
			ts, v = unstamp(v)
		}
		f(append([]byte{}, k...), append([]byte{}, v...), ts)
		return true
	})
	if err != nil && s.err == nil {
		s.err = fmt.Errorf("streams: store %q: %w", s.name, err)
	}
}

// each yields the windows as changelog records (key bytes and start).
func (s *winStore[K, V]) each(f func(key, value []byte, ts int64)) {
	err := s.b.all(func(k []byte, start int64, v []byte) bool {
		ts, v := unstamp(v)
		f(binary.BigEndian.AppendUint64(append([]byte{}, k...), uint64(start)), append([]byte{}, v...), ts)
		return true
	})
	if err != nil && s.err == nil {
		s.err = fmt.Errorf("streams: store %q: %w", s.name, err)
	}
}

// promote copies standby st's store name into dst, false when it cannot (dst is then
// restored from the changelog's start).
func promote(st *standbyTask, name string, dst stateStore) bool {
	src, ok := st.stores[name].(rawStore)
	if !ok || dst == nil {
		return false
	}
	src.each(func(k, v []byte, ts int64) { restoreOne(dst, k, v, ts) })
	return true
}

// tasksOfLocked are the tasks of partitions ps that exist.
func (a *App) tasksOfLocked(ps map[string][]int32) []*task {
	var out []*task
	for topic, parts := range ps {
		s := a.topo.byTopic[a.full[topic]]
		for _, p := range parts {
			if tk, ok := a.mu.tasks[TaskID{Subtopology: s.id, Partition: p}]; ok && !slices.Contains(out, tk) {
				out = append(out, tk)
			}
		}
	}
	return out
}

// retain keeps the stores of tasks closed cleanly at a revocation (at-least-once, after the
// commit) as warm copies, so that a task assigned back to this member (the assignor is
// sticky) restores only what was written to its changelog meanwhile. Persistent stores are
// not kept: they are on disk with their task's checkpoint. Their positions are
// the changelogs' end offsets once every write is acknowledged: the store then holds
// exactly the changelog up to there, this member having been its only writer. A failure
// keeps nothing (the tasks restore from the start).
func (a *App) retain(ctx context.Context, tasks []*task) {
	if len(tasks) == 0 {
		return
	}
	if err := a.client.Flush(ctx); err != nil {
		return
	}
	var topics []string
	for name := range a.standby.subOf {
		if a.topo.b.stores[name].changelog {
			topics = append(topics, a.topo.topicName(a.cfg.ApplicationID, name+"-changelog"))
		}
	}
	if len(topics) == 0 {
		return
	}
	ends, err := a.admin.ListEndOffsets(ctx, topics...)
	if err != nil {
		a.log.Warn("streams: changelog end offsets; revoked tasks keep no state", "err", err)
		return
	}
	a.standby.mu.Lock()
	defer a.standby.mu.Unlock()
	for _, tk := range tasks {
		st := &standbyTask{id: tk.id, stores: map[string]stateStore{}, next: map[string]int64{}}
		for _, name := range tk.sub.stores {
			if !a.topo.b.stores[name].changelog {
				continue
			}
			if p, ok := tk.stores[name].(persistent); ok && p.disk() != nil {
				continue // closed with its task; its checkpoint says where it resumes
			}
			e, ok := ends.Lookup(a.topo.topicName(a.cfg.ApplicationID, name+"-changelog"), tk.id.Partition)
			if !ok || e.Err != nil {
				st = nil
				break
			}
			st.stores[name], st.next[name] = tk.stores[name], e.Offset
		}
		if st != nil && len(st.stores) > 0 {
			a.standby.tasks[tk.id] = st
		}
	}
	a.standby.changedLocked()
}
