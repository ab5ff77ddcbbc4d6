package streams_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
	"github.com/gregor-project/gregor/streams"
)

// Two instances of one application share its tasks as one consumer group: together they
// run every task once, and the counts are exact.
func TestInstancesShareTasks(t *testing.T) {
	n := embedtest.Start(t, embed.Options{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	for _, topic := range []string{"text-lines", "word-counts"} {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 4, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	a := start(t, n.Addr(), "share", streams.AtLeastOnce)
	b := start(t, n.Addr(), "share", streams.AtLeastOnce)

	// Every task (2 sub-topologies x 4 partitions) runs on exactly one instance, and both
	// instances have some.
	var all []streams.TaskID
	for i := range 2 {
		for p := range 4 {
			all = append(all, streams.TaskID{Subtopology: i, Partition: int32(p)})
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		ta, tb := a.app.Tasks(), b.app.Tasks()
		both := slices.SortedFunc(slices.Values(append(slices.Clone(ta), tb...)), func(x, y streams.TaskID) int {
			return cmpTask(x, y)
		})
		if len(ta) > 0 && len(tb) > 0 && slices.Equal(both, all) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tasks %v and %v, want %v between them", ta, tb, all)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, bounded by the deadline
	}

	want := map[string]int64{}
	var lines []string
	for i := range 200 {
		lines = append(lines, fmt.Sprintf("a%d b%d", i%13, i%7))
	}
	countWords(want, lines)
	produceLines(t, cl, "text-lines", lines)
	latest(t, n.Addr(), "word-counts", want)
}

func cmpTask(x, y streams.TaskID) int {
	if x.Subtopology != y.Subtopology {
		return x.Subtopology - y.Subtopology
	}
	return int(x.Partition - y.Partition)
}
