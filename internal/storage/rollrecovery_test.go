package storage

import (
	"os"
	"testing"
)

// A flush at the log end offset followed by a roll seals the old segment with index files
// that are not yet fsynced. A crash that loses them must not leave the recovery point past
// that segment, or the segment is trusted on reopen with what survived of its time index:
// here its largest timestamp, carried by its first batch, is lost and retention.ms deletes it
// early.
func TestRollAfterFlushKeepsSealedIndexesRecoverable(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(false, 0, 0)
	now := e.clock.NowMs()
	mustAppend(t, l, simpleBatch(t, 3, now, 100)) // the segment's largest timestamp
	for l.NumSegments() == 1 {
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, simpleBatch(t, 3, now-10*3600*1000, 100))
	}
	rp := l.RecoveryPoint()
	crash(l)
	// The crash loses the sealed segment's unsynced time index.
	if err := os.Truncate(segPath(e.dir, 0, timeIndexSuffix), 0); err != nil {
		t.Fatal(err)
	}

	e.cfg.RetentionMs = 3600 * 1000
	l = e.open(false, rp, 0)
	defer l.Close()
	if ts, _ := l.MaxTimestamp(); ts != now {
		t.Errorf("MaxTimestamp %d, want %d", ts, now)
	}
	l.SetHighWatermark(l.LogEndOffset())
	if n, err := l.DeleteExpired(now + 1000); err != nil || n != 0 {
		t.Errorf("DeleteExpired deleted %d segments (err %v), want none: the first holds a record of now", n, err)
	}
}
