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
	a.dropLocked(ps, clean)
	if clean {
		a.retain(ctx, keep)
	}
}

// lost closes the tasks of lost partitions without committing: another member owns them.
func (a *App) lost(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.unassignLocked(ps)
	a.dropLocked(ps, false)
}

func (a *App) unassignLocked(ps map[string][]int32) {
	for topic, parts := range ps {
		for _, p := range parts {
			delete(a.mu.assigned[topic], p)
		}
	}
	a.mu.rebuild = a.cfg.Guarantee == ExactlyOnceV2
}

// dropLocked closes the tasks of ps, checkpointing them first when clean (what they hold
// is committed).
func (a *App) dropLocked(ps map[string][]int32, clean bool) {
	for topic, parts := range ps {
		s := a.topo.byTopic[a.full[topic]]
		for _, p := range parts {
			id := TaskID{Subtopology: s.id, Partition: p}
			if tk, ok := a.mu.tasks[id]; ok {
				a.queryUnpublish(id)
				a.mu.dropped += tk.dropped
				a.mu.skipped += tk.skipped
				if clean || a.committedLocked(tk) {
					if err := a.checkpointTask(tk, true); err != nil {
						a.failLocked(err)
					}
				}
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
