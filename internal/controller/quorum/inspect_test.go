package quorum

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/storage"
)

// ReadOffline over a node's files, with snapshots taken along the way: the newest snapshot
// plus the committed entries after it rebuild exactly the image the node held.
func TestReadOfflineRebuildsTheImage(t *testing.T) {
	c := newCluster(t, 1, func(cfg *Config) { cfg.SnapshotEntries = 5 })
	n := c.nodes[c.waitActive(10*time.Second)]
	registerBroker(t, n, 0)
	for i := range 12 {
		if _, err := createTopic(ctx(t), n, fmt.Sprintf("t%d", i), 2, 1); err != nil {
			t.Fatal(err)
		}
	}
	want, off := c.image(0)
	c.waitApplied(off, 10*time.Second)

	rebuild := func() (*OfflineLog, []byte) {
		t.Helper()
		l, err := ReadOffline(storage.OS, filepath.Join(c.dir, "node0"))
		if err != nil {
			t.Fatal(err)
		}
		im := state.NewImage()
		if l.Snapshot != nil {
			if im, err = state.Restore(l.Snapshot); err != nil {
				t.Fatal(err)
			}
		}
		for _, e := range l.Entries {
			if e.Index <= l.Commit {
				if err := im.Apply(int64(e.Index), e.Records); err != nil {
					t.Fatalf("entry %d: %v", e.Index, err)
				}
			}
		}
		return l, im.Snapshot()
	}
	c.stop(0)
	l, got := rebuild()
	if l.Snapshot == nil || l.SnapshotIndex == 0 || l.SnapshotFile == "" || l.WAL == "" {
		t.Fatalf("no snapshot was read: %+v", l)
	}
	for _, e := range l.Entries {
		if e.Index <= l.SnapshotIndex {
			t.Fatalf("entry %d is not after the snapshot at %d", e.Index, l.SnapshotIndex)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the image rebuilt offline (snapshot %d, %d entries, commit %d) differs from the node's at %d",
			l.SnapshotIndex, len(l.Entries), l.Commit, off)
	}
}
