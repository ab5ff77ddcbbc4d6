package streams

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// createInternalTopics creates the repartition and changelog topics the topology needs,
// <application.id>-<name>-repartition and <application.id>-<store>-changelog (compacted),
// with as many partitions as the sub-topology that reads or owns them has tasks: the most
// partitions among its source topics, as Kafka Streams decides. The input topics must exist.
func (a *App) createInternalTopics(ctx context.Context) error {
	t := a.topo
	var external []string
	for logical := range t.byTopic {
		if !t.b.internal[logical] {
			external = append(external, logical)
		}
	}
	td, err := a.admin.ListTopics(ctx, external...)
	if err != nil {
		return fmt.Errorf("streams: list input topics: %w", err)
	}
	count := map[string]int{}
	for _, topic := range external {
		d, ok := td[topic]
		if !ok || d.Err != nil {
			return fmt.Errorf("streams: input topic %q: missing (%v)", topic, d.Err)
		}
		count[topic] = len(d.Partitions)
	}
	// A repartition topic has as many partitions as the sub-topology writing it; that one's
	// count may itself come from a repartition topic, so iterate to a fixed point.
	// The repartition topics of a join's inputs are pinned to the count of its other
	// inputs (copartitionCounts), so propagate twice: once to learn the counts, once with
	// the pins.
	var subCount []int
	propagate := func(pinned map[string]int) {
		subCount = make([]int, len(t.subs))
		for topic, n := range pinned {
			count[topic] = n
		}
		for range t.subs {
			for _, s := range t.subs {
				for topic := range s.sources {
					subCount[s.id] = max(subCount[s.id], count[topic])
				}
				for _, n := range s.nodes {
					if _, pin := pinned[n.topic]; !pin && n.kind == sinkNode && t.b.internal[n.topic] {
						count[n.topic] = max(count[n.topic], subCount[s.id])
					}
				}
			}
		}
	}
	propagate(nil)
	pinned, err := t.copartitionCounts(count, func(topic string) int { return count[topic] })
	if err != nil {
		return err
	}
	if len(pinned) > 0 {
		for topic := range count {
			if t.b.internal[topic] {
				delete(count, topic)
			}
		}
		propagate(pinned)
	}
	type want struct {
		partitions int
		configs    map[string]*string
	}
	topics := map[string]want{}
	for _, s := range t.subs {
		if subCount[s.id] == 0 {
			return fmt.Errorf("streams: sub-topology %d: no partition count for its sources", s.id)
		}
		for topic := range s.sources {
			if t.b.internal[topic] {
				topics[t.topicName(a.cfg.ApplicationID, topic)] = want{subCount[s.id], nil}
			}
		}
		for _, st := range s.stores {
			if d := t.b.stores[st]; d.changelog {
				configs := map[string]*string{}
				for k, v := range d.topicConfigs {
					configs[k] = &v
				}
				if len(configs) == 0 {
					compact := "compact"
					configs["cleanup.policy"] = &compact
				}
				topics[t.topicName(a.cfg.ApplicationID, st+"-changelog")] = want{subCount[s.id], configs}
			}
		}
	}
	for topic, w := range topics {
		res, err := a.admin.CreateTopic(ctx, int32(w.partitions), a.cfg.ReplicationFactor, w.configs, topic)
		if err == nil {
			err = res.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("streams: create internal topic %s: %w", topic, err)
		}
		a.partitions.Store(topic, w.partitions)
	}
	return nil
}

// assigned creates the tasks of newly assigned partitions and restores their stores.
func (a *App) assigned(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for topic, parts := range ps {
		if a.mu.assigned[topic] == nil {
			a.mu.assigned[topic] = map[int32]bool{}
		}
		for _, p := range parts {
			a.mu.assigned[topic][p] = true
		}
	}
	if a.cfg.Guarantee == ExactlyOnceV2 {
		// Tasks are made between transactions, by the loop (eos.go).
		a.mu.rebuild = true
		return
	}
	if _, err := a.createTasksLocked(ctx, cl, ps); err != nil {
		a.failLocked(err)
	}
}

// createTasksLocked creates the tasks of partitions ps that do not exist yet, and restores
// their stores: a task this instance held as a standby starts from the standby's copy and
// restores only the changelog's tail. A task is open to queries once restored.
func (a *App) createTasksLocked(ctx context.Context, cl *kgo.Client, ps map[string][]int32) ([]*task, error) {
	var created []*task
	warm := map[TaskID]*standbyTask{}
	for topic, parts := range ps {
		s := a.topo.byTopic[a.full[topic]]
		for _, p := range parts {
			id := TaskID{Subtopology: s.id, Partition: p}
			if _, ok := a.mu.tasks[id]; ok {
				continue
			}
			tk, err := newTask(a.topo, id, a.cfg.ApplicationID, time.Now, a.emit(cl), a.partitionCount)
			if err != nil {
				return created, err
			}
			tk.badRecord = a.badRecord
			a.mu.tasks[id] = tk
			created = append(created, tk)
			if st := a.standby.take(id); st != nil {
				warm[id] = st
			}
		}
	}
	a.log.Info("streams: tasks created", "partitions", ps, "tasks", len(a.mu.tasks))
	a.queryRestoring(created)
	if err := a.restore(ctx, created, warm); err != nil {
		return created, err
	}
	a.queryPublish(created)
	return created, nil
}

// revoked commits what was processed and closes the tasks of revoked partitions.
func (a *App) revoked(ctx context.Context, _ *kgo.Client, ps map[string][]int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.unassignLocked(ps)
	clean := false
	if a.cfg.Guarantee == AtLeastOnce && a.mu.err == nil && a.client != nil {
		if err := a.commitAtLeastOnce(ctx); err != nil {
			a.failLocked(err)
		} else {
			clean = true
		}
	}
	keep := a.tasksOfLocked(ps)
	a.dropLocked(ps)
	if clean {
		a.retain(ctx, keep)
	}
}

// lost closes the tasks of lost partitions without committing: another member owns them.
func (a *App) lost(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.unassignLocked(ps)
	a.dropLocked(ps)
}

func (a *App) unassignLocked(ps map[string][]int32) {
	for topic, parts := range ps {
		for _, p := range parts {
			delete(a.mu.assigned[topic], p)
		}
	}
	a.mu.rebuild = a.cfg.Guarantee == ExactlyOnceV2
}

func (a *App) dropLocked(ps map[string][]int32) {
	for topic, parts := range ps {
		s := a.topo.byTopic[a.full[topic]]
		for _, p := range parts {
			id := TaskID{Subtopology: s.id, Partition: p}
			if tk, ok := a.mu.tasks[id]; ok {
				a.queryUnpublish(id)
				a.mu.dropped += tk.dropped
				a.mu.skipped += tk.skipped
				if err := tk.close(); err != nil {
					a.failLocked(err)
				}
				delete(a.mu.tasks, id)
			}
		}
	}
}

func (a *App) failLocked(err error) {
	a.log.Error("streams: stopping", "err", err)
	if a.mu.err == nil {
		a.mu.err = err
	}
}

// restore replays the changelog partition of every store of tasks from its start to the end
// offset it has now, before the tasks process a record. A task in warm, promoted from a
// standby, first takes the standby's copy of a store and restores from where the standby
// had read (unless the log now starts after that).
func (a *App) restore(ctx context.Context, tasks []*task, warm map[TaskID]*standbyTask) error {
	type target struct {
		tk       *task
		name     string
		store    stateStore
		start    int64
		end      int64
		next     int64
		restored int64
	}
	targets := map[string]map[int32]*target{}
	parts := map[string]map[int32]kgo.Offset{}
	var topics []string
	for _, tk := range tasks {
		for _, name := range tk.sub.stores {
			if !a.topo.b.stores[name].changelog {
				continue
			}
			topic := a.topo.topicName(a.cfg.ApplicationID, name+"-changelog")
			if targets[topic] == nil {
				targets[topic] = map[int32]*target{}
				parts[topic] = map[int32]kgo.Offset{}
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
			tg.end = e.Offset
			tg.start = s.Offset
			if st := warm[tg.tk.id]; st != nil && st.next[tg.name] > s.Offset && promote(st, tg.name, tg.store) {
				tg.start = st.next[tg.name]
			}
			tg.next = tg.start
			a.restoreStart(topic, p, tg.name, tg.start, tg.end)
			if tg.start < e.Offset {
				parts[topic][p] = kgo.NewOffset().At(tg.start)
				pending++
			} else {
				delete(parts[topic], p)
				a.restoreEnd(topic, p, tg.name, 0)
			}
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
	restored := 0
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
		fs.EachRecord(func(r *kgo.Record) {
			tg := targets[r.Topic][r.Partition]
			if tg.next >= tg.end {
				return
			}
			if r.Offset < tg.end && !r.Attrs.IsControl() {
				tg.store.restore(r.Key, r.Value)
				restored++
				tg.restored++
			}
			tg.next = r.Offset + 1
			if tg.next >= tg.end {
				pending--
				a.restoreEnd(r.Topic, r.Partition, tg.name, tg.restored)
			}
		})
	}
	a.log.Info("streams: restored stores", "records", restored, "took", time.Since(start))
	return nil
}

// manualPartition marks a record whose partition a StreamPartitioner chose.
var manualPartition = context.WithValue(context.Background(), manualKey{}, true)

type manualKey struct{}

// partitioner keeps a partition chosen by the topology, and otherwise hashes the key with
// murmur2 as Kafka's default partitioner (records without a key go round robin).
type partitioner struct{}

func (partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return &topicPartitioner{keyed: kgo.StickyKeyPartitioner(nil).ForTopic(topic)}
}

type topicPartitioner struct {
	keyed kgo.TopicPartitioner
	next  int
}

func (*topicPartitioner) RequiresConsistency(*kgo.Record) bool { return true }

func (t *topicPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Context == manualPartition {
		return int(r.Partition)
	}
	if r.Key == nil {
		t.next++
		return t.next % n
	}
	return t.keyed.Partition(r, n)
}
