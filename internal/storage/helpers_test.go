package storage

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gregor-project/gregor/internal/batch"
)

// testClock is an injectable clock.
type testClock struct{ ms atomic.Int64 }

func newClock(ms int64) *testClock {
	c := &testClock{}
	c.ms.Store(ms)
	return c
}

func (c *testClock) Now() time.Time        { return time.UnixMilli(c.ms.Load()) }
func (c *testClock) NowMs() int64          { return c.ms.Load() }
func (c *testClock) Advance(d int64) int64 { return c.ms.Add(d) }

// makeBatch builds a v2 batch of len(tsDeltas) records with timestamps baseTs+tsDeltas[i] and
// values of valueSize bytes ("v<offset delta>" padded), compressed with codec. Offsets start at
// 0; Append assigns them.
func makeBatch(t testing.TB, baseTs int64, tsDeltas []int64, valueSize int, codec batch.Codec) []byte {
	t.Helper()
	recs := make([]batch.Record, len(tsDeltas))
	maxTs := int64(-1)
	for i, d := range tsDeltas {
		v := bytes.Repeat([]byte{'x'}, valueSize)
		copy(v, fmt.Sprintf("v%d", i))
		recs[i] = batch.Record{TimestampDelta: d, OffsetDelta: int32(i), Key: []byte(fmt.Sprintf("k%d", i)), Value: v}
		maxTs = max(maxTs, baseTs+d)
	}
	h := batch.Header{
		PartitionLeaderEpoch: -1,
		LastOffsetDelta:      int32(len(tsDeltas) - 1),
		BaseTimestamp:        baseTs,
		MaxTimestamp:         maxTs,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		BaseSequence:         -1,
	}
	b, err := batch.Build(h, recs, codec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := batch.Validate(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// simpleBatch is a batch of n records all at timestamp ts.
func simpleBatch(t testing.TB, n int, ts int64, valueSize int) []byte {
	return makeBatch(t, ts, make([]int64, n), valueSize, batch.CodecNone)
}

// testLogger collects log lines.
type testLogger struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (tl *testLogger) Write(p []byte) (int, error) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.buf.Write(p)
}

func (tl *testLogger) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.buf.String()
}

func (tl *testLogger) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(tl, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testCfg is a small-segment config for tests.
func testCfg() Config {
	c := DefaultConfig()
	c.SegmentBytes = 4096
	c.IndexIntervalBytes = 256
	c.FileDeleteDelayMs = 0
	c.RetentionMs = -1
	return c
}

type logEnv struct {
	t     testing.TB
	fs    FS
	dir   string
	cfg   Config
	clock *testClock
	logs  *testLogger
}

func newEnv(t testing.TB, cfg Config) *logEnv {
	return &logEnv{t: t, fs: OS, dir: filepath.Join(t.TempDir(), "topic-0"), cfg: cfg, clock: newClock(1_700_000_000_000), logs: &testLogger{}}
}

func (e *logEnv) open(clean bool, rp, lso int64) *Log {
	e.t.Helper()
	l, err := Open(e.fs, e.dir, e.cfg, OpenOptions{RecoveryPoint: rp, LogStartOffset: lso, Clean: clean, Now: e.clock.Now, Logger: e.logs.Logger()})
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

func mustAppend(t testing.TB, l *Log, b []byte) AppendInfo {
	t.Helper()
	info, err := l.Append(b, AppendOptions{AssignOffsets: true})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// readBatches reads a Slice's bytes and parses them into headers, checking CRCs, then
// releases it.
func readBatches(t testing.TB, s Slice) []batch.Header {
	t.Helper()
	defer s.Release()
	if s.Size == 0 {
		return nil
	}
	b := make([]byte, s.Size)
	if _, err := s.File.ReadAt(b, s.Pos); err != nil {
		t.Fatal(err)
	}
	var hs []batch.Header
	for len(b) > 0 {
		h, err := batch.CheckCRC(b[:min(len(b), sizeOf(t, b))])
		if err != nil {
			t.Fatalf("slice holds a bad batch: %v", err)
		}
		hs = append(hs, h)
		b = b[h.Size():]
	}
	return hs
}

func sizeOf(t testing.TB, b []byte) int {
	h, err := batch.ParseHeader(b)
	if err != nil {
		t.Fatalf("slice holds a bad batch header: %v", err)
	}
	return h.Size()
}

// mustRead reads and parses.
func mustRead(t testing.TB, l *Log, off int64, maxBytes int32, maxOff int64, minOne bool) []batch.Header {
	t.Helper()
	s, err := l.Read(off, maxBytes, maxOff, minOne)
	if err != nil {
		t.Fatalf("Read(%d): %v", off, err)
	}
	return readBatches(t, s)
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func segPath(dir string, base int64, suffix string) string {
	return filepath.Join(dir, segmentName(base)+suffix)
}

// crash closes a log's files the way a killed process would: no flush, no index writes.
func crash(l *Log) {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.mu.segments {
		s.decRef()
	}
	l.mu.segments = nil
	l.mu.state = stateClosed
}
