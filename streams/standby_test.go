package streams_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
	"github.com/gregor-project/gregor/streams"
)

// restoreLog records restores, as a StateRestoreListener.
type restoreLog struct {
	mu     sync.Mutex
	starts []restoreEvent
	ends   []restoreEvent
}

type restoreEvent struct {
	topic      string
	partition  int32
	start, end int64 // start and end offsets, or (in ends) end = records restored
}

func (l *restoreLog) OnRestoreStart(topic string, p int32, _ string, start, end int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.starts = append(l.starts, restoreEvent{topic, p, start, end})
}

func (*restoreLog) OnBatchRestored(string, int32, string, int64, int64) {}

func (l *restoreLog) OnRestoreEnd(topic string, p int32, _ string, n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ends = append(l.ends, restoreEvent{topic: topic, partition: p, end: n})
}

func (l *restoreLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.starts, l.ends = nil, nil
}

// first is the first restore of topic[p] since the last reset, with its records restored.
func (l *restoreLog) first(topic string, p int32) (start restoreEvent, restored int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.starts {
		if e.topic == topic && e.partition == p {
			start, ok = e, true
			break
		}
	}
	for _, e := range l.ends {
		if e.topic == topic && e.partition == p {
			return start, e.end, ok
		}
	}
	return start, -1, false
}

// committedCounts reads word-counts (read_committed) and keeps every count per word.
type committedCounts struct {
	cl  *kgo.Client
	got map[string]int64
	seq map[string][]int64
}

func newCommittedCounts(t *testing.T, addr string) *committedCounts {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("word-counts"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &committedCounts{cl: cl, got: map[string]int64{}, seq: map[string][]int64{}}
}

// until reads until every count equals want's.
func (c *committedCounts) until(t *testing.T, want map[string]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for !maps.Equal(c.got, want) {
		fs := c.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("counts %v, want %v", c.got, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n, err := strconv.ParseInt(string(r.Value), 10, 64)
			if err != nil {
				t.Errorf("value %q: %v", r.Value, err)
			}
			c.got[string(r.Key)] = n
			c.seq[string(r.Key)] = append(c.seq[string(r.Key)], n)
		})
	}
}

// Two instances with one standby replica under exactly_once_v2: each keeps a warm copy of
// the other's counts. The active instance of half the tasks is killed (SIGKILL, no commit,
// no leaving the group); the survivor takes its tasks over, restoring nothing but the
// changelog's tail (here empty: the copy was current), and every committed count stays exact.
func TestStandbyTakesOver(t *testing.T) {
	n := embedtest.Start(t, embed.Options{})
	cl := topics(t, n.Addr(), 2, "text-lines", "word-counts")
	want := map[string]int64{}
	var first []string
	for i := range 2000 {
		first = append(first, fmt.Sprintf("w%d w%d W%d", i%17, i%5, i%11))
	}
	countWords(want, first)
	produceLines(t, cl, "text-lines", first)

	const serverA, serverB = "10.0.0.1:7001", "10.0.0.2:7002"
	a := startInstance(t, n.Addr(), "sb", streams.ExactlyOnceV2, t.TempDir(), "1", serverA)
	rl := &restoreLog{}
	b := startApp(t, streams.Config{ApplicationID: "sb", Brokers: []string{n.Addr()}, Guarantee: streams.ExactlyOnceV2,
		NumStandbyReplicas: 1, ApplicationServer: serverB, StateRestoreListener: rl,
		SessionTimeout: 6 * time.Second, TransactionTimeout: 3 * time.Second, CommitInterval: 20 * time.Millisecond})
	out := newCommittedCounts(t, n.Addr())
	out.until(t, want)

	// Wait for the group to settle with each instance running half the counts, and for B's
	// standby copy of A's half to hold A's counts.
	var aParts []int32
	eventually(t, func() bool {
		md, err := b.app.AllMetadata()
		if err != nil || len(md) != 2 {
			return false
		}
		var bStandby []int32
		for _, m := range md {
			switch m.Host.String() {
			case serverA:
				aParts = m.TopicPartitions["sb-counts-repartition"]
			case serverB:
				bStandby = m.StandbyTopicPartitions["sb-counts-repartition"]
			}
		}
		if len(aParts) != 1 || !slices.Equal(aParts, bStandby) {
			return false
		}
		stale, err := streams.Store[string, int64](b.app, "counts", streams.StaleStores())
		if err != nil {
			return false
		}
		all, err := stale.All()
		if err != nil {
			return false
		}
		got := map[string]int64{}
		for _, kv := range all {
			got[kv.Key] = kv.Value
		}
		return maps.Equal(got, want)
	}, func() string {
		md, err := b.app.AllMetadata()
		stale, serr := streams.Store[string, int64](b.app, "counts", streams.StaleStores())
		var all []streams.KeyValue[string, int64]
		if serr == nil {
			all, serr = stale.All()
		}
		return fmt.Sprintf("B never held a current copy of every count: metadata %+v %v; B's copies %v %v", md, err, all, serr)
	})
	active, err := streams.Store[string, int64](b.app, "counts")
	if err != nil {
		t.Fatal(err)
	}
	own, err := active.All()
	if err != nil || len(own) == 0 || len(own) >= len(want) {
		t.Fatalf("B's active tasks hold %d of %d words (%v): the standby copy should hold the rest", len(own), len(want), err)
	}

	rl.reset()
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(); err == nil {
		t.Fatal("the killed instance exited cleanly")
	}
	var second []string
	for i := range 500 {
		second = append(second, fmt.Sprintf("w%d z%d", i%13, i%3))
	}
	countWords(want, second)
	produceLines(t, cl, "text-lines", second)
	out.until(t, want)
	for w, cs := range out.seq {
		for i, c := range cs {
			if c != int64(i+1) {
				t.Fatalf("committed counts of %q: %v", w, cs)
			}
		}
	}
	if got := len(b.app.Tasks()); got != 4 {
		t.Fatalf("the survivor runs %d tasks, want 4", got)
	}
	st, restored, ok := rl.first("sb-counts-changelog", aParts[0])
	if !ok {
		t.Fatalf("no restore of the changelog partition %d taken over", aParts[0])
	}
	if st.start == 0 || restored != 0 {
		t.Fatalf("the promoted standby restored %d records from offset %d (end %d): want the tail only", restored, st.start, st.end)
	}
	t.Logf("promoted standby of partition %d: restore from %d to %d, %d records", aParts[0], st.start, st.end, restored)
}
