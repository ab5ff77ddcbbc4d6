package streams_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
	"github.com/gregor-project/gregor/streams"
)

// progressLog is a StateRestoreListener that keeps what it heard, per changelog partition.
type progressLog struct {
	mu sync.Mutex
	m  map[int32]*restoreEvents
}

type restoreEvents struct {
	store              string
	start, end         int64
	batches, batchSum  int64
	total              int64
	started, ended     bool
	lastBatchEndOffset int64
}

func newProgressLog() *progressLog { return &progressLog{m: map[int32]*restoreEvents{}} }

func (l *progressLog) get(p int32) *restoreEvents {
	if l.m[p] == nil {
		l.m[p] = &restoreEvents{}
	}
	return l.m[p]
}

func (l *progressLog) OnRestoreStart(_ string, p int32, store string, start, end int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.get(p)
	e.store, e.start, e.end, e.started = store, start, end, true
}

func (l *progressLog) OnBatchRestored(_ string, p int32, _ string, batchEnd, n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.get(p)
	e.batches++
	e.batchSum += n
	e.lastBatchEndOffset = batchEnd
}

func (l *progressLog) OnRestoreEnd(_ string, p int32, _ string, total int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.get(p)
	e.total, e.ended = total, true
}

// events returns a copy of what was heard, by partition.
func (l *progressLog) events() map[int32]restoreEvents {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int32]restoreEvents{}
	for p, e := range l.m {
		out[p] = *e
	}
	return out
}

func startIn(t *testing.T, addr, appID string, g streams.Guarantee, dir string, l streams.StateRestoreListener) *running {
	t.Helper()
	b := streams.NewBuilder()
	wordCount(b)
	app, err := streams.New(b, streams.Config{ApplicationID: appID, Brokers: []string{addr}, Guarantee: g,
		CommitInterval: 50 * time.Millisecond, StateDir: dir, StateRestoreListener: l})
	if err != nil {
		t.Fatal(err)
	}
	r := &running{app: app, done: make(chan error, 1)}
	go func() { r.done <- app.Run(context.Background()) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func setupWordCount(t *testing.T) (*embed.Node, *kgo.Client, *kadm.Client) {
	t.Helper()
	n := embedtest.Start(t, embed.Options{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	for _, topic := range []string{"text-lines", "word-counts"} {
		if _, err := adm.CreateTopic(context.Background(), 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	return n, cl, adm
}

func manyLines(prefix string, n int) []string {
	var ls []string
	for i := range n {
		ls = append(ls, fmt.Sprintf("%s%d %s%d w%d", prefix, i%23, prefix, i%7, i%31))
	}
	return ls
}

// changelogEnds is the end offset of each partition of the word count's changelog.
func changelogEnds(t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		out[o.Partition] = o.Offset
	})
	return out
}

// A persistent store survives a restart: an instance that stopped cleanly (writing its
// checkpoint) and comes back after another instance moved the changelog on restores only
// the tail past its checkpoint, counted exactly by the restore listener; with its state
// directory deleted it restores the whole changelog. The counts stay right throughout.
func TestPersistentStoreRestoresTail(t *testing.T) {
	n, cl, adm := setupWordCount(t)
	const changelog = "wc-counts-changelog"
	want := map[string]int64{}
	dirA, dirB := t.TempDir(), t.TempDir()

	l1 := manyLines("a", 300)
	produceLines(t, cl, "text-lines", l1)
	countWords(want, l1)
	a := startIn(t, n.Addr(), "wc", streams.AtLeastOnce, dirA, nil)
	latest(t, n.Addr(), "word-counts", want)
	a.stop(t)
	for _, task := range []string{"1_0", "1_1"} {
		if _, err := os.Stat(filepath.Join(dirA, "wc", task, ".checkpoint")); err != nil {
			t.Fatalf("no checkpoint after a clean stop: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dirA, "wc", task, "counts")); err != nil {
			t.Fatalf("no store directory: %v", err)
		}
	}
	e1 := changelogEnds(t, adm, changelog)

	// Another instance, with state of its own, moves the changelog on.
	l2 := manyLines("b", 200)
	produceLines(t, cl, "text-lines", l2)
	countWords(want, l2)
	b := startIn(t, n.Addr(), "wc", streams.AtLeastOnce, dirB, nil)
	latest(t, n.Addr(), "word-counts", want)
	b.stop(t)
	e2 := changelogEnds(t, adm, changelog)

	// The first comes back on its own state: it restores only e1..e2.
	tail := newProgressLog()
	l3 := manyLines("c", 50)
	produceLines(t, cl, "text-lines", l3)
	countWords(want, l3)
	a = startIn(t, n.Addr(), "wc", streams.AtLeastOnce, dirA, tail)
	latest(t, n.Addr(), "word-counts", want)
	ev := tail.events()
	for p := range int32(2) {
		if e2[p] <= e1[p] {
			t.Fatalf("partition %d: the second instance wrote no changelog (%d..%d); the test needs words in both", p, e1[p], e2[p])
		}
		e := ev[p]
		if !e.started || !e.ended || e.store != "counts" || e.start != e1[p] || e.end != e2[p] ||
			e.total != e2[p]-e1[p] || e.batchSum != e.total || e.lastBatchEndOffset != e2[p]-1 {
			t.Fatalf("partition %d: restore %+v, want %d..%d, %d records", p, e, e1[p], e2[p], e2[p]-e1[p])
		}
	}
	a.stop(t)
	e3 := changelogEnds(t, adm, changelog)

	// With its state directory gone, the whole changelog is restored.
	if err := os.RemoveAll(dirA); err != nil {
		t.Fatal(err)
	}
	full := newProgressLog()
	l4 := manyLines("d", 50)
	produceLines(t, cl, "text-lines", l4)
	countWords(want, l4)
	startIn(t, n.Addr(), "wc", streams.AtLeastOnce, dirA, full)
	latest(t, n.Addr(), "word-counts", want)
	ev = full.events()
	for p := range int32(2) {
		e := ev[p]
		if !e.ended || e.start != 0 || e.end != e3[p] || e.total != e3[p] || e.batchSum != e3[p] {
			t.Fatalf("partition %d: restore %+v, want all %d records", p, e, e3[p])
		}
	}
}

// Under exactly_once_v2 a task's checkpoint exists only while it is closed cleanly: an
// instance killed mid-stream leaves none (the one a clean stop had left is removed when the
// task opens), so the next one on the same state directory wipes the stores and restores
// every committed changelog record; a clean stop leaves one, and the next start restores
// nothing.
func TestExactlyOnceUncleanStopWipes(t *testing.T) {
	n, cl, _ := setupWordCount(t)
	dir := t.TempDir()
	want := map[string]int64{}
	checkpoints := func(exist bool) {
		t.Helper()
		for _, task := range []string{"1_0", "1_1"} {
			td := filepath.Join(dir, "eos", task)
			if _, err := os.Stat(filepath.Join(td, "counts")); err != nil {
				t.Fatalf("no store: %v", err)
			}
			if _, err := os.Stat(filepath.Join(td, ".checkpoint")); (err == nil) != exist {
				t.Fatalf("task %s: checkpoint there %v, want %v (%v)", task, err == nil, exist, err)
			}
		}
	}
	feed := func(prefix string, n int) {
		ls := manyLines(prefix, n)
		produceLines(t, cl, "text-lines", ls)
		countWords(want, ls)
	}

	feed("a", 200)
	r := startIn(t, n.Addr(), "eos", streams.ExactlyOnceV2, dir, nil)
	latest(t, n.Addr(), "word-counts", want)
	r.stop(t)
	checkpoints(true)

	feed("b", 300)
	inst := startInstance(t, n.Addr(), "eos", streams.ExactlyOnceV2, dir)
	latest(t, n.Addr(), "word-counts", want)
	if err := inst.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := inst.Wait(); err == nil {
		t.Fatal("the killed instance exited cleanly")
	}
	checkpoints(false)
	committed := committedRecords(t, n.Addr(), "eos-counts-changelog")

	wiped := newProgressLog()
	feed("c", 100)
	r = startIn(t, n.Addr(), "eos", streams.ExactlyOnceV2, dir, wiped)
	latest(t, n.Addr(), "word-counts", want)
	ev := wiped.events()
	for p := range int32(2) {
		e := ev[p]
		if !e.ended || e.start != 0 || e.total != committed[p] || e.batchSum != committed[p] {
			t.Fatalf("partition %d: restore %+v, want all %d committed records from offset 0", p, e, committed[p])
		}
	}
	r.stop(t)
	checkpoints(true)

	clean := newProgressLog()
	feed("d", 10)
	startIn(t, n.Addr(), "eos", streams.ExactlyOnceV2, dir, clean)
	latest(t, n.Addr(), "word-counts", want)
	for p, e := range clean.events() {
		if e.total != 0 || e.start == 0 {
			t.Fatalf("partition %d: after a clean stop the restore was %+v, want nothing restored", p, e)
		}
	}
}

// committedRecords counts each partition's committed data records of topic (no markers).
func committedRecords(t *testing.T, addr, topic string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end := map[int32]int64{}
	parts := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		end[o.Partition] = o.Offset
		parts[o.Partition] = kgo.NewOffset().AtStart()
	})
	rd, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	count := map[int32]int64{}
	next := map[int32]int64{}
	done := func() bool {
		for p, e := range end {
			if next[p] < e {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: at %v of %v", topic, next, end)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < end[r.Partition] && !r.Attrs.IsControl() {
				count[r.Partition]++
			}
			next[r.Partition] = r.Offset + 1
		})
	}
	return count
}

// Two instances in one process share a state directory: each opens only the task
// directories of its own tasks (a task directory is locked while open), and when one stops
// the other takes its tasks over, opening the directories it released.
func TestInstancesShareStateDir(t *testing.T) {
	n, cl, _ := setupWordCount(t)
	dir := t.TempDir()
	want := map[string]int64{}
	l1 := manyLines("a", 200)
	produceLines(t, cl, "text-lines", l1)
	countWords(want, l1)
	a := startIn(t, n.Addr(), "shared", streams.AtLeastOnce, dir, nil)
	b := startIn(t, n.Addr(), "shared", streams.AtLeastOnce, dir, nil)
	latest(t, n.Addr(), "word-counts", want)
	deadline := time.Now().Add(time.Minute)
	for len(a.app.Tasks()) == 0 || len(b.app.Tasks()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("tasks %v and %v: not shared", a.app.Tasks(), b.app.Tasks())
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, bounded by the deadline
	}
	b.stop(t)
	l2 := manyLines("b", 200)
	produceLines(t, cl, "text-lines", l2)
	countWords(want, l2)
	latest(t, n.Addr(), "word-counts", want)
	if got := len(a.app.Tasks()); got != 4 {
		t.Fatalf("after the other stopped, %d tasks, want all 4", got)
	}
}

// Under exactly_once_v2 a rebalance aborts the open transaction and remakes the tasks; a
// task whose stores took no write since the last committed transaction closes with a
// checkpoint, so it comes back restoring only the changelog's tail (here: a transaction
// marker), not the whole changelog.
func TestExactlyOnceRebalanceKeepsCommittedState(t *testing.T) {
	n, cl, _ := setupWordCount(t)
	want := map[string]int64{}
	l1 := manyLines("a", 300)
	produceLines(t, cl, "text-lines", l1)
	countWords(want, l1)
	restores := newProgressLog()
	a := startIn(t, n.Addr(), "eosreb", streams.ExactlyOnceV2, t.TempDir(), restores)
	latest(t, n.Addr(), "word-counts", want)
	for p, e := range restores.events() {
		if e.total != 0 {
			t.Fatalf("partition %d: restored %+v before any changelog was written", p, e)
		}
	}

	b := startIn(t, n.Addr(), "eosreb", streams.ExactlyOnceV2, t.TempDir(), nil)
	var held []int32
	deadline := time.Now().Add(time.Minute)
	for {
		held = held[:0]
		for _, id := range a.app.Tasks() {
			if id.Subtopology == 1 {
				held = append(held, id.Partition)
			}
		}
		if len(held) > 0 && len(b.app.Tasks()) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tasks %v and %v: not shared", a.app.Tasks(), b.app.Tasks())
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, bounded by the deadline
	}
	ev := restores.events()
	for _, p := range held {
		e := ev[p]
		if !e.ended || e.start == 0 || e.total != 0 {
			t.Fatalf("partition %d kept through the rebalance: restore %+v, want only the tail past its checkpoint", p, e)
		}
	}
	l2 := manyLines("b", 100)
	produceLines(t, cl, "text-lines", l2)
	countWords(want, l2)
	latest(t, n.Addr(), "word-counts", want)
}
