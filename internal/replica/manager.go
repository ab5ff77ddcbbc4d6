package replica

import (
	"errors"
	"log/slog"
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
type Manager struct {
	fs     storage.FS
	logs   *storage.Manager
	log    *slog.Logger
	topics sync.Map // topic name -> *topicParts
	mu     struct {
		sync.RWMutex
		parts map[tpKey]*Partition
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
	m := &Manager{fs: fs, logs: logs, log: log}
	m.mu.parts = map[tpKey]*Partition{}
	return m
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
// newest snapshot plus the batches after it.
func (m *Manager) Open(topic string, part int32, s Settings) (*Partition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := tpKey{topic, part}
	if p := m.mu.parts[k]; p != nil {
		return p, nil
	}
	l, err := m.logs.GetOrCreate(topic, part, s.Log)
	if err != nil {
		return nil, err
	}
	p := &Partition{Topic: topic, Index: part, fs: m.fs, log: l}
	p.settings.Store(&s)
	ps, from, err := loadSnapshot(m.fs, l.Dir(), l.LogEndOffset())
	if err != nil {
		return nil, err
	}
	if from < l.LogStartOffset() {
		from = l.LogStartOffset()
	}
	err = l.ScanBatches(from, func(h batch.Header) error {
		ps.Update(&h)
		return nil
	})
	if err != nil {
		return nil, err
	}
	p.mu.producers = ps
	p.hw.Store(l.LogEndOffset())
	m.mu.parts[k] = p
	m.publishLocked(topic, part, p)
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
	p.notify() // parked fetches re-check and find the partition gone
	return m.logs.Delete(topic, part)
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
	var errs []error
	for _, p := range m.Partitions() {
		if err := p.snapshotProducers(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		// Without the snapshots the next start replays the log: still correct, so the logs
		// are closed cleanly regardless; the errors are reported.
		m.log.Warn("producer state snapshot failed", "err", errors.Join(errs...))
	}
	return errors.Join(append(errs, m.logs.Close())...)
}
