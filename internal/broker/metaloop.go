package broker

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/gregor-project/gregor/internal/group"
	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/share"
	"github.com/gregor-project/gregor/internal/storage"
	"github.com/gregor-project/gregor/internal/txn"
)

// The metadata loop (Kafka's BrokerMetadataListener + publishers): it follows the committed
// metadata log from the quorum (in-process on a controller node, over the network
// otherwise), applies it to the publisher's image, and reacts to each new image on the same
// goroutine, in log order:
//   - partitions this broker is a replica of are opened; it leads those whose leader it is
//     (MakeLeader) and follows the rest (MakeFollower + a fetcher to the leader);
//   - partitions it no longer holds (topic deleted, replica moved away by a reassignment)
//     stop and their logs are deleted;
//   - topic config changes reconfigure partitions; broker config changes apply to this
//     broker's live config;
//   - leadership of __consumer_offsets partitions elects or resigns the group coordinator,
//     and of __transaction_state partitions the transaction coordinator.
//
// Stray partition directories (topics deleted or replicas moved while the broker was down)
// are deleted only once the image shows this broker unfenced in its current registration:
// the controller unfences a broker only when it has caught up with the log as of its
// registration, so the image is not an older prefix served by a lagging voter (in which a
// topic created since would look deleted).

// catchUp applies the log until a read returns nothing new, then reconciles every partition.
func (b *Broker) catchUp(ctx context.Context) error {
	for {
		n, err := b.readMetadata(ctx, 0)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	b.caughtUp = true
	b.caughtUpOnce.Store(true)
	b.reconcile(nil, b.meta.Image())
	return nil
}

// readMetadata applies one read of the log; it returns how many entries it applied.
func (b *Broker) readMetadata(ctx context.Context, wait time.Duration) (int, error) {
	from := b.meta.Image().Offset + 1
	// Bounded: a voter that stopped answering (paused, cut off) must not hold the loop.
	rctx, cancel := context.WithTimeout(ctx, wait+b.requestTimeout())
	defer cancel()
	ents, err := b.metaLog.Read(rctx, from, wait)
	if err != nil || len(ents) == 0 {
		return 0, err
	}
	batch := make([]metadata.Entry, len(ents))
	for i, e := range ents {
		batch[i] = metadata.Entry{Offset: e.Offset, Records: e.Records, Snapshot: e.Snapshot}
	}
	return len(ents), b.meta.ApplyBatch(batch)
}

func (b *Broker) metadataLoop(ctx context.Context) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		n, err := b.readMetadata(ctx, 500*time.Millisecond)
		if err != nil {
			if ctx.Err() == nil {
				b.log.Warn("reading the metadata log failed", "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(backoff):
				}
			}
			continue
		}
		if n > 0 {
			select {
			case b.kickHeartbeat <- struct{}{}: // report progress at once while fenced
			default:
			}
		}
	}
}

// onImage is the publisher's subscription: it runs after every publish.
func (b *Broker) onImage(prev, next *metadata.Image) {
	if !b.caughtUp {
		return
	}
	b.reconcile(prev, next)
	if !b.straysRemoved {
		if br := next.Broker(b.cfg.NodeID); br != nil && !br.Fenced && br.Epoch == b.epoch.Load() {
			b.straysRemoved = true
			b.removeStrays(next)
		}
	}
}

// reconcile brings the local partitions in line with next. prev nil: everything.
func (b *Broker) reconcile(prev, next *metadata.Image) {
	local := b.cfg.NodeID
	if prev == nil || !b.sameConfigs(prev, next) {
		if err := b.handler.ApplyImageConfigs(next); err != nil {
			b.log.Error("applying dynamic broker configs failed", "err", err)
		}
		b.reconfigureCleaner()
		b.reconfigureConnections()
		b.reconfigureListenerStores(prev == nil)
	}
	// Topics deleted, or replaced by a new topic of the same name.
	if prev != nil {
		for name, old := range prev.Topics {
			if t := next.Topics[name]; t == nil || t.ID != old.ID {
				b.dropTopic(old)
			}
		}
	}
	var work []partitionWork
	for name, t := range next.Topics {
		var old *metadata.Topic
		if prev != nil {
			if old = prev.Topics[name]; old == t {
				continue // unchanged (the publisher keeps untouched topics' pointers)
			}
			if old != nil && old.ID != t.ID {
				old = nil
			}
		}
		configsChanged := old == nil || !equalConfigs(old.Configs, t.Configs)
		settings, err := b.handler.TopicSettings(t) // once per topic, not per partition
		if err != nil {
			b.log.Error("resolving topic configs failed", "topic", t.Name, "err", err)
			continue
		}
		for i := range t.Parts {
			np := &t.Parts[i]
			var op *metadata.Partition
			if old != nil && i < len(old.Parts) {
				op = &old.Parts[i]
			}
			if op != nil && samePartition(op, np) && !configsChanged {
				continue
			}
			work = append(work, partitionWork{t, int32(i), np, slices.Contains(np.Replicas, local), configsChanged, settings})
		}
	}
	b.reconcileAll(work)
}

// partitionWork is one partition whose registration changed.
type partitionWork struct {
	t              *metadata.Topic
	idx            int32
	np             *metadata.Partition
	isReplica      bool
	configsChanged bool
	settings       replica.Settings // the topic's resolved configs
}

// reconcileWorkers bounds the partitions reconciled at once; each partition is touched by one
// worker only. Opening a new partition is mostly waiting on the disk (creating its directory
// and files); the log managers still open one log at a time under their locks, so today the
// workers overlap the rest (roles, epoch checkpoints, fetcher and coordinator changes).
const reconcileWorkers = 16

func (b *Broker) reconcileAll(work []partitionWork) {
	if len(work) < 2*reconcileWorkers {
		for _, w := range work {
			b.reconcilePartition(w)
		}
		return
	}
	next := make(chan partitionWork)
	var wg sync.WaitGroup
	for range reconcileWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w := range next {
				b.reconcilePartition(w)
			}
		}()
	}
	for _, w := range work {
		next <- w
	}
	close(next)
	wg.Wait()
}

// reconcilePartition applies one partition's registration to the local replica.
func (b *Broker) reconcilePartition(w partitionWork) {
	t, idx, np := w.t, w.idx, w.np
	local := b.cfg.NodeID
	p := b.replicas.Get(t.Name, idx)
	if !w.isReplica {
		if p != nil {
			b.removePartition(t.Name, idx, p)
		}
		return
	}
	if p == nil {
		var err error
		if p, err = b.replicas.Open(t.Name, idx, w.settings); err != nil {
			b.log.Error("opening partition failed", "topic", t.Name, "partition", idx, "err", err)
			return
		}
	} else if w.configsChanged {
		p.Reconfigure(w.settings)
	}
	reg := replica.LeaderAndISR{
		Leader: np.Leader, LeaderEpoch: np.LeaderEpoch, PartitionEpoch: np.PartitionEpoch,
		Replicas: np.Replicas, ISR: np.ISR, Adding: np.Adding, Removing: np.Removing,
	}
	if p.Log().Offline() {
		// Its log dir failed (logdirs.go): it neither leads nor fetches until a restart. Once
		// the controller has moved the leadership, it resigns (waiting acks=all produces fail
		// with NOT_LEADER_OR_FOLLOWER, no more ISR changes are proposed from here).
		b.fetchers.Unfollow(p)
		if np.Leader != local {
			if err := p.MakeFollower(reg); err != nil {
				b.log.Warn("resigning the leadership of a partition on a failed log dir", "topic", t.Name, "partition", idx, "err", err)
			}
		}
		return
	}
	if np.Leader == local {
		b.fetchers.Unfollow(p)
		if err := p.MakeLeader(reg, time.Now().UnixMilli()); err != nil {
			b.log.Error("becoming leader failed", "topic", t.Name, "partition", idx, "err", err)
			return
		}
	} else {
		if err := p.MakeFollower(reg); err != nil {
			b.log.Error("becoming follower failed", "topic", t.Name, "partition", idx, "err", err)
			return
		}
		if np.Leader >= 0 {
			b.fetchers.Follow(p, np.Leader, np.LeaderEpoch)
		} else {
			b.fetchers.Unfollow(p)
		}
	}
	switch t.Name {
	case group.TopicName:
		if np.Leader == local {
			b.handler.Groups.Elect(idx, np.LeaderEpoch)
		} else {
			b.handler.Groups.Resign(idx, np.LeaderEpoch)
		}
	case txn.TopicName:
		if np.Leader == local {
			b.handler.Txns.Elect(idx, np.LeaderEpoch)
		} else {
			b.handler.Txns.Resign(idx, np.LeaderEpoch)
		}
	case share.StateTopic:
		if np.Leader == local {
			b.handler.ShareStates.Elect(idx, np.LeaderEpoch)
		} else {
			b.handler.ShareStates.Resign(idx, np.LeaderEpoch)
		}
	}
}

func (b *Broker) removePartition(topic string, idx int32, p *replica.Partition) {
	b.fetchers.Unfollow(p)
	switch topic {
	case group.TopicName:
		b.handler.Groups.Resign(idx, -1)
	case txn.TopicName:
		b.handler.Txns.Resign(idx, -1)
	case share.StateTopic:
		b.handler.ShareStates.Resign(idx, -1)
	}
	if err := b.replicas.Remove(topic, idx); err != nil {
		b.log.Error("deleting partition failed", "topic", topic, "partition", idx, "err", err)
		return
	}
	b.log.Info("removed partition replica", "topic", topic, "partition", idx)
}

func (b *Broker) dropTopic(t *metadata.Topic) {
	b.metrics.Topics.Forget(t.Name) // as Kafka removes a deleted topic's metrics
	for i := range t.Parts {
		if p := b.replicas.Get(t.Name, int32(i)); p != nil {
			b.removePartition(t.Name, int32(i), p)
		}
	}
}

// removeStrays deletes partition directories no topic of the image assigns to this broker
// (deleted or moved away while it was down).
func (b *Broker) removeStrays(im *metadata.Image) {
	for _, tp := range b.logs.Existing() {
		t := im.Topic(tp.Topic)
		if t != nil {
			if pp := t.Partition(tp.Partition); pp != nil && slices.Contains(pp.Replicas, b.cfg.NodeID) {
				continue
			}
		}
		b.log.Warn("deleting stray partition directory", "topic", tp.Topic, "partition", tp.Partition)
		if p := b.replicas.Get(tp.Topic, tp.Partition); p != nil {
			b.removePartition(tp.Topic, tp.Partition, p)
		} else if err := b.logs.Delete(tp.Topic, tp.Partition); err != nil && !errors.Is(err, storage.ErrLogOffline) {
			b.log.Error("deleting stray partition failed", "err", err)
		}
	}
}

func samePartition(a, b *metadata.Partition) bool {
	return a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch && a.PartitionEpoch == b.PartitionEpoch
}

func equalConfigs(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func (b *Broker) sameConfigs(prev, next *metadata.Image) bool {
	id := b.cfg.NodeID
	return equalConfigs(prev.BrokerConfigs, next.BrokerConfigs) && equalConfigs(prev.NodeConfigs[id], next.NodeConfigs[id])
}
