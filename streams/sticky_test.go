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
// first keep all the others, and counts stay right across the move.
func TestScaleOutIsSticky(t *testing.T) {
	n := embedtest.Start(t, embed.Options{})
	cl := topics(t, n.Addr(), 3, "text-lines", "word-counts")
	cfg := func(server string) streams.Config {
		return streams.Config{ApplicationID: "sticky", Brokers: []string{n.Addr()}, ApplicationServer: server}
	}
	apps := []*running{startApp(t, cfg("10.0.0.1:1")), startApp(t, cfg("10.0.0.2:2"))}
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

	apps = append(apps, startApp(t, cfg("10.0.0.3:3")))
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
	}
	if got := len(apps[2].app.Tasks()); got != 2 || moved != 2 {
		t.Fatalf("the new instance runs %d tasks, %d moved: want 2 and 2", got, moved)
	}

	produceLines(t, cl, "text-lines", lines)
	countWords(want, lines)
	latest(t, n.Addr(), "word-counts", want)
}
