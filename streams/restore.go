package streams

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// batchRestorer is a store that applies a fetched batch of changelog records at once (one
// pebble batch) and reports a failed write.
type batchRestorer interface {
	restoreBatch(recs []kvPair) error
}

// stampRestorer is a timestamped store: it keeps a changelog record's timestamp with the
// value.
type stampRestorer interface {
	restoreAt(key, value []byte, ts int64)
}

// restoreOne applies one changelog record at ts to s.
func restoreOne(s stateStore, key, value []byte, ts int64) {
	if r, ok := s.(stampRestorer); ok {
		r.restoreAt(key, value, ts)
		return
	}
	s.restore(key, value)
}

// restore brings every changelog-backed store of tasks up to the end its changelog
// partition has now (the last stable offset), before the tasks process a record.
//
// A persistent store whose task checkpoint names an offset inside the changelog restores
// only the records after it; one without a checkpoint, or whose checkpoint is outside the
// changelog (the log was deleted or truncated), is wiped and restored from the start. An
// in-memory store restores from the start.
//
// A task in warm, promoted from a standby (or kept warm at a revocation), first takes the
// standby's copy of a store and restores from where the standby had read, when that is past
// where the store would start (a persistent store is wiped first).
func (a *App) restore(ctx context.Context, tasks []*task, warm map[TaskID]*standbyTask) error {
	type target struct {
		tk       *task
		name     string
		store    stateStore
		from     int64
		end      int64
		next     int64
		total    int64
		batch    []kvPair
		batchEnd int64
	}
	targets := map[string]map[int32]*target{}
	var topics []string
	for _, tk := range tasks {
		for _, name := range tk.sub.stores {
			if !a.topo.b.stores[name].changelog {
				continue
			}
			topic := a.topo.topicName(a.cfg.ApplicationID, name+"-changelog")
			if targets[topic] == nil {
				targets[topic] = map[int32]*target{}
				topics = append(topics, topic)
			}
			targets[topic][tk.id.Partition] = &target{tk: tk, name: name, store: tk.stores[name]}
		}
	}
	if len(topics) == 0 {
		return nil
	}
	// The end is the last stable offset, and the restore reads committed records only and
	// sees the transaction markers, so it reaches the end exactly whether or not the
	// changelog was written in transactions.
	ends, err := a.admin.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("streams: changelog end offsets: %w", err)
	}
	starts, err := a.admin.ListStartOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("streams: changelog start offsets: %w", err)
	}
	parts := map[string]map[int32]kgo.Offset{}
	pending := 0
	for topic, byPart := range targets {
		for p, tg := range byPart {
			e, ok := ends.Lookup(topic, p)
			if !ok || e.Err != nil {
				return fmt.Errorf("streams: end offset of %s[%d]: %v", topic, p, e.Err)
			}
			s, ok := starts.Lookup(topic, p)
			if !ok || s.Err != nil {
				return fmt.Errorf("streams: start offset of %s[%d]: %v", topic, p, s.Err)
			}
			tg.end, tg.from = e.Offset, s.Offset
			logStart := s.Offset
			if err := a.restoreFrom(tg.tk, tg.name, tg.store, topicPartition{topic, p}, &tg.from, tg.end); err != nil {
				return err
			}
			if st := warm[tg.tk.id]; st != nil && st.next[tg.name] > tg.from {
				if err := a.promote(st, tg.name, tg.store, logStart, &tg.from); err != nil {
					return err
				}
			}
			tg.next = tg.from
			a.restoreStart(topic, p, tg.name, tg.from, tg.end)
			if tg.from < tg.end {
				if parts[topic] == nil {
					parts[topic] = map[int32]kgo.Offset{}
				}
				parts[topic][p] = kgo.NewOffset().At(tg.from)
				pending++
			} else {
				a.restoreEnd(topic, p, tg.name, 0)
			}
		}
	}
	for _, tk := range tasks {
		if tk.state != nil {
			tk.state.checkpoint = nil
		}
	}
	if pending == 0 {
		return nil
	}
	start := time.Now()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.cfg.Brokers...), kgo.ConsumePartitions(parts),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()}, a.cfg.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("streams: restore client: %w", err)
	}
	defer cl.Close()
	// flush applies a target's batch and reports it.
	flush := func(topic string, p int32, tg *target) error {
		n := int64(len(tg.batch))
		var err error
		if br, ok := tg.store.(batchRestorer); ok {
			err = br.restoreBatch(tg.batch)
		} else {
			for _, r := range tg.batch {
				restoreOne(tg.store, r.k, r.v, r.ts)
			}
		}
		if err != nil {
			return fmt.Errorf("streams: restore %s[%d]: %w", topic, p, err)
		}
		tg.batch = tg.batch[:0]
		tg.total += n
		a.restoreBatch(topic, p, tg.name, tg.batchEnd, n)
		if tg.next >= tg.end {
			pending--
			a.log.Info("streams: restored store", "store", tg.name, "changelog", topic, "partition", p,
				"from", tg.from, "to", tg.end, "records", tg.total)
			a.restoreEnd(topic, p, tg.name, tg.total)
		}
		return nil
	}
	restored := int64(0)
	for pending > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(topic string, p int32, err error) {
			ferr = fmt.Errorf("streams: restore %s[%d]: %w", topic, p, err)
		})
		if ferr != nil {
			return ferr
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			tg := targets[fp.Topic][fp.Partition]
			if ferr != nil || tg == nil || tg.next >= tg.end || len(fp.Records) == 0 {
				return
			}
			for _, r := range fp.Records {
				if tg.next >= tg.end {
					break
				}
				if r.Offset < tg.end && !r.Attrs.IsControl() {
					tg.batch = append(tg.batch, kvPair{r.Key, r.Value, r.Timestamp.UnixMilli()})
				}
				tg.next, tg.batchEnd = r.Offset+1, min(r.Offset, tg.end-1)
			}
			n := int64(len(tg.batch))
			ferr = flush(fp.Topic, fp.Partition, tg)
			restored += n
		})
		if ferr != nil {
			return ferr
		}
	}
	a.log.Info("streams: restored stores", "records", restored, "took", time.Since(start))
	return nil
}

// restoreFrom sets where store's changelog partition tp is restored from: *from is the
// log start on entry. A persistent store resumes after its task's checkpoint when that
// lies inside [start, end]; otherwise it is wiped. It then covers the changelog up to
// end-1.
func (a *App) restoreFrom(tk *task, name string, store stateStore, tp topicPartition, from *int64, end int64) error {
	p, ok := store.(persistent)
	if !ok || p.disk() == nil || tk.state == nil {
		return nil
	}
	st := tk.state
	if off, ok := st.checkpoint[tp]; ok && *from <= off+1 && off+1 <= end {
		*from = off + 1
	} else {
		if ok {
			a.log.Warn("streams: checkpoint outside the changelog; wiping the store", "store", name, "task", tk.id,
				"checkpoint", off, "start", *from, "end", end)
		} else {
			a.log.Info("streams: no checkpoint; wiping the store and restoring it whole", "store", name, "task", tk.id)
		}
		if err := p.disk().wipe(); err != nil {
			return err
		}
	}
	if end > 0 {
		st.cover(tp, end-1)
	}
	return nil
}

// promote gives store the standby's copy when it can (see promote in standby.go), moving
// *from to the standby's position; a persistent store is wiped first, its own content being
// older (and restores from logStart should the copy not be taken).
func (a *App) promote(st *standbyTask, name string, store stateStore, logStart int64, from *int64) error {
	if _, ok := st.stores[name].(rawStore); !ok {
		return nil
	}
	if p, ok := store.(persistent); ok && p.disk() != nil {
		if err := p.disk().wipe(); err != nil {
			return err
		}
		*from = logStart
	}
	if promote(st, name, store) {
		*from = st.next[name]
	}
	return nil
}
