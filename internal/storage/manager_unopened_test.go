package storage

import (
	"os"
	"path/filepath"
	"testing"
)

// After an unclean stop, a Close that never opened (so never recovered) a partition must not
// write the clean-shutdown marker: the next start would then trust that partition's torn tail.
// (The broker closes the Manager this way when opening the partitions fails midway.)
func TestManagerCloseWithoutRecoveringAnUncleanLogWritesNoMarker(t *testing.T) {
	dir := t.TempDir()
	m1, err := OpenManager(OS, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := m1.GetOrCreate("t", 0, testCfg())
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, simpleBatch(t, 2, 1, 10))
	first := l.Size()
	mustAppend(t, l, simpleBatch(t, 2, 1, 10))
	crash(l) // m1 is abandoned: the process died

	// The crash tore the second batch: its last byte never reached the disk.
	path := segPath(filepath.Join(dir, "t-0"), 0, logSuffix)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}

	m2, err := OpenManager(OS, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m2.CleanShutdown() {
		t.Fatal("clean after a crash")
	}
	if err := m2.Close(); err != nil { // t-0 never opened
		t.Fatal(err)
	}

	m3, err := OpenManager(OS, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m3.Close()
	l, err = m3.GetOrCreate("t", 0, testCfg())
	if err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 2 || l.Size() != first {
		t.Fatalf("log end offset %d, size %d: the torn batch was kept (want 2, %d)", l.LogEndOffset(), l.Size(), first)
	}
}
