package group

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/replica"
)

// Loading: a coordinator elected for a partition rebuilds its groups and offsets by
// replaying every record of its __consumer_offsets partition up to the log end offset into
// a new Shard, then publishes it. Until then the partition's requests answer
// COORDINATOR_LOAD_IN_PROGRESS. Like Kafka, it reads past the high watermark: a leader
// never truncates its own log, so what a new leader holds above the high watermark becomes
// committed in its term (its followers fetch it), and dropping it would lose the offsets
// commits the previous leader acknowledged to clients.

// loadReadBytes is how much of the log one read takes.
const loadReadBytes = 1 << 20

// loadAll loads the shards in order, stopping if the coordinator closes.
func (c *Coordinator) loadAll(shards []*shard) {
	start := time.Now()
	groups, records := 0, 0
	for _, sh := range shards {
		if c.ctx.Err() != nil {
			return
		}
		if sh.ctx.Err() != nil {
			continue // resigned meanwhile
		}
		g, n := c.load(sh)
		groups += g
		records += n
	}
	if records > 0 {
		c.log.Info("group coordinator loaded", "topic", TopicName, "partitions", len(shards), "groups", groups, "records", records, "duration", time.Since(start))
	}
}

// load replays one partition and publishes its shard; it returns the groups and records.
func (c *Coordinator) load(sh *shard) (groups, records int) {
	core := NewShard(c.cfg)
	records, skipped, err := replay(sh.ctx, sh.part, core)
	if err != nil {
		if sh.ctx.Err() == nil {
			sh.failed.Store(true)
			c.log.Error("group coordinator could not load its partition; its groups are unavailable", "partition", sh.index, "err", err)
		}
		return 0, 0
	}
	if skipped > 0 {
		c.log.Warn("group coordinator skipped records it does not understand", "partition", sh.index, "skipped", skipped)
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
