package storage

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestCheckpointFormatRoundTrip(t *testing.T) {
	m := map[TopicPartition]int64{{"a", 0}: 5, {"b-c.d", 12}: 1 << 40, {"a", 3}: 0}
	data := formatCheckpoint(m)
	if want := "0\n3\na 0 5\na 3 0\nb-c.d 12 1099511627776\n"; string(data) != want {
		t.Fatalf("%q", data)
	}
	got, err := parseCheckpoint(data)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatal(got, err)
	}
	for _, bad := range []string{"", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na x 1\n", "0\n1\na 0\n", "0\n0\nextra\n"} {
		if _, err := parseCheckpoint([]byte(bad)); err == nil {
			t.Fatalf("accepted %q", bad)
		}
	}
	dir := t.TempDir()
	if err := WriteFileAtomic(OS, dir, "cp", data); err != nil {
		t.Fatal(err)
	}
	got, err = ReadCheckpoint(OS, filepath.Join(dir, "cp"))
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatal(got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cp.tmp")); !os.IsNotExist(err) {
		t.Fatal("temp file left")
	}
}

func TestParsePartitionDir(t *testing.T) {
	for name, want := range map[string]*TopicPartition{
		"orders-0":              {"orders", 0},
		"my-topic.v2-17":        {"my-topic.v2", 17},
		"__consumer_offsets-49": {"__consumer_offsets", 49},
		"orders":                nil,
		"orders-":               nil,
		"-3":                    nil,
		"orders-x":              nil,
		"orders--1":             {"orders-", 1},
		"orders-0.abc-delete":   nil,
		"orders-0-future":       nil,
		"orders-+1":             nil,
	} {
		tp, ok := ParsePartitionDir(name)
		if ok != (want != nil) || (ok && tp != *want) {
			t.Errorf("%q: %v %v", name, tp, ok)
		}
	}
}

func TestManagerLifecycle(t *testing.T) {
	dir := t.TempDir()
	tl := &testLogger{}
	m, err := OpenManager(OS, dir, tl.Logger())
	if err != nil {
		t.Fatal(err)
	}
	if m.CleanShutdown() || m.NodeID() != -1 || m.ClusterID() != "" {
		t.Fatal("fresh dir state")
	}
	if err := m.Format("abc123", 3); err != nil {
		t.Fatal(err)
	}
	cfg := testCfg()
	a, err := m.GetOrCreate("orders", 0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.GetOrCreate("orders", 1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := m.GetOrCreate("orders", 0, cfg); again != a || m.Get("orders", 0) != a || m.Get("nope", 0) != nil {
		t.Fatal("GetOrCreate/Get")
	}
	fill(t, a, 40, 1, 0, 200)
	fill(t, b, 3, 1, 0, 10)
	if err := a.SetLogStartOffset(25); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	rp, _ := ReadCheckpoint(OS, filepath.Join(dir, RecoveryPointCheckpointFile))
	so, _ := ReadCheckpoint(OS, filepath.Join(dir, LogStartOffsetCheckpointFile))
	if rp[TopicPartition{"orders", 0}] != 40 || rp[TopicPartition{"orders", 1}] != 0 || so[TopicPartition{"orders", 0}] != 25 {
		t.Fatalf("checkpoints %v %v", rp, so)
	}
	sizes := m.Sizes()
	if sizes[TopicPartition{"orders", 0}] != a.Size() || m.DirSize() != a.Size()+b.Size() {
		t.Fatal("sizes")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, CleanShutdownFile)); err != nil {
		t.Fatal("no clean-shutdown marker after Close")
	}

	// Reopen: clean, meta read back, marker removed, partitions listed, no recovery.
	tl2 := &testLogger{}
	m, err = OpenManager(OS, dir, tl2.Logger())
	if err != nil {
		t.Fatal(err)
	}
	if !m.CleanShutdown() || m.ClusterID() != "abc123" || m.NodeID() != 3 {
		t.Fatal("reopen state")
	}
	if _, err := os.Stat(filepath.Join(dir, CleanShutdownFile)); !os.IsNotExist(err) {
		t.Fatal("marker not removed at open")
	}
	if err := m.Format("other", 3); !errors.Is(err, ErrMetaMismatch) {
		t.Fatal(err)
	}
	if err := m.Format("abc123", 3); err != nil {
		t.Fatal(err)
	}
	want := []TopicPartition{{"orders", 0}, {"orders", 1}}
	if got := m.Existing(); !reflect.DeepEqual(got, want) {
		t.Fatal(got)
	}
	if m.Sizes()[TopicPartition{"orders", 0}] == 0 {
		t.Fatal("size of an unopened partition")
	}
	a, err = m.GetOrCreate("orders", 0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.LogEndOffset() != 40 || a.LogStartOffset() != 25 || a.RecoveryPoint() != 40 {
		t.Fatalf("LEO %d LSO %d", a.LogEndOffset(), a.LogStartOffset())
	}
	if strings.Contains(tl2.String(), "recovering log") {
		t.Fatal("recovered after a clean shutdown")
	}
	// Crash: no Close. The next open is unclean and recovers from the checkpointed point.
	fill(t, a, 5, 1, 0, 10)
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	tl3 := &testLogger{}
	m2, err := OpenManager(OS, dir, tl3.Logger())
	if err != nil {
		t.Fatal(err)
	}
	if m2.CleanShutdown() {
		t.Fatal("crash seen as clean")
	}
	a2, err := m2.GetOrCreate("orders", 0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a2.LogEndOffset() != 45 || a2.LogStartOffset() != 25 {
		t.Fatalf("LEO %d", a2.LogEndOffset())
	}
	if !strings.Contains(tl3.String(), "recovering log after an unclean shutdown") || !strings.Contains(tl3.String(), "recovery_point=40") {
		t.Fatalf("no recovery:\n%s", tl3.String())
	}
	crash(a) // the crashed process's descriptors
	// Delete renames then removes the directory.
	if err := m2.Delete("orders", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "orders-1")); !os.IsNotExist(err) {
		t.Fatal("partition dir kept")
	}
	if got := m2.Existing(); !reflect.DeepEqual(got, []TopicPartition{{"orders", 0}}) {
		t.Fatal(got)
	}
	if err := m2.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestManagerOfflineLogPreventsCleanMarker(t *testing.T) {
	dir := t.TempDir()
	ffs := NewFaultFS(OS)
	m, err := OpenManager(ffs, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.GetOrCreate("t", 0, testCfg())
	if err != nil {
		t.Fatal(err)
	}
	ffs.FailNextWrite("*.log")
	if _, err := l.Append(simpleBatch(t, 1, 1, 1), AppendOptions{AssignOffsets: true}); err == nil {
		t.Fatal("no error")
	}
	if err := m.Close(); !errors.Is(err, ErrLogOffline) {
		t.Fatalf("close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, CleanShutdownFile)); !os.IsNotExist(err) {
		t.Fatal("clean marker written with an offline log")
	}
}

func TestManagerRetentionAndFlushDue(t *testing.T) {
	dir := t.TempDir()
	m, err := OpenManager(OS, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	clock := newClock(1_000_000)
	m.Now = clock.Now
	cfg := testCfg()
	cfg.RetentionMs = 1000
	cfg.FlushIntervalMs = 500
	l, err := m.GetOrCreate("t", 0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 40, clock.NowMs(), 0, 200)
	if err := m.FlushDue(clock.NowMs() + 100); err != nil || l.RecoveryPoint() != 0 {
		t.Fatal("flushed early")
	}
	if err := m.FlushDue(clock.NowMs() + 500); err != nil || l.RecoveryPoint() != 40 {
		t.Fatal("not flushed when due")
	}
	n, err := m.RunRetention(clock.NowMs() + 2000)
	if err != nil || n == 0 || l.LogStartOffset() != 40 || l.LogEndOffset() != 40 {
		t.Fatalf("retention: %d %v LSO %d", n, err, l.LogStartOffset())
	}
}

func TestManagerFinishesInterruptedDelete(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "t-0.0123abcd-delete"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "t-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := OpenManager(OS, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := os.Stat(filepath.Join(dir, "t-0.0123abcd-delete")); !os.IsNotExist(err) {
		t.Fatal("-delete dir kept")
	}
	if got := m.Existing(); !reflect.DeepEqual(got, []TopicPartition{{"t", 1}}) {
		t.Fatal(got)
	}
}
