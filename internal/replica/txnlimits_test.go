package replica

import (
	"strings"
	"testing"
)

// Retention deleting the segment where an open transaction started moves the log start
// past the transaction's first offset: the last stable offset follows it at once (Kafka's
// firstUnstableOffset is never below the log start), not only at the next append.
func TestTxnRetentionPastOpenTransactionMovesLSO(t *testing.T) {
	m := roleManager(t, t.TempDir(), 1, nil)
	defer m.Close()
	p := openRolePartition(t, m, 1)
	mustAppendRaw(t, p, txnBatch(t, 7, 0, 0, "open")) // 0, never ended
	wantLSO(t, "transaction open at 0", p, 0)
	big := strings.Repeat("x", 600)
	for i := 0; i < 8; i++ { // several 2 KB segments
		appendValues(t, p, false, big)
	}
	if n := p.Log().NumSegments(); n < 3 {
		t.Fatalf("%d segments, want several", n)
	}
	cfg := p.Log().Config()
	cfg.RetentionMs = 1
	p.Log().Reconfigure(cfg)
	if n, err := p.Log().DeleteExpired(1 << 40); err != nil || n == 0 {
		t.Fatalf("retention deleted %d segments: %v", n, err)
	}
	start := p.Log().LogStartOffset()
	if start == 0 {
		t.Fatal("retention left the log start at 0")
	}
	wantLSO(t, "after retention deleted the transaction's first segment", p, min(start, p.HighWatermark()))
}
