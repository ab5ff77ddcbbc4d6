package streams_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
)

// persistedSessions counts clicks per user in sessions of one second of inactivity in the
// default (persistent) store, writing every update to sessions.
func persistedSessions(b *streams.Builder) {
	clicks := streams.Stream(b, "clicks", serde.String, serde.String)
	counts := streams.CountSessionWindowed(streams.SessionWindowedBy(streams.GroupByKey(clicks),
		streams.SessionWindowsOf(qSessionGap*time.Millisecond, time.Hour)), streams.Named("click-sessions"))
	streams.To(streams.ToStream(counts), "sessions", streams.SessionWindowedSerde(serde.String), serde.Int64Text)
}

func startSessionsIn(t *testing.T, addr, dir string, l streams.StateRestoreListener) *running {
	t.Helper()
	b := streams.NewBuilder()
	persistedSessions(b)
	app, err := streams.New(b, streams.Config{ApplicationID: "ps", Brokers: []string{addr}, CommitInterval: 50 * time.Millisecond,
		StateDir: dir, StateRestoreListener: l})
	if err != nil {
		t.Fatal(err)
	}
	r := &running{app: app, done: make(chan error, 1)}
	go func() { r.done <- app.Run(context.Background()) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// A persistent session store survives a restart: an instance that stopped cleanly and
// comes back after another instance moved the changelog on restores only the changelog's
// tail past its checkpoint (the restore listener hears exactly that range), and its
// sessions, queried and written downstream, are the ones computed from the whole input.
func TestPersistentSessionStoreRestoresTail(t *testing.T) {
	n := embedtest.Start(t, embed.Options{})
	cl := topics(t, n.Addr(), 2, "clicks", "sessions")
	adm := kadm.NewClient(cl)
	const changelog = "ps-click-sessions-changelog"
	base := time.Now().UnixMilli()
	var in []input
	// Each batch continues every user's clicks, some within a gap of the last batch's.
	clicks := func(batch int) {
		t.Helper()
		rng := rand.New(rand.NewPCG(uint64(batch), 21))
		var recs []*kgo.Record
		for range 120 {
			k := fmt.Sprintf("u%d", rng.IntN(8))
			ts := base + int64(batch)*20_000 + rng.Int64N(20_000)
			in = append(in, input{key: k, ts: ts, value: 1})
			recs = append(recs, &kgo.Record{Topic: "clicks", Key: []byte(k), Value: []byte("click"), Timestamp: time.UnixMilli(ts)})
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	want := func() map[string]string {
		out := map[string]string{}
		for _, w := range expectedSessions(in) {
			out[fmt.Sprintf("%s@%d-%d", w.key, w.start-base, w.end-base)] = fmt.Sprint(w.value)
		}
		return out
	}
	dirA, dirB := t.TempDir(), t.TempDir()

	clicks(0)
	a := startSessionsIn(t, n.Addr(), dirA, nil)
	sessionTable(t, n.Addr(), "sessions", base, want())
	a.stop(t)
	for _, task := range []string{"0_0", "0_1"} {
		if _, err := os.Stat(filepath.Join(dirA, "ps", task, "click-sessions")); err != nil {
			t.Fatalf("no pebble directory for the session store: %v", err)
		}
	}
	e1 := changelogEnds(t, adm, changelog)

	clicks(1)
	b := startSessionsIn(t, n.Addr(), dirB, nil)
	sessionTable(t, n.Addr(), "sessions", base, want())
	b.stop(t)
	e2 := changelogEnds(t, adm, changelog)

	tail := newProgressLog()
	clicks(2)
	a = startSessionsIn(t, n.Addr(), dirA, tail)
	sessionTable(t, n.Addr(), "sessions", base, want())
	ev := tail.events()
	for p := range int32(2) {
		if e2[p] <= e1[p] {
			t.Fatalf("partition %d: the second instance wrote no changelog (%d..%d)", p, e1[p], e2[p])
		}
		e := ev[p]
		if !e.started || !e.ended || e.store != "click-sessions" || e.start != e1[p] || e.end != e2[p] ||
			e.total != e2[p]-e1[p] || e.batchSum != e.total {
			t.Fatalf("partition %d: restore %+v, want %d..%d, %d records", p, e, e1[p], e2[p], e2[p]-e1[p])
		}
	}
	q, err := streams.SessionStoreOf[string, int64](a.app, "click-sessions")
	if err != nil {
		t.Fatal(err)
	}
	all, err := q.FetchRange("", "\xff")
	if exp := expectedSessions(in); err != nil || !slices.Equal(sortWins(asWins(all)), exp) {
		t.Fatalf("the restored store holds %v (%v), want %v", asWins(all), err, exp)
	}
}
