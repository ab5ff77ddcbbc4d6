package txn

import (
	"context"
	"errors"
	"fmt"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/replica"
)

// Loading: a coordinator elected for a partition rebuilds its transactional ids by replaying
// every record of its __transaction_state partition up to the log end offset into a new
// Shard, then publishes it (LoadComplete, which resumes the markers of transactions in
// PrepareCommit and PrepareAbort). Like Kafka, it reads past the high watermark: a leader
// never truncates its own log, so what it holds becomes committed in its term.

// loadReadBytes is how much of the log one read takes.
const loadReadBytes = 1 << 20

// load replays one partition and publishes its shard (the runtime's Config.Load); it
// returns the ids and records.
func (c *Coordinator) load(sh *shard) (ids, records int) {
	core := NewShard(c.cfg, sh.term.Epoch)
	records, skipped, err := replay(sh.term.Ctx, sh.term.Partition, core)
	if err != nil {
		if sh.term.Ctx.Err() == nil {
			sh.failed.Store(true)
			c.log.Error("transaction coordinator could not load its partition; its transactional ids are unavailable", "partition", sh.term.Index, "err", err)
		}
		return 0, 0
	}
	if skipped > 0 {
		c.log.Warn("transaction coordinator skipped records it does not understand", "partition", sh.term.Index, "skipped", skipped)
	}
	sh.mu.Lock()
	if sh.mu.gone != nil {
		sh.mu.Unlock()
		return 0, 0
	}
	now := c.nowMs()
	sh.mu.core = core
	r := c.persistLocked(sh, core.LoadComplete(now), now)
	c.armLocked(sh)
	ids = core.NumTxns()
	sh.mu.Unlock()
	c.deliver(r)
	return ids, records
}

// replay feeds every record of p below its log end offset (as it stood when replay began)
// to core; skipped counts records Replay refused.
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
			if h.IsControl() || next <= off {
				off = max(off, next)
				continue
			}
			recs, err := batch.Records(one)
			if err != nil {
				return records, skipped, err
			}
			for _, r := range recs {
				if h.BaseOffset+int64(r.OffsetDelta) < off {
					continue
				}
				records++
				if err := core.Replay(r.Key, r.Value); err != nil {
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
