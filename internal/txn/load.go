package txn

import (
	"context"
	"errors"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/coordinator"
	"github.com/gregor-project/gregor/internal/replica"
)

// Loading: a coordinator elected for a partition rebuilds its transactional ids by replaying
// every record of its __transaction_state partition up to the log end offset
// (coordinator.Replay, which reads past the high watermark) into a new Shard, then publishes
// it (LoadComplete, which resumes the markers of transactions in PrepareCommit and
// PrepareAbort).

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
// to core; skipped counts records Replay refused. Control batches (none are written to
// this topic) are passed over.
func replay(ctx context.Context, p *replica.Partition, core *Shard) (records, skipped int, err error) {
	err = coordinator.Replay(ctx, p, func(h batch.Header, raw []byte, from int64) error {
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
			if err := core.Replay(r.Key, r.Value); err != nil {
				if !errors.Is(err, ErrUnknownRecord) && !errors.Is(err, ErrCorruptRecord) {
					return err
				}
				skipped++
			}
		}
		return nil
	})
	return records, skipped, err
}
