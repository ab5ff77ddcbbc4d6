// Package testutil starts real Gregor brokers for tests: in-process on a loopback port, or as
// a separate process of the built binary that a test can kill.
package testutil

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/internal/broker"
	"github.com/gregor-project/gregor/internal/storage"
)

// Broker is an in-process broker bound to 127.0.0.1 on a free port.
type Broker struct {
	*broker.Broker
	Dir  string
	Sets []string
	fs   storage.FS
	t    testing.TB

	closedByTest bool // the test called Close and saw its error; cleanup leaves it alone
}

// StartBroker starts a broker with data in a new temp dir; sets are extra key=value configs.
// It is closed when the test ends.
func StartBroker(t testing.TB, sets ...string) *Broker {
	t.Helper()
	return StartBrokerIn(t, t.TempDir(), nil, sets...)
}

// StartBrokerIn starts a broker on an existing data dir (a restart) with an optional fault FS.
//
// It starts the broker as a user's test would, through the public embed.Start (so with
// embed's defaults, which sets override), passing what embed does not expose (the FS, and
// getting the broker itself back) through broker.WithOptions.
func StartBrokerIn(t testing.TB, dir string, fs storage.FS, sets ...string) *Broker {
	t.Helper()
	b, err := TryStartBrokerIn(t, dir, fs, sets...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TryStartBrokerIn is StartBrokerIn for a start that may fail: it returns the error (of the
// configuration or of start-up) instead of failing the test. A log.dirs among sets (several
// log dirs) replaces dir.
func TryStartBrokerIn(t testing.TB, dir string, fs storage.FS, sets ...string) (*Broker, error) {
	t.Helper()
	props := map[string]string{}
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		if k = strings.TrimSpace(k); !ok || k == "" {
			t.Fatalf("config: %q is not key=value", s)
		}
		props[k] = v
	}
	var w io.Writer = io.Discard
	if os.Getenv("GREGOR_TEST_LOG") != "" {
		w = os.Stderr
	}
	var b *broker.Broker
	ctx := broker.WithOptions(context.Background(), func(o *broker.Options) {
		o.FS = fs
		o.Started = func(started *broker.Broker) { b = started }
	})
	opt := embed.Options{Dir: dir, Config: props, Logger: slog.New(slog.NewTextHandler(w, nil))}
	if v, ok := props["log.dirs"]; ok { // several log dirs, in place of dir
		opt.Dir, opt.LogDirs = "", strings.Split(v, ",")
		delete(props, "log.dirs")
	}
	if _, err := embed.Start(ctx, opt); err != nil {
		return nil, fmt.Errorf("start broker: %w", err)
	}
	tb := &Broker{Broker: b, Dir: dir, Sets: sets, fs: fs, t: t}
	t.Cleanup(func() {
		if tb.closedByTest {
			return
		}
		if err := closeWithin(t, b); err != nil {
			t.Errorf("broker close: %v", err)
		}
	})
	return tb, nil
}

// closeHangAfter is how long a broker's Close may take before the test fails with every
// goroutine's stack (a hung shutdown would otherwise wait for the package's test timeout
// and say nothing about where it hung).
const closeHangAfter = 60 * time.Second

func closeWithin(t testing.TB, b *broker.Broker) error {
	done := make(chan error, 1)
	go func() { done <- b.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(closeHangAfter):
		buf := make([]byte, 1<<22)
		buf = buf[:runtime.Stack(buf, true)]
		t.Logf("goroutines:\n%s", buf)
		return fmt.Errorf("Close still running after %s (left running; stacks logged)", closeHangAfter)
	}
}

// Close closes the broker and returns its error to the test, which then owns it: a test that
// broke the storage on purpose may expect an error here, and cleanup does not report it again.
func (b *Broker) Close() error {
	b.closedByTest = true
	return closeWithin(b.t, b.Broker)
}

// Restart closes the broker cleanly and starts a new one on the same data dir.
func (b *Broker) Restart() *Broker {
	b.t.Helper()
	if err := b.Close(); err != nil {
		b.t.Fatalf("close: %v", err)
	}
	return StartBrokerIn(b.t, b.Dir, b.fs, b.Sets...)
}

// Addr is host:port for clients.
func (b *Broker) Addr() string { return b.Broker.Addr().String() }
