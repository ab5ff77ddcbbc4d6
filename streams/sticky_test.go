package streams_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
	"github.com/gregor-project/gregor/streams"
)

// Adding a third instance to two moves only its fair share of the six tasks to it: the two
// first keep all the others, with their state (a kept task restores nothing), and counts
// stay right across the move.
func TestScaleOutIsSticky(t *testing.T) {
	n := embedtest.Start(t, embed.Options{})
	cl := topics(t, n.Addr(), 3, "text-lines", "word-counts")
	logs := []*restoreLog{{}, {}, {}}
	cfg := func(i int) streams.Config {
		return streams.Config{ApplicationID: "sticky", Brokers: []string{n.Addr()},
			ApplicationServer: fmt.Sprintf("10.0.0.%d:%d", i+1, i+1), StateRestoreListener: logs[i]}
	}
	apps := []*running{startApp(t, cfg(0)), startApp(t, cfg(1))}
	eventually(t, func() bool { return settled(apps, 6) }, func() string { return "two instances did not settle" })

	want := map[string]int64{}
	var lines []string
	for i := range 200 {
		lines = append(lines, fmt.Sprintf("a%d b%d", i%19, i%4))
	}
	countWords(want, lines)
	produceLines(t, cl, "text-lines", lines)
	latest(t, n.Addr(), "word-counts", want)
	before := [][]streams.TaskID{apps[0].app.Tasks(), apps[1].app.Tasks()}

	logs[0].reset()
	logs[1].reset()
	apps = append(apps, startApp(t, cfg(2)))
	eventually(t, func() bool { return settled(apps, 6) }, func() string { return "three instances did not settle" })
	moved := 0
	for i := range 2 {
		after := apps[i].app.Tasks()
		for _, id := range after {
			if !slices.Contains(before[i], id) {
				t.Fatalf("task %s moved to instance %d, which was already running %v", id, i, before[i])
			}
		}
		moved += len(before[i]) - len(after)
		for _, id := range after {
			if id.Subtopology != 1 {
				continue // no store
			}
			st, restored, ok := logs[i].first("sticky-counts-changelog", id.Partition)
			if !ok || st.start == 0 || restored != 0 {
				t.Fatalf("task %s kept on instance %d restored %d records from offset %d (%v)", id, i, restored, st.start, ok)
			}
		}
	}
	if got := len(apps[2].app.Tasks()); got != 2 || moved != 2 {
		t.Fatalf("the new instance runs %d tasks, %d moved: want 2 and 2", got, moved)
	}

	produceLines(t, cl, "text-lines", lines)
	countWords(want, lines)
	latest(t, n.Addr(), "word-counts", want)
}
