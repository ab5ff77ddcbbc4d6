package storage

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/gregor-project/gregor/internal/batch"
)

// txnWriter appends plain and transactional batches and markers to a log as the replica
// layer would (the markers' aborted transactions go to the transaction index), and keeps the
// model of what a read_committed consumer must see after cleaning: the latest committed value
// of each key.
type txnWriter struct {
	t     testing.TB
	l     *Log
	clock *testClock
	open  map[int64]int64 // producer -> first offset of its open transaction
	buf   map[int64][]kvAt
	// latest committed record of each key (by offset); aborted holds the values written by
	// aborted transactions.
	latest  map[string]kvAt
	aborted map[string]bool
	entries []AbortedTxn
}

type kvAt struct {
	off   int64
	value string
}

func newTxnWriter(t testing.TB, l *Log, clock *testClock) *txnWriter {
	return &txnWriter{t: t, l: l, clock: clock, open: map[int64]int64{}, buf: map[int64][]kvAt{},
		latest: map[string]kvAt{}, aborted: map[string]bool{}}
}

// txnBatch builds a batch of records of producer pid (epoch 1), transactional when txn is
// set.
func txnBatch(t testing.TB, ts int64, pid int64, txn bool, recs ...kv) []byte {
	t.Helper()
	rs := make([]batch.Record, len(recs))
	for i, r := range recs {
		rs[i] = batch.Record{OffsetDelta: int32(i), Key: []byte(r.key), Value: r.value}
	}
	h := batch.Header{PartitionLeaderEpoch: -1, LastOffsetDelta: int32(len(recs) - 1), BaseTimestamp: ts,
		MaxTimestamp: ts, ProducerID: pid, ProducerEpoch: 1, BaseSequence: -1}
	if txn {
		h.Attributes |= batch.AttrTransactional
	}
	b, err := batch.Build(h, rs, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// markerBatch builds a COMMIT or ABORT marker of pid as the replica layer writes it.
func markerBatch(t testing.TB, ts int64, pid int64, commit bool) []byte {
	t.Helper()
	typ := uint16(0)
	if commit {
		typ = 1
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), typ)
	value := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), 5)
	h := batch.Header{PartitionLeaderEpoch: -1, Attributes: batch.AttrControl | batch.AttrTransactional,
		BaseTimestamp: ts, MaxTimestamp: ts, ProducerID: pid, ProducerEpoch: 1, BaseSequence: -1}
	b, err := batch.Build(h, []batch.Record{{Key: key, Value: value}}, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (w *txnWriter) plain(key, value string) int64 {
	off := mustAppend(w.t, w.l, txnBatch(w.t, w.clock.NowMs(), -1, false, kv{key, val(value)})).FirstOffset
	if w.latest[key].off <= off {
		w.latest[key] = kvAt{off, value}
	}
	return off
}

// write adds a transactional record of pid, starting its transaction if none is open.
func (w *txnWriter) write(pid int64, key, value string) int64 {
	off := mustAppend(w.t, w.l, txnBatch(w.t, w.clock.NowMs(), pid, true, kv{key, val(value)})).FirstOffset
	if _, ok := w.open[pid]; !ok {
		w.open[pid] = off
	}
	w.buf[pid] = append(w.buf[pid], kvAt{off, key + "=" + value})
	return off
}

// end writes pid's marker: a COMMIT makes its records committed, an ABORT adds the
// aborted transaction to the index.
func (w *txnWriter) end(pid int64, commit bool) int64 {
	off := mustAppend(w.t, w.l, markerBatch(w.t, w.clock.NowMs(), pid, commit)).FirstOffset
	first, ok := w.open[pid]
	delete(w.open, pid)
	for _, r := range w.buf[pid] {
		key, value, _ := strings.Cut(r.value, "=")
		if !commit {
			w.aborted[value] = true
		} else if w.latest[key].off <= r.off {
			w.latest[key] = kvAt{r.off, value}
		}
	}
	delete(w.buf, pid)
	if !commit && ok {
		lso := off + 1
		for _, f := range w.open {
			lso = min(lso, f)
		}
		a := AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: off, LastStableOffset: lso}
		if err := w.l.AppendAbortedTxn(a); err != nil {
			w.t.Fatal(err)
		}
		w.entries = append(w.entries, a)
	}
	return off
}

// logBatch is a batch read back with its records.
type logBatch struct {
	h    batch.Header
	recs []batch.Record
}

func readLogBatches(t testing.TB, l *Log) []logBatch {
	t.Helper()
	var out []logBatch
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		s, err := l.Read(off, 1<<20, math.MaxInt64, true)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if s.Size == 0 {
			t.Fatalf("Read(%d) is empty below the log end offset %d", off, l.LogEndOffset())
		}
		b := make([]byte, s.Size)
		if _, err := s.File.ReadAt(b, s.Pos); err != nil {
			t.Fatal(err)
		}
		s.Release()
		for len(b) > 0 {
			h, err := batch.ParseHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			one := b[:h.Size()]
			if _, err := batch.CheckCRC(one); err != nil {
				t.Fatal(err)
			}
			recs, err := batch.Records(one)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, logBatch{h, recs})
			off = h.LastOffset() + 1
			b = b[h.Size():]
		}
	}
	return out
}

func isAbortMarker(b logBatch) bool {
	return b.h.IsControl() && len(b.recs) == 1 && binary.BigEndian.Uint16(b.recs[0].Key[2:]) == 0
}

// views returns the last value of each key as a read_uncommitted consumer sees the log and
// as a read_committed one does (dropping the records of the aborted transactions the
// transaction index names, as Kafka's consumer does), and every data value in the log.
func views(t testing.TB, l *Log) (uncommitted, committed map[string]string, values []string) {
	t.Helper()
	aborted, err := l.AbortedTxns(l.LogStartOffset(), l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	uncommitted, committed = map[string]string{}, map[string]string{}
	inAbort := map[int64]bool{}
	for _, b := range readLogBatches(t, l) {
		for len(aborted) > 0 && aborted[0].FirstOffset <= b.h.LastOffset() {
			inAbort[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		if b.h.IsControl() {
			if isAbortMarker(b) {
				delete(inAbort, b.h.ProducerID)
			}
			continue
		}
		skip := b.h.IsTransactional() && inAbort[b.h.ProducerID]
		for _, r := range b.recs {
			values = append(values, string(r.Value))
			uncommitted[string(r.Key)] = string(r.Value)
			if !skip {
				committed[string(r.Key)] = string(r.Value)
			}
		}
	}
	return uncommitted, committed, values
}

func (w *txnWriter) want() map[string]string {
	out := map[string]string{}
	for k, r := range w.latest {
		out[k] = r.value
	}
	return out
}

// checkTxnCleaned checks that both consumers see exactly the latest committed value of every
// key and that no aborted value is left.
func (w *txnWriter) checkTxnCleaned(what string) {
	w.t.Helper()
	unc, com, values := views(w.t, w.l)
	if want := w.want(); !reflect.DeepEqual(unc, want) || !reflect.DeepEqual(com, want) {
		w.t.Fatalf("%s:\nread_uncommitted %v\nread_committed   %v\nwant             %v", what, unc, com, want)
	}
	for _, v := range values {
		if w.aborted[v] {
			w.t.Fatalf("%s: aborted value %q survived", what, v)
		}
	}
}

// cleanTxnPasses runs n passes at the clock's time, each from where the last stopped.
func cleanTxnPasses(t testing.TB, e *logEnv, l *Log, n int, retention int64, opt CleanOptions) CleanResult {
	t.Helper()
	var res CleanResult
	first := int64(0)
	for range n {
		opt.FirstDirtyOffset, opt.NowMs, opt.DeleteRetentionMs = first, e.clock.NowMs(), retention
		var err error
		if res, err = l.Clean(newMap(t, 200), opt); err != nil {
			t.Fatal(err)
		}
		first = res.EndOffset
	}
	return res
}

func fillerTo(t testing.TB, w *txnWriter, segments int) {
	t.Helper()
	for n := w.l.NumSegments() + segments; w.l.NumSegments() < n; {
		w.plain("z", fmt.Sprintf("z-%d-%s", w.l.LogEndOffset(), strings.Repeat("f", 60)))
	}
}

// TestCleanTxnMarkersAndAbortedRecords: the records of an aborted transaction are removed at
// the first pass and never chosen as a key's value; each marker stays while its transaction's
// batches are in the log, is then stamped with a delete horizon, and goes (with its index
// entry) at the first pass at or after it.
func TestCleanTxnMarkersAndAbortedRecords(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	defer func() { l.Close() }()
	w := newTxnWriter(t, l, e.clock)
	w.plain("a", "p0")        // 0
	w.write(1, "a", "x1")     // 1: aborted
	abort1 := w.end(1, false) // 2
	w.write(2, "b", "c3")     // 3: committed, then overwritten
	commit2 := w.end(2, true) // 4
	w.plain("b", "p5")        // 5
	w.write(3, "c", "c6")     // 6: committed, stays
	commit3 := w.end(3, true) // 7
	w.plain("d", "p8")        // 8
	w.write(4, "d", "x9")     // 9: aborted, last of "d"
	abort4 := w.end(4, false) // 10
	fillerTo(t, w, 2)
	const retention = 1000
	t0 := e.clock.NowMs()

	markers := func() map[int64]batch.Header {
		out := map[int64]batch.Header{}
		for _, b := range readLogBatches(t, l) {
			if b.h.IsControl() {
				out[b.h.BaseOffset] = b.h
			}
		}
		return out
	}
	stamped := func(h batch.Header) int64 {
		ms, ok := h.DeleteHorizonMs()
		if !ok {
			return -1
		}
		return ms
	}

	// Pass 1: the aborted records go; every marker stays unstamped (its batches were read).
	cleanTxnPasses(t, e, l, 1, retention, CleanOptions{})
	w.checkTxnCleaned("pass 1")
	ms := markers()
	for _, off := range []int64{abort1, commit2, commit3, abort4} {
		if h, ok := ms[off]; !ok || stamped(h) >= 0 {
			t.Fatalf("pass 1: marker at %d: %v, horizon %d; want kept unstamped", off, ok, stamped(h))
		}
	}
	if got := mustAborted(t, l, 0, 1<<40); !reflect.DeepEqual(got, w.entries) {
		t.Fatalf("pass 1: index %v, want %v", got, w.entries)
	}

	// Pass 2: the aborts' and producer 2's batches are gone: their markers are stamped with a
	// horizon; producer 3's batch is there, so its marker is not.
	res := cleanTxnPasses(t, e, l, 1, retention, CleanOptions{})
	w.checkTxnCleaned("pass 2")
	ms = markers()
	for _, off := range []int64{abort1, commit2, abort4} {
		if h, ok := ms[off]; !ok || stamped(h) != t0+retention {
			t.Fatalf("pass 2: marker at %d: %v, horizon %d; want kept with horizon %d", off, ok, stamped(h), t0+retention)
		}
	}
	if h := ms[commit3]; stamped(h) >= 0 {
		t.Fatalf("pass 2: producer 3's marker stamped while its batch is in the log")
	}
	if res.DeleteHorizonMs != t0+retention {
		t.Fatalf("pass 2: DeleteHorizonMs %d, want %d", res.DeleteHorizonMs, t0+retention)
	}
	if got := mustAborted(t, l, 0, 1<<40); !reflect.DeepEqual(got, w.entries) {
		t.Fatalf("pass 2: index %v, want %v (the markers are still there)", got, w.entries)
	}

	// Just before the horizon nothing changes.
	e.clock.Advance(retention - 1)
	cleanTxnPasses(t, e, l, 1, retention, CleanOptions{})
	if got := markers(); len(got) != 4 {
		t.Fatalf("before the horizon: markers %v", got)
	}
	// At the horizon the three markers go, and the index entries with them.
	e.clock.Advance(1)
	cleanTxnPasses(t, e, l, 1, retention, CleanOptions{})
	w.checkTxnCleaned("after the horizon")
	ms = markers()
	if _, ok := ms[commit3]; len(ms) != 1 || !ok {
		t.Fatalf("after the horizon: markers %v, want only producer 3's at %d", ms, commit3)
	}
	if got := mustAborted(t, l, 0, 1<<40); len(got) != 0 {
		t.Fatalf("after the horizon: index %v, want empty", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = e.open(true, 0, 0)
	w.l = l
	w.checkTxnCleaned("reopened")
	if got := mustAborted(t, l, 0, 1<<40); len(got) != 0 {
		t.Fatalf("reopened: index %v, want empty", got)
	}
}

// TestCleanOffsetMapSkipsAbortedRecords: an aborted record in the dirty part never displaces
// the committed value of its key in the clean part (a compacted __consumer_offsets must not
// lose a plain commit to an aborted transactional one).
func TestCleanOffsetMapSkipsAbortedRecords(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	defer l.Close()
	w := newTxnWriter(t, l, e.clock)
	w.plain("g", "committed")
	fillerTo(t, w, 1)
	res := cleanTxnPasses(t, e, l, 1, 1000, CleanOptions{})
	w.write(7, "g", "aborted")
	w.end(7, false)
	fillerTo(t, w, 2)
	opt := CleanOptions{FirstDirtyOffset: res.EndOffset, NowMs: e.clock.NowMs(), DeleteRetentionMs: 1000}
	if _, err := l.Clean(newMap(t, 200), opt); err != nil {
		t.Fatal(err)
	}
	w.checkTxnCleaned("after cleaning the dirty part")
}

// TestCleanStopsAtLastStableOffset: nothing at or past the last stable offset is cleaned, so
// an open transaction's records never displace a committed value.
func TestCleanStopsAtLastStableOffset(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	defer l.Close()
	w := newTxnWriter(t, l, e.clock)
	w.plain("a", "p0")
	fillerTo(t, w, 1)
	first := w.write(5, "a", "open") // the transaction stays open
	fillerTo(t, w, 3)
	l.SetLastStableOffset(first)
	ltc, err := l.CleanableState(CompactionConfig{}, -1, -1, e.clock.NowMs())
	if err != nil {
		t.Fatal(err)
	}
	if ltc.FirstUncleanableOffset > first {
		t.Fatalf("first uncleanable offset %d, past the last stable offset %d", ltc.FirstUncleanableOffset, first)
	}
	res, err := l.Clean(newMap(t, 200), CleanOptions{NowMs: e.clock.NowMs(), DeleteRetentionMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if res.EndOffset > first {
		t.Fatalf("cleaned up to %d, past the last stable offset %d", res.EndOffset, first)
	}
	unc, com, _ := views(t, l)
	if unc["a"] != "open" || com["a"] != "open" {
		t.Fatalf("the open transaction's record is gone: %v / %v", unc, com)
	}
	found := false
	for _, b := range readLogBatches(t, l) {
		for _, r := range b.recs {
			found = found || string(r.Value) == "p0"
		}
	}
	if !found {
		t.Fatalf("the committed value of a was cleaned away by an open transaction's record")
	}
	// Once the transaction aborts and the LSO passes it, it is cleaned: a keeps p0.
	w.end(5, false)
	fillerTo(t, w, 2)
	l.SetLastStableOffset(l.LogEndOffset())
	cleanTxnPasses(t, e, l, 2, 1000, CleanOptions{})
	unc, com, _ = views(t, l)
	if unc["a"] != "p0" || com["a"] != "p0" {
		t.Fatalf("after the abort: a is %q / %q, want p0", unc["a"], com["a"])
	}
}

// TestCleanKeepsAbortedLastBatchOfProducer: an aborted batch that is its producer's last is
// kept empty (its sequence and epoch fence the producer), and so its marker stays too.
func TestCleanKeepsAbortedLastBatchOfProducer(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	defer l.Close()
	w := newTxnWriter(t, l, e.clock)
	w.plain("a", "p0")
	last := w.write(9, "a", "x")
	marker := w.end(9, false)
	fillerTo(t, w, 2)
	opt := CleanOptions{ActiveProducers: map[int64]int64{9: last}}
	cleanTxnPasses(t, e, l, 2, 1000, opt)
	e.clock.Advance(2000)
	cleanTxnPasses(t, e, l, 2, 1000, opt)
	w.checkTxnCleaned("cleaned")
	var gotBatch, gotMarker bool
	for _, b := range readLogBatches(t, l) {
		if b.h.BaseOffset == last {
			gotBatch = len(b.recs) == 0 && b.h.ProducerID == 9 && b.h.IsTransactional()
		}
		gotMarker = gotMarker || (b.h.BaseOffset == marker && b.h.IsControl())
	}
	if !gotBatch || !gotMarker {
		t.Fatalf("producer 9's last batch kept empty: %v, its marker kept: %v", gotBatch, gotMarker)
	}
	if got := mustAborted(t, l, 0, 1<<40); !reflect.DeepEqual(got, w.entries) {
		t.Fatalf("index %v, want %v", got, w.entries)
	}
}

// TestCleanTxnRandomized: random plain and transactional writes of few keys, commits and
// aborts by a few producers, cleaned in passes before and after the markers' horizon: both
// consumers see exactly the latest committed value of every key, no aborted value survives,
// a marker is left only with a batch of its transaction before it, and the index names
// exactly the ABORT markers left.
func TestCleanTxnRandomized(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			cfg := testCfg()
			cfg.SegmentBytes = int64(1024 + rng.IntN(4096))
			e := newEnv(t, cfg)
			l := e.open(true, 0, 0)
			defer l.Close()
			w := newTxnWriter(t, l, e.clock)
			for i := range 400 {
				k := fmt.Sprintf("k%d", rng.IntN(8))
				pid := int64(1 + rng.IntN(3))
				switch r := rng.IntN(10); {
				case r < 3:
					w.plain(k, fmt.Sprintf("%s-p%d", k, i))
				case r < 8:
					w.write(pid, k, fmt.Sprintf("%s-t%d", k, i))
				default:
					if _, ok := w.open[pid]; ok {
						w.end(pid, rng.IntN(2) == 0)
					}
				}
			}
			for pid := range w.open {
				w.end(pid, rng.IntN(2) == 0)
			}
			fillerTo(t, w, 2)
			cleanTxnPasses(t, e, l, 1+rng.IntN(3), 1000, CleanOptions{})
			w.checkTxnCleaned("before the horizon")
			// Stamps the rest, then removes every stamped marker (a batch kept empty as the
			// last of its group in one pass goes at a later one, its marker after it).
			for range 4 {
				e.clock.Advance(1000)
				cleanTxnPasses(t, e, l, 2, 1000, CleanOptions{})
				w.checkTxnCleaned("after a horizon")
			}
			bases := map[int64]bool{}
			l.mu.RLock()
			for _, s := range l.mu.segments {
				bases[s.baseOffset] = true
			}
			l.mu.RUnlock()
			// endsGroup: no batch follows b in its segment (such a batch is kept, empty if
			// need be, so that the cleaned segment ends where the old ones did).
			bs := readLogBatches(t, l)
			endsGroup := func(i int) bool {
				if i+1 == len(bs) {
					return true
				}
				for o := bs[i].h.LastOffset() + 1; o <= bs[i+1].h.BaseOffset; o++ {
					if bases[o] {
						return true
					}
				}
				return false
			}

			// A marker is left only after a batch of its producer since its previous marker.
			seen := map[int64]bool{}
			var aborts []int64
			for i, b := range bs {
				if !b.h.IsControl() {
					if b.h.IsTransactional() {
						seen[b.h.ProducerID] = true
					}
					continue
				}
				if !seen[b.h.ProducerID] && !endsGroup(i) {
					for _, x := range bs[max(i-3, 0):min(i+3, len(bs))] {
						t.Logf("batch %d..%d pid %d control %v txn %v recs %d horizon %v", x.h.BaseOffset, x.h.LastOffset(), x.h.ProducerID, x.h.IsControl(), x.h.IsTransactional(), len(x.recs), x.h.Attributes&batch.AttrDeleteHorizon != 0)
					}
					t.Logf("bases %v", bases)
					t.Fatalf("marker of producer %d at %d left with no batch of its transaction", b.h.ProducerID, b.h.BaseOffset)
				}
				delete(seen, b.h.ProducerID)
				if isAbortMarker(b) {
					aborts = append(aborts, b.h.BaseOffset)
				}
			}
			var idx []int64
			for _, a := range mustAborted(t, l, 0, 1<<40) {
				idx = append(idx, a.LastOffset)
			}
			if !reflect.DeepEqual(idx, aborts) {
				t.Fatalf("index entries at %v, ABORT markers at %v", idx, aborts)
			}
		})
	}
}
