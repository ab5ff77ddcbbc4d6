package replica

import (
	"errors"
	"log/slog"
	"maps"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/storage"
)

// Manager holds every partition on this broker (Kafka's ReplicaManager).
//
// Lock rule: mu guards the parts map only; partitions have their own locks. topics mirrors
// parts for Get and Topic, which take no lock: every produce and every fetch looks up each of
// its partitions, and a read lock is a write to a cache line all those requests share.
// Writers change both holding mu.
//
// Replication: SetReplication (once, before partitions are opened) makes partitions start
// without a role, waiting for MakeLeader / MakeFollower, with the high watermark of the
// replication-offset-checkpoint; without it every partition is the sole replica (roles.go).
type Manager struct {
	fs     storage.FS
	logs   *storage.Manager
	log    *slog.Logger
	topics sync.Map // topic name -> *topicParts
	mu     struct {
		sync.RWMutex
		parts map[tpKey]*Partition
	}

	moves moves // replicas being moved to another log dir (movedir.go)
	// MoveRate is replica.alter.log.dirs.io.max.bytes.per.second now (0 or math.MaxInt64:
	// none), read by every copy round of a move; nil: no throttle. Set before serving.
	MoveRate func() int64

	repl   atomic.Pointer[ReplicationOptions]
	kickCh chan struct{} // wakes RunReplication

	// hws guards the high watermarks read from the replication-offset-checkpoint (by
	// SetReplication), kept for partitions not opened yet, and the last checkpoint written.
	// Lock order: mu, then hws.
	hws struct {
		sync.Mutex
		loaded  map[storage.TopicPartition]int64
		written map[storage.TopicPartition]int64
	}
}

// topicParts is a topic's partitions indexed by partition number (nil where this broker has
// none). The array is replaced, doubled, when a partition beyond it is added; elements are
// stored in place.
type topicParts struct {
	parts atomic.Pointer[[]atomic.Pointer[Partition]]
}

// TopicPartitions is a lock-free view of one topic's partitions, for resolving many of them
// with a single lookup of the topic (a fetch of a thousand partitions of one topic).
type TopicPartitions struct {
	parts []atomic.Pointer[Partition]
}

// Get returns the partition or nil.
func (t TopicPartitions) Get(part int32) *Partition {
	if part < 0 || int(part) >= len(t.parts) {
		return nil
	}
	return t.parts[part].Load()
}

type tpKey struct {
	topic string
	part  int32
}

// NewManager creates an empty manager over a log manager.
func NewManager(fs storage.FS, logs *storage.Manager, log *slog.Logger) *Manager {
	m := &Manager{fs: fs, logs: logs, log: log, kickCh: make(chan struct{}, 1)}
	m.mu.parts = map[tpKey]*Partition{}
	return m
}

// SetReplication sets the broker's replication options (once, before partitions are opened)
// and reads the high watermarks of every log dir's replication-offset-checkpoint.
func (m *Manager) SetReplication(o ReplicationOptions) {
	hws, err := m.logs.ReadCheckpoints(storage.ReplicationOffsetCheckpointFile)
	if err != nil {
		// Safe to go on: high watermarks start at 0 and the leaders give them again.
		m.log.Warn("reading the high watermark checkpoint failed", "err", err)
	}
	m.hws.Lock()
	m.hws.loaded = hws
	m.hws.Unlock()
	m.repl.Store(&o)
}

// replication is the options set by SetReplication, or nil.
func (m *Manager) replication() *ReplicationOptions { return m.repl.Load() }

// checkpointHW writes every partition's high watermark to the replication-offset-checkpoint
// of the log dir holding it (those not opened keep the value read at start), when it changed
// since the last write.
func (m *Manager) checkpointHW() error {
	if m.replication() == nil {
		return nil
	}
	parts := m.Partitions() // before hws: Open takes mu, then hws
	m.hws.Lock()
	defer m.hws.Unlock()
	out := maps.Clone(m.hws.loaded)
	if out == nil {
		out = map[storage.TopicPartition]int64{}
	}
	for _, p := range parts {
		out[storage.TopicPartition{Topic: p.Topic, Partition: p.Index}] = p.HighWatermark()
	}
	if maps.Equal(out, m.hws.written) {
		return nil
	}
	if err := m.logs.WriteCheckpoints(storage.ReplicationOffsetCheckpointFile, out); err != nil {
		return err
	}
	m.hws.written = out
	return nil
}

// Get returns the partition or nil. It takes no lock.
func (m *Manager) Get(topic string, part int32) *Partition {
	return m.Topic(topic).Get(part)
}

// Topic returns a view of the topic's partitions (empty when there are none). It takes no
// lock; partitions opened or removed later may or may not show in it.
func (m *Manager) Topic(topic string) TopicPartitions {
	v, _ := m.topics.Load(topic)
	if v == nil {
		return TopicPartitions{}
	}
	ps := v.(*topicParts).parts.Load()
	if ps == nil {
		return TopicPartitions{}
	}
	return TopicPartitions{parts: *ps}
}

// publishLocked makes p (nil: none) the topic's partition part for Get and Topic. Holding mu.
func (m *Manager) publishLocked(topic string, part int32, p *Partition) {
	v, _ := m.topics.Load(topic)
	tp, _ := v.(*topicParts)
	if tp == nil {
		if p == nil {
			return
		}
		tp = &topicParts{}
		m.topics.Store(topic, tp)
	}
	cur := tp.parts.Load()
	if cur == nil || int(part) >= len(*cur) {
		if p == nil {
			return
		}
		n := int(part) + 1
		if cur != nil {
			n = max(n, 2*len(*cur))
		}
		grown := make([]atomic.Pointer[Partition], n)
		if cur != nil {
			for i := range *cur {
				grown[i].Store((*cur)[i].Load())
			}
		}
		tp.parts.Store(&grown)
		cur = &grown
	}
	(*cur)[part].Store(p)
}

// Open opens (creating if needed) a partition's log and rebuilds its producer state from the
// newest snapshot plus the batches after it. The disk work happens outside mu, so partitions
// open in parallel; if two callers open the same partition, the first to publish wins and the
// other gets its Partition (both wrap the one *storage.Log the log manager hands out).
func (m *Manager) Open(topic string, part int32, s Settings) (*Partition, error) {
	k := tpKey{topic, part}
	m.mu.Lock()
	if p := m.mu.parts[k]; p != nil {
		m.mu.Unlock()
		return p, nil
	}
	m.mu.Unlock()
	l, err := m.logs.GetOrCreate(topic, part, s.Log)
	if err != nil {
		return nil, err
	}
	p := &Partition{Topic: topic, Index: part, m: m, fs: m.fs}
	p.logp.Store(l)
	p.settings.Store(&s)
	p.mu.Lock() // not shared yet; held for the *Locked helpers' contract
	err = p.rebuildProducersLocked()
	if err == nil {
		if o := m.replication(); o != nil {
			// A role comes from metadata. The high watermark is the checkpointed one: a
			// restarted follower keeps its records above it (KIP-101) but does not expose them.
			m.hws.Lock()
			hw := min(max(m.hws.loaded[storage.TopicPartition{Topic: topic, Partition: part}], 0), l.LogEndOffset())
			m.hws.Unlock()
			p.hw.Store(hw)
			l.SetHighWatermark(hw)
			p.role.Store(&roleView{kind: roleNone, leader: -1, leaderEpoch: -1, partitionEpoch: -1})
			_, err = p.epochsLocked()
		} else {
			p.hw.Store(l.LogEndOffset())
			p.role.Store(&roleView{kind: roleSole, leader: -1, leaderEpoch: 0})
		}
		p.publishLSOLocked()
	}
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	if q := m.mu.parts[k]; q != nil {
		m.mu.Unlock()
		return q, nil
	}
	m.mu.parts[k] = p
	m.publishLocked(topic, part, p)
	m.mu.Unlock()
	if dest := m.logs.PendingFuture(topic, part); dest != "" {
		// A move to another log dir that a stop interrupted goes on (movedir.go).
		if err := m.AlterLogDir(topic, part, dest); err != nil {
			m.log.Warn("resuming the move of a replica to another log dir failed", "topic", topic, "partition", part, "dest", dest, "err", err)
		}
	}
	return p, nil
}

// Remove deletes a partition and its log from disk.
func (m *Manager) Remove(topic string, part int32) error {
	m.mu.Lock()
	k := tpKey{topic, part}
	p := m.mu.parts[k]
	delete(m.mu.parts, k)
	m.publishLocked(topic, part, nil)
	m.mu.Unlock()
	if p == nil {
		return nil
	}
	p.resign()
	m.stopMove(topic, part)
	m.hws.Lock()
	delete(m.hws.loaded, storage.TopicPartition{Topic: topic, Partition: part})
	m.hws.Unlock()
	p.notify() // parked fetches re-check and find the partition gone
	return m.logs.Delete(topic, part)
}

// ExpireProducers forgets, on every partition, the producers idle for expirationMs at nowMs
// (producer.id.expiration.ms; Partition.ExpireProducers), returning how many. The broker
// calls it periodically, as Kafka checks every producer.id.expiration.check.interval.ms.
func (m *Manager) ExpireProducers(nowMs, expirationMs int64) int {
	n := 0
	for _, p := range m.Partitions() {
		n += p.ExpireProducers(nowMs, expirationMs)
	}
	return n
}

// Partitions returns every partition, sorted by topic then index.
func (m *Manager) Partitions() []*Partition {
	m.mu.RLock()
	ps := make([]*Partition, 0, len(m.mu.parts))
	for _, p := range m.mu.parts {
		ps = append(ps, p)
	}
	m.mu.RUnlock()
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Topic != ps[j].Topic {
			return ps[i].Topic < ps[j].Topic
		}
		return ps[i].Index < ps[j].Index
	})
	return ps
}

// Close snapshots producer state and closes the logs (which writes the checkpoints and the
// clean-shutdown marker).
func (m *Manager) Close() error {
	m.stopMoves()
	errs := snapshotAll(m.Partitions())
	if len(errs) > 0 {
		// Without the snapshots the next start replays the log: still correct, so the logs
		// are closed cleanly regardless; the errors are reported.
		m.log.Warn("producer state snapshot failed", "err", errors.Join(errs...))
	}
	if err := m.checkpointHW(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(append(errs, m.logs.Close())...)
}

// snapshotWorkers is how many partitions Close snapshots at once: each snapshot is a small
// write and two fsyncs, which the disk serves many of at a time.
const snapshotWorkers = 16

// snapshotAll writes the producer snapshots of ps on snapshotWorkers goroutines, returning the
// errors.
func snapshotAll(ps []*Partition) []error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	next := make(chan *Partition)
	for range min(snapshotWorkers, len(ps)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range next {
				if err := p.snapshotProducers(); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, p := range ps {
		next <- p
	}
	close(next)
	wg.Wait()
	return errs
}

// rebuildProducersLocked rebuilds the producer state from the newest snapshot between the log
// start and end offsets (deleting the others: loadSnapshot) and the batches after it,
// markers included: the ongoing transactions are re-derived and the aborted ones the
// transaction index lost (a crash, a truncation) are added again. The caller publishes the last stable offset. Holding
// p.mu (or p not yet published).
func (p *Partition) rebuildProducersLocked() error {
	l := p.Log()
	ps, from, err := loadSnapshot(p.fs, l.Dir(), l.LogStartOffset(), l.LogEndOffset())
	if err != nil {
		return err
	}
	if from < l.LogStartOffset() {
		from = l.LogStartOffset() // no snapshot: replay the whole log
	}
	err = l.ScanBatchesControl(from, func(h batch.Header, control []byte) error {
		return p.applyBatch(ps, &h, control)
	})
	if err != nil {
		return err
	}
	p.mu.producers = ps
	p.mu.txnIndexBehind = false // the replay added every entry missing since the snapshot
	p.mu.snapshotAt = -1
	if from == l.LogEndOffset() {
		p.mu.snapshotAt = from // the snapshot is the whole state: nothing was replayed
	}
	return nil
}

// resign ends a leadership as the partition goes away: waiting acks=all produces fail with
// ErrNotLeaderOrFollower.
func (p *Partition) resign() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ls := p.mu.leader; ls != nil {
		ls.Resign(ErrNotLeaderOrFollower)
		p.readyLocked()
		p.mu.leader = nil
	}
	p.role.Store(&roleView{kind: roleNone, leader: -1, leaderEpoch: -1, partitionEpoch: -1})
}
