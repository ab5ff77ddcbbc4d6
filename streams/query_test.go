package streams_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
)

// startApp runs word count with cfg (Brokers and ApplicationID set by the caller) until the
// test ends.
func startApp(t *testing.T, cfg streams.Config) *running {
	t.Helper()
	b := streams.NewBuilder()
	wordCount(b)
	if cfg.CommitInterval == 0 {
		cfg.CommitInterval = 50 * time.Millisecond
	}
	if cfg.StateDir == "" {
		cfg.StateDir = t.TempDir() // each instance a machine of its own
	}
	app, err := streams.New(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &running{app: app, done: make(chan error, 1)}
	go func() { r.done <- app.Run(context.Background()) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// topics creates topics of n partitions.
func topics(t *testing.T, addr string, n int32, names ...string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	for _, topic := range names {
		if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), n, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	return cl
}

// eventually waits for cond, failing the test with what() after a minute.
func eventually(t *testing.T, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what())
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, bounded by the deadline
	}
}

// settled is whether apps together run exactly total tasks, each app its even share, and
// every app's metadata lists every app's server.
func settled(apps []*running, total int) bool {
	sum := 0
	for _, r := range apps {
		n := len(r.app.Tasks())
		if n < total/len(apps) || n > (total+len(apps)-1)/len(apps) {
			return false
		}
		sum += n
		md, err := r.app.AllMetadata()
		if err != nil || len(md) != len(apps) {
			return false
		}
	}
	return sum == total
}

// Three instances with application.server set: for every word, MetadataForKey names the
// instance whose Store holds the word's count, that count is the one computed from the
// input, and the other instances do not hold it.
func TestInteractiveQueries(t *testing.T) {
	n := embedtest.Start(t, embed.Options{})
	cl := topics(t, n.Addr(), 3, "text-lines", "word-counts")
	var apps []*running
	servers := []string{"10.0.0.1:7001", "10.0.0.2:7002", "10.0.0.3:7003"}
	for _, s := range servers {
		apps = append(apps, startApp(t, streams.Config{ApplicationID: "iq", Brokers: []string{n.Addr()}, ApplicationServer: s}))
	}
	eventually(t, func() bool { return settled(apps, 6) }, func() string { return "the group did not settle on 6 tasks" })

	want := map[string]int64{}
	var lines []string
	for i := range 300 {
		lines = append(lines, fmt.Sprintf("w%d x%d y%d", i%23, i%7, i%3))
	}
	countWords(want, lines)
	produceLines(t, cl, "text-lines", lines)
	latest(t, n.Addr(), "word-counts", want)

	byServer := map[string]*streams.App{}
	for i, s := range servers {
		byServer[s] = apps[i].app
	}
	countsSub := -1
	md, err := apps[0].app.AllMetadata()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range md {
		if slices.Contains(m.StateStoreNames, "counts") && len(m.TopicPartitions["iq-counts-repartition"]) != 1 {
			t.Fatalf("%s runs counts for partitions %v, want one of three", m.Host, m.TopicPartitions)
		}
	}
	hosted := 0
	for w, c := range want {
		km, err := streams.MetadataForKey(apps[1].app, "counts", w, serde.String)
		if err != nil {
			t.Fatal(err)
		}
		host := byServer[km.Active.String()]
		if host == nil {
			t.Fatalf("%q: active host %v is none of the instances", w, km.Active)
		}
		for _, id := range host.Tasks() {
			if id.Partition == km.Partition && id.Subtopology > countsSub {
				countsSub = id.Subtopology
			}
		}
		for s, app := range byServer {
			st, err := streams.Store[string, int64](app, "counts", streams.InPartition(km.Partition))
			if app != host {
				if !errors.Is(err, streams.ErrInvalidStateStore) {
					t.Fatalf("%q on %s, which does not host partition %d: %v", w, s, km.Partition, err)
				}
				all, err := streams.Store[string, int64](app, "counts")
				if err != nil {
					t.Fatal(err)
				}
				if _, found, err := all.Get(w); found || err != nil {
					t.Fatalf("%q found on %s, not its host: %v", w, s, err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			got, found, err := st.Get(w)
			if err != nil || !found || got != c {
				t.Fatalf("%q on its host %s: %d %v %v, want %d", w, s, got, found, err, c)
			}
			hosted++
		}
	}
	if hosted != len(want) || countsSub != 1 {
		t.Fatalf("%d of %d words found on their host; counts in sub-topology %d", hosted, len(want), countsSub)
	}

	// All, Range and ApproximateNumEntries over the three instances make the whole table.
	union := map[string]int64{}
	entries := int64(0)
	var ranged []string
	for _, r := range apps {
		st, err := streams.Store[string, int64](r.app, "counts")
		if err != nil {
			t.Fatal(err)
		}
		all, err := st.All()
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range all {
			union[kv.Key] = kv.Value
		}
		n, err := st.ApproximateNumEntries()
		if err != nil || n != int64(len(all)) {
			t.Fatalf("ApproximateNumEntries %d %v, All has %d", n, err, len(all))
		}
		entries += n
		rs, err := st.Range("x", "x9")
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range rs {
			ranged = append(ranged, kv.Key)
		}
	}
	if len(union) != len(want) || entries != int64(len(want)) {
		t.Fatalf("instances hold %d words (%d entries), want %d", len(union), entries, len(want))
	}
	for w, c := range want {
		if union[w] != c {
			t.Fatalf("%q: %d, want %d", w, union[w], c)
		}
	}
	slices.Sort(ranged)
	if want := []string{"x0", "x1", "x2", "x3", "x4", "x5", "x6"}; !slices.Equal(ranged, want) {
		t.Fatalf("Range(x, x9): %v, want %v", ranged, want)
	}

	if _, err := streams.Store[string, int64](apps[0].app, "nope"); !errors.Is(err, streams.ErrUnknownStateStore) || !errors.Is(err, streams.ErrInvalidStateStore) {
		t.Fatalf("unknown store: %v", err)
	}
	if _, err := streams.Store[string, string](apps[0].app, "counts"); !errors.Is(err, streams.ErrInvalidStateStore) {
		t.Fatalf("wrong value type: %v", err)
	}
}

// blockingListener holds the first restore until released, so a test can query while it
// runs.
type blockingListener struct {
	once    sync.Once
	started chan struct{}
	release chan struct{}
}

func (l *blockingListener) OnRestoreStart(string, int32, string, int64, int64) {
	l.once.Do(func() {
		close(l.started)
		<-l.release
	})
}

func (*blockingListener) OnBatchRestored(string, int32, string, int64, int64) {}

func (*blockingListener) OnRestoreEnd(string, int32, string, int64) {}

// A store whose task is restoring is not queryable (ErrInvalidStateStore); once restored it
// is. Before Run, neither stores nor metadata are available.
func TestQueryWhileRestoring(t *testing.T) {
	n := embedtest.Start(t, embed.Options{})
	topics(t, n.Addr(), 1, "text-lines", "word-counts")
	b := streams.NewBuilder()
	wordCount(b)
	l := &blockingListener{started: make(chan struct{}), release: make(chan struct{})}
	app, err := streams.New(b, streams.Config{ApplicationID: "restoring", Brokers: []string{n.Addr()},
		ApplicationServer: "localhost:8080", StateRestoreListener: l, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := streams.Store[string, int64](app, "counts"); !errors.Is(err, streams.ErrInvalidStateStore) {
		t.Fatalf("before Run: %v", err)
	}
	if _, err := app.AllMetadata(); !errors.Is(err, streams.ErrMetadataNotAvailable) {
		t.Fatalf("metadata before Run: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(context.Background()) }()
	select {
	case <-l.started:
	case <-time.After(time.Minute):
		t.Fatal("no restore started")
	}
	_, err = streams.Store[string, int64](app, "counts")
	close(l.release)
	if !errors.Is(err, streams.ErrInvalidStateStore) || !strings.Contains(err.Error(), "restoring") {
		t.Fatalf("while restoring: %v", err)
	}
	eventually(t, func() bool {
		_, err := streams.Store[string, int64](app, "counts")
		return err == nil
	}, func() string { return "the store never became queryable" })
	if err := app.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
