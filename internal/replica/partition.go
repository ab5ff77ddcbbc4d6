// Package replica holds a broker's partitions: the log, the idempotent producer state, the
// high watermark, and the waiters parked by long-polling fetches.
package replica

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/storage"
)

// Settings are the topic configs a partition acts on, resolved by the api layer.
type Settings struct {
	LogAppendTime     bool        // message.timestamp.type=LogAppendTime
	Compression       batch.Codec // target codec when Recompress is true
	Recompress        bool        // compression.type names a codec (not "producer")
	MaxMessageBytes   int32       // max.message.bytes: largest batch accepted
	MinInsyncReplicas int32       // min.insync.replicas
	Log               storage.Config
}

// ErrNotEnoughReplicas: acks=all with an ISR smaller than min.insync.replicas.
var ErrNotEnoughReplicas = errors.New("replica: not enough in-sync replicas")

// Partition is one partition this broker holds (the leader: replication comes later).
//
// Invariants: hw <= log end offset; every batch below hw is readable; producer state reflects
// exactly the batches in the log.
//
// Lock rule: mu serialises appends (offset assignment and producer checks must be atomic
// together) and guards the fields in it. watch guards the parked fetches' channels on its
// own, so parking and unparking never wait behind an append's write (lock order: mu, then
// watch). Reads take no partition lock: the log is safe for concurrent readers and hw is
// atomic.
type Partition struct {
	Topic string
	Index int32

	fs       storage.FS
	log      *storage.Log
	settings atomic.Pointer[Settings]
	hw       atomic.Int64

	mu struct {
		sync.Mutex
		producers *ProducerState
	}

	// watch holds the channels of fetches parked on this partition (long poll). A slice, not
	// a map: a partition has few parked fetches, and registering on each of a thousand
	// partitions is on every waiting fetch's path.
	watch struct {
		sync.Mutex
		chans []chan struct{}
	}
}

// Settings returns the partition's current settings.
func (p *Partition) Settings() *Settings { return p.settings.Load() }

// Reconfigure applies new topic configs.
func (p *Partition) Reconfigure(s Settings) {
	p.settings.Store(&s)
	p.log.Reconfigure(s.Log)
}

// Log is the partition's log.
func (p *Partition) Log() *storage.Log { return p.log }

// HighWatermark is the offset below which records are committed and visible to consumers.
func (p *Partition) HighWatermark() int64 { return p.hw.Load() }

// AppendResult is what a produce answer needs.
type AppendResult struct {
	BaseOffset     int64
	LogAppendTime  int64 // -1 for CreateTime
	LogStartOffset int64
	Duplicate      bool // a retry of batches already in the log: nothing was appended
}

// inSyncReplicas is the ISR size; a single-node broker's ISR is itself.
func (p *Partition) inSyncReplicas() int32 { return 1 }

// Append appends validated v2 batches (raw, concatenated; hdrs their headers in order) as the
// leader, assigning offsets. nowMs stamps LogAppendTime topics. acksAll requires the ISR to be
// at least min.insync.replicas.
func (p *Partition) Append(raw []byte, hdrs []batch.Header, nowMs int64, leaderEpoch int32, acksAll bool) (AppendResult, error) {
	s := p.Settings()
	if acksAll && p.inSyncReplicas() < s.MinInsyncReplicas {
		return AppendResult{}, ErrNotEnoughReplicas
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range hdrs {
		dup, err := p.mu.producers.Check(&hdrs[i])
		if err != nil {
			return AppendResult{}, err
		}
		if dup != nil {
			if len(hdrs) == 1 {
				return AppendResult{BaseOffset: dup.FirstOffset, LogAppendTime: -1, LogStartOffset: p.log.LogStartOffset(), Duplicate: true}, nil
			}
			return AppendResult{}, ErrOutOfOrderSequence
		}
	}
	opt := storage.AppendOptions{AssignOffsets: true, LogAppendTimeMs: -1, LeaderEpoch: leaderEpoch}
	if s.LogAppendTime {
		opt.LogAppendTimeMs = nowMs
	}
	info, err := p.log.Append(raw, opt)
	if err != nil {
		return AppendResult{}, err
	}
	off := info.FirstOffset
	for i := range hdrs {
		hdrs[i].BaseOffset = off
		off += int64(hdrs[i].LastOffsetDelta) + 1
		p.mu.producers.Update(&hdrs[i])
	}
	// The ISR is this broker alone: everything appended is committed.
	p.hw.Store(p.log.LogEndOffset())
	p.notify()
	return AppendResult{BaseOffset: info.FirstOffset, LogAppendTime: info.LogAppendTime, LogStartOffset: p.log.LogStartOffset()}, nil
}

// Watch registers ch to receive a (non-blocking) signal whenever records are appended.
func (p *Partition) Watch(ch chan struct{}) {
	p.watch.Lock()
	p.watch.chans = append(p.watch.chans, ch)
	p.watch.Unlock()
}

// Unwatch removes ch (one registration of it).
func (p *Partition) Unwatch(ch chan struct{}) {
	p.watch.Lock()
	defer p.watch.Unlock()
	cs := p.watch.chans
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i] == ch {
			last := len(cs) - 1
			cs[i] = cs[last]
			cs[last] = nil
			p.watch.chans = cs[:last]
			return
		}
	}
}

// notify signals every parked fetch, without blocking.
func (p *Partition) notify() {
	p.watch.Lock()
	for _, ch := range p.watch.chans {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	p.watch.Unlock()
}

// SetLogStartOffset implements DeleteRecords: offset -1 means the high watermark.
func (p *Partition) SetLogStartOffset(offset int64) (int64, error) {
	hw := p.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return 0, storage.ErrOffsetOutOfRange
	}
	if offset > p.log.LogStartOffset() {
		if err := p.log.SetLogStartOffset(offset); err != nil {
			return 0, err
		}
	}
	return p.log.LogStartOffset(), nil
}

// snapshotProducers writes the producer state as of the log end offset.
func (p *Partition) snapshotProducers() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return writeSnapshot(p.fs, p.log.Dir(), p.log.LogEndOffset(), p.mu.producers)
}
