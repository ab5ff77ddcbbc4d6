// Package embedtest starts embedded Gregor nodes and clusters (package embed) for a test:
// a start that fails fails the test, and what was started is closed when the test ends
// (t.Cleanup), its temporary data directory removed.
//
//	func TestOrders(t *testing.T) {
//		n := embedtest.Start(t, embed.Options{})
//		client, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
//		...
//	}
//
// The nodes log to the test's log (t.Log, shown for a failed test or with go test -v)
// unless Options.Logger is set.
package embedtest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/gregor-project/gregor/embed"
)

// StartTimeout bounds a start: a node that cannot start (a cluster whose quorum never
// forms) fails the test after it instead of hanging until the test binary's timeout.
const StartTimeout = time.Minute

// Start starts a single node (embed.Start), failing the test if it cannot, and closes it
// when the test ends.
func Start(t testing.TB, opt embed.Options) *embed.Node {
	t.Helper()
	opt.Logger = testLogger(t, opt.Logger)
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	n, err := embed.Start(ctx, opt)
	if err != nil {
		t.Fatalf("embedtest: start node: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("embedtest: close node: %v", err)
		}
	})
	return n
}

// StartCluster starts n nodes (embed.StartCluster), failing the test if they cannot, and
// closes them when the test ends.
func StartCluster(t testing.TB, n int, opt embed.Options) *embed.Cluster {
	t.Helper()
	opt.Logger = testLogger(t, opt.Logger)
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	c, err := embed.StartCluster(ctx, n, opt)
	if err != nil {
		t.Fatalf("embedtest: start cluster of %d: %v", n, err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("embedtest: close cluster: %v", err)
		}
	})
	return c
}

// testLogger is l, or a logger that writes to t's log until the test ends (a line logged
// after that, by a node still closing, is dropped: testing panics on a log after the end).
func testLogger(t testing.TB, l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	w := &tbWriter{t: t}
	t.Cleanup(w.stop)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
