package group

import (
	"context"
	"encoding/binary"
	"errors"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/coordinator"
	"github.com/gregor-project/gregor/internal/replica"
)

// Loading: a coordinator elected for a partition rebuilds its groups and offsets by
// replaying every record of its __consumer_offsets partition up to the log end offset
// (coordinator.Replay, which reads past the high watermark) into a new Shard, then publishes
// it. Until then the partition's requests answer COORDINATOR_LOAD_IN_PROGRESS. Transactional
// batches and markers replay into the pending and committed transactional offsets (txn.go).

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
	err = coordinator.Replay(ctx, p, func(h batch.Header, raw []byte, from int64) error {
		recs, err := batch.Records(raw)
		if err != nil {
			return err
		}
		if h.IsControl() {
			// A transaction marker: its one record's key is version int16, type int16 (0
			// ABORT, 1 COMMIT). Other control records (none are written to this topic) are
			// passed over.
			for _, r := range recs {
				if len(r.Key) >= 4 {
					if t := int16(binary.BigEndian.Uint16(r.Key[2:])); t == 0 || t == 1 {
						core.ReplayMarker(h.ProducerID, t == 1)
					}
				}
			}
			return nil
		}
		txn := h.IsTransactional() && h.ProducerID >= 0
		for _, r := range recs {
			if h.BaseOffset+int64(r.OffsetDelta) < from {
				continue
			}
			records++
			replay := core.Replay
			if txn {
				replay = func(k, v []byte) error { return core.ReplayTransactional(h.ProducerID, k, v) }
			}
			if err := replay(r.Key, r.Value); err != nil {
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
