package streams

import (
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/gregor-project/gregor/streams/serde"
)

// windowedCounts builds a hopping-window count per key into store "wc" of type st.
func windowedCounts(st StoreType) *Builder {
	b := NewBuilder()
	s := Stream(b, "in", serde.String, serde.String)
	CountWindowed(WindowedBy(GroupByKey(s), HoppingWindows(10*time.Second, 5*time.Second, time.Minute)),
		Named("wc"), WithStoreType(st))
	return b
}

func windowCounts(t *testing.T, tk *task) map[string]int64 {
	t.Helper()
	kv := tk.stores["wc"].typed().(KeyValueStore[Windowed[string], int64])
	out := map[string]int64{}
	for w, n := range kv.All() {
		out[w.String()] = n
	}
	return out
}

// A task's persistent stores outlive it: a task closed after a checkpoint (which flushes
// them) finds, when it opens again, the windows it had, without any restore; an in-memory
// store starts empty. The checkpoint names the changelog offsets acknowledged for its
// partition.
func TestTaskStoresPersist(t *testing.T) {
	for _, st := range []StoreType{Persistent, InMemory} {
		t.Run(string(st), func(t *testing.T) {
			topo, err := windowedCounts(st).build()
			if err != nil {
				t.Fatal(err)
			}
			topo.state = &stateDirectory{root: t.TempDir(), defaultStore: Persistent, log: slog.New(slog.DiscardHandler)}
			id := TaskID{Subtopology: 0, Partition: 3}
			var logged int64
			emit := func(topic string, p int32, k, v []byte, ts int64, _ []Header) error {
				if topic == "app-wc-changelog" && p == 3 {
					logged++
				}
				return nil
			}
			open := func() *task {
				tk, err := newTask(topo, id, "app", time.Now, emit, func(string) (int, error) { return 4, nil })
				if err != nil {
					t.Fatal(err)
				}
				return tk
			}
			tk := open()
			for i, k := range []string{"a", "b", "a", "a"} {
				if err := tk.process("in", int64(i), []byte(k), []byte("x"), int64(i)*3000, nil); err != nil {
					t.Fatal(err)
				}
			}
			want := windowCounts(t, tk)
			if len(want) == 0 || logged == 0 {
				t.Fatalf("nothing counted (%v) or logged (%d)", want, logged)
			}
			acked := func(tp topicPartition) int64 {
				if tp == (topicPartition{"app-wc-changelog", 3}) {
					return logged - 1
				}
				return -1
			}
			if err := tk.checkpoint(acked, true); err != nil {
				t.Fatal(err)
			}
			if err := tk.close(); err != nil {
				t.Fatal(err)
			}

			tk = open()
			defer func() {
				if err := tk.close(); err != nil {
					t.Error(err)
				}
			}()
			got := windowCounts(t, tk)
			if st == InMemory {
				if len(got) != 0 || tk.state != nil {
					t.Fatalf("an in-memory store kept %v", got)
				}
				return
			}
			if !maps.Equal(got, want) {
				t.Fatalf("reopened store holds %v, want %v", got, want)
			}
			cp := tk.state.checkpoint
			if len(cp) != 1 || cp[topicPartition{"app-wc-changelog", 3}] != logged-1 {
				t.Fatalf("checkpoint %v, want app-wc-changelog 3 at %d", cp, logged-1)
			}
		})
	}
}
