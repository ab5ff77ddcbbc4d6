package group

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/replica"
)

// Loading: a coordinator elected for a partition rebuilds its groups and offsets by
// replaying every record of its __consumer_offsets partition up to the log end offset into
// a new Shard, then publishes it. Until then the partition's requests answer
// COORDINATOR_LOAD_IN_PROGRESS. Transactional batches and markers replay into the pending
// and committed transactional offsets (txn.go). Like Kafka, it reads past the high watermark: a leader
// never truncates its own log, so what a new leader holds above the high watermark becomes
// committed in its term (its followers fetch it), and dropping it would lose the offsets
// commits the previous leader acknowledged to clients.

// loadReadBytes is how much of the log one read takes.
const loadReadBytes = 1 << 20

// load replays one partition and publishes its shard (the runtime's Config.Load); it
// returns the groups and records.
func (c *Coordinator) load(sh *shard) (groups, records int) {
	core := NewShard(c.cfg)
	records, skipped, err := replay(sh.term.Ctx, sh.term.Partition, core)
	if err != nil {
		if sh.term.Ctx.Err() == nil {
			sh.failed.Store(true)
			c.log.Error("group coordinator could not load its partition; its groups are unavailable", "partition", sh.term.Index, "err", err)
		}
		return 0, 0
	}
	if skipped > 0 {
		c.log.Warn("group coordinator skipped records it does not understand", "partition", sh.term.Index, "skipped", skipped)
	}
	sh.mu.Lock()
	if sh.mu.gone != nil {
		sh.mu.Unlock()
		return 0, 0
	}
	now := c.nowMs()
	sh.mu.core = core
	r := c.persistLocked(sh, core.LoadComplete(now), now)
	for _, m := range sh.mu.markers {
		core.CompleteTxn(now, m.producerID, m.commit) // writes nothing, answers no one
	}
	sh.mu.markers = nil
	c.armLocked(sh)
	groups = core.NumGroups()
	sh.mu.Unlock()
	c.deliver(r)
	return groups, records
}

// replay feeds every record of p below its log end offset (as it stood when replay began)
// to core; skipped counts records Replay refused (other protocols' record types,
// undecodable records).
func replay(ctx context.Context, p *replica.Partition, core *Shard) (records, skipped int, err error) {
	l := p.Log()
	end := l.LogEndOffset()
	off := l.LogStartOffset()
	var buf []byte
	for off < end {
		if err := ctx.Err(); err != nil {
			return records, skipped, err
		}
		sl, err := l.Read(off, loadReadBytes, end, true)
		if err != nil {
			return records, skipped, err
		}
		if sl.Size == 0 {
			sl.Release()
			break
		}
		if cap(buf) < int(sl.Size) {
			buf = make([]byte, sl.Size)
		}
		b := buf[:sl.Size]
		_, err = sl.File.ReadAt(b, sl.Pos)
		sl.Release()
		if err != nil {
			return records, skipped, err
		}
		for len(b) > 0 {
			h, err := batch.ParseHeader(b)
			if err != nil {
				return records, skipped, err
			}
			if h.Size() > len(b) {
				return records, skipped, fmt.Errorf("%w: batch at offset %d runs past the read", batch.ErrCorrupt, h.BaseOffset)
			}
			one := b[:h.Size()]
			b = b[h.Size():]
			if _, err := batch.CheckCRC(one); err != nil {
				return records, skipped, err
			}
			next := h.LastOffset() + 1
			if next <= off {
				continue
			}
			recs, err := batch.Records(one)
			if err != nil {
				return records, skipped, err
			}
			if h.IsControl() {
				// A transaction marker: its one record's key is version int16, type
				// int16 (0 ABORT, 1 COMMIT). Other control records (none are written to
				// this topic) are passed over.
				for _, r := range recs {
					if len(r.Key) >= 4 {
						if t := int16(binary.BigEndian.Uint16(r.Key[2:])); t == 0 || t == 1 {
							core.ReplayMarker(h.ProducerID, t == 1)
						}
					}
				}
				off = next
				continue
			}
			txn := h.IsTransactional() && h.ProducerID >= 0
			for _, r := range recs {
				if h.BaseOffset+int64(r.OffsetDelta) < off {
					continue
				}
				records++
				replay := core.Replay
				if txn {
					replay = func(k, v []byte) error { return core.ReplayTransactional(h.ProducerID, k, v) }
				}
				if err := replay(r.Key, r.Value); err != nil {
					if !errors.Is(err, ErrUnknownRecord) && !errors.Is(err, ErrCorruptRecord) {
						return records, skipped, err
					}
					skipped++
				}
			}
			off = next
		}
	}
	return records, skipped, nil
}
