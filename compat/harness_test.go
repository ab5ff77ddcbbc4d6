package compat_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/compat"
	"github.com/gregor-project/gregor/internal/testutil"
)

// The suite's results, written to $GREGOR_COMPAT_REPORT (JSON) when it is set; cmd/compatdoc
// turns that file into docs/compatibility.md.
var report struct {
	sync.Mutex
	compat.Report
}

func TestMain(m *testing.M) {
	code := m.Run()
	javaServer.stop()
	if path := os.Getenv("GREGOR_COMPAT_REPORT"); path != "" {
		report.Lock()
		err := report.WriteFile(path)
		report.Unlock()
		if err != nil {
			fmt.Fprintln(os.Stderr, "compat report:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func recordOutcome(o compat.Outcome) {
	report.Lock()
	defer report.Unlock()
	for i, old := range report.Outcomes {
		if old.Section == o.Section && old.Client == o.Client && old.Step == o.Step {
			report.Outcomes[i] = o
			return
		}
	}
	report.Outcomes = append(report.Outcomes, o)
}

func recordClient(c compat.ClientInfo) {
	report.Lock()
	defer report.Unlock()
	for i, old := range report.Clients {
		if old.Name == c.Name {
			report.Clients[i] = c
			return
		}
	}
	report.Clients = append(report.Clients, c)
}

// errNA marks a step the client has no feature for: the step is recorded as n/a with the
// reason, and the test passes (the broker is not at fault).
var errNA = errors.New("the client has no such feature")

func notSupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errNA, fmt.Sprintf(format, args...))
}

// stepT is the *testing.T of one step: it keeps the first failure message for the report.
type stepT struct {
	*testing.T
	mu    sync.Mutex
	first string
	note  string
	na    string
}

func (s *stepT) keep(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.first == "" {
		s.first = msg
	}
}

func (s *stepT) Errorf(format string, args ...any) {
	s.T.Helper()
	s.keep(fmt.Sprintf(format, args...))
	s.T.Errorf(format, args...)
}

func (s *stepT) Fatalf(format string, args ...any) {
	s.T.Helper()
	s.keep(fmt.Sprintf(format, args...))
	s.T.Fatalf(format, args...)
}

func (s *stepT) Error(args ...any) {
	s.T.Helper()
	s.keep(fmt.Sprint(args...))
	s.T.Error(args...)
}

func (s *stepT) Fatal(args ...any) {
	s.T.Helper()
	s.keep(fmt.Sprint(args...))
	s.T.Fatal(args...)
}

// Note adds a note to the step's outcome (shown in docs/compatibility.md).
func (s *stepT) Note(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.note != "" {
		s.note += "; "
	}
	s.note += fmt.Sprintf(format, args...)
}

// check fails the step on err, or records it as n/a when err is errNA.
func (s *stepT) check(err error, what string) {
	s.T.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, errNA) {
		s.mu.Lock()
		s.na = strings.TrimPrefix(err.Error(), errNA.Error()+": ")
		s.mu.Unlock()
		s.T.Logf("n/a: %s", s.na)
		panic(naPanic{})
	}
	s.Fatalf("%s: %v", what, err)
}

// naPanic ends a step that the client has no feature for (see stepT.check).
type naPanic struct{}

// step runs fn as subtest id and records its outcome in section for client.
func step(t *testing.T, section, client, id string, fn func(t *stepT)) bool {
	t.Helper()
	var st *stepT
	ok := t.Run(id, func(t *testing.T) {
		st = &stepT{T: t}
		defer func() {
			if r := recover(); r != nil {
				if _, na := r.(naPanic); !na {
					panic(r)
				}
			}
		}()
		fn(st)
	})
	if st == nil { // filtered out by -run
		return ok
	}
	o := compat.Outcome{Section: section, Client: client, Step: id, Status: compat.Pass, Note: st.note}
	switch {
	case !ok:
		o.Status = compat.Fail
		o.Note = "not yet passing: " + st.first
	case st.na != "":
		o.Status, o.Note = compat.NA, st.na
	}
	recordOutcome(o)
	return ok
}

// startBroker starts a fresh Gregor for one test: auto-creation off (the suite creates its
// topics, and the unknown-topic step needs it off), no initial rebalance delay, and a
// cleaner that looks for dirty logs every 50 ms (the compacted step waits for it).
func startBroker(t testing.TB) *testutil.Broker {
	t.Helper()
	return testutil.StartBroker(t, "auto.create.topics.enable=false", "group.initial.rebalance.delay.ms=0", "log.cleaner.backoff.ms=50")
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Rec is one record as the suite and its scripts exchange it (JSON: bytes as base64).
type Rec struct {
	Partition int32    `json:"partition"` // produce: -1 lets the client's partitioner choose
	Offset    int64    `json:"offset"`
	Key       []byte   `json:"key"`
	Value     []byte   `json:"value"`
	Headers   []Header `json:"headers"`
	Timestamp int64    `json:"timestamp"` // ms since the epoch
	Codec     string   `json:"codec,omitempty"`
}

// Header is one record header.
type Header struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

func (r Rec) String() string {
	return fmt.Sprintf("p%d@%d key=%q value=%q(%dB) headers=%v ts=%d", r.Partition, r.Offset, r.Key,
		abbrev(r.Value), len(r.Value), r.Headers, r.Timestamp)
}

func (h Header) String() string { return fmt.Sprintf("%s=%q", h.Key, h.Value) }

func abbrev(b []byte) []byte {
	if len(b) > 24 {
		return b[:24]
	}
	return b
}

// id is the record's identity: the value's text up to the first '|', or the key of a record
// with a null value.
func (r Rec) id() string {
	if r.Value == nil {
		return string(r.Key)
	}
	if i := bytes.IndexByte(r.Value, '|'); i >= 0 {
		return string(r.Value[:i])
	}
	return string(r.Value)
}

// genOpts shapes generated records for what a client can set.
type genOpts struct {
	prefix    string // ids are prefix-0000, prefix-0001, …
	n         int
	partition func(i int) int32 // nil: -1 (the client's partitioner)
	tsBase    int64             // 0: no explicit timestamps
	headers   bool
	textOnly  bool // values without bytes that line-based tools cannot carry
	// textHeaders keeps header values printable (kcat prints headers as k=v CSV).
	textHeaders bool
}

// genRecords makes n records with keys (every tenth null), binary values (every byte but
// '\n' and '\t' unless textOnly; every tenth null, a tombstone), a large compressible value
// every 7th record, two headers and increasing timestamps.
func genRecords(o genOpts) []Rec {
	recs := make([]Rec, o.n)
	for i := range recs {
		id := fmt.Sprintf("%s-%04d", o.prefix, i)
		v := []byte(id + "|")
		size := 16 + (i*37)%200
		if i%7 == 3 {
			size = 3000
		}
		for j := 0; j < size; j++ {
			c := byte((i*31 + j*7) % 256)
			if i%7 == 3 {
				c = "compressible "[j%13]
			}
			if o.textOnly {
				c = 'a' + c%26
			}
			if c == '\n' || c == '\t' { // line and key delimiters of kcat's input
				c = 0
			}
			v = append(v, c)
		}
		r := Rec{Partition: -1, Key: []byte(fmt.Sprintf("key-%d", i%5)), Value: v}
		switch i % 10 {
		case 9:
			r.Key = nil // a null key, distinct from an empty one
		case 4:
			r.Key, r.Value = []byte(id), nil // a tombstone: null value, the id in the key
		}
		if o.partition != nil {
			r.Partition = o.partition(i)
		}
		if o.headers {
			r.Headers = []Header{{"id", []byte(id)}, {"client", []byte(o.prefix)}}
			if !o.textOnly && !o.textHeaders {
				r.Headers[0].Value = append(r.Headers[0].Value, 0, 0xff)
			}
		}
		if o.tsBase != 0 {
			r.Timestamp = o.tsBase + int64(i)*1000
		}
		recs[i] = r
	}
	return recs
}

// tsBase is a timestamp base an hour in the past, on a second boundary: recent enough that
// retention keeps the records, and old enough to differ from any produce time.
func tsBase() int64 { return time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli() }

// cmpOpts says which fields a comparison checks.
type cmpOpts struct {
	noTimestamps bool // the writer could not set them, or the format has none
	noHeaders    bool
	noPosition   bool // do not compare partition and offset
}

// diffRec describes how got differs from want, or "" when equal.
func diffRec(want, got Rec, o cmpOpts) string {
	var d []string
	if !bytes.Equal(want.Key, got.Key) || (want.Key == nil) != (got.Key == nil) {
		d = append(d, fmt.Sprintf("key %q != %q", got.Key, want.Key))
	}
	if !bytes.Equal(want.Value, got.Value) || (want.Value == nil) != (got.Value == nil) {
		d = append(d, fmt.Sprintf("value %q(%dB) != %q(%dB)", abbrev(got.Value), len(got.Value), abbrev(want.Value), len(want.Value)))
	}
	if !o.noHeaders && !sameHeaders(want.Headers, got.Headers) {
		d = append(d, fmt.Sprintf("headers %v != %v", got.Headers, want.Headers))
	}
	if !o.noTimestamps && want.Timestamp != got.Timestamp {
		d = append(d, fmt.Sprintf("timestamp %d != %d", got.Timestamp, want.Timestamp))
	}
	if !o.noPosition && (want.Partition != got.Partition || want.Offset != got.Offset) {
		d = append(d, fmt.Sprintf("position p%d@%d != p%d@%d", got.Partition, got.Offset, want.Partition, want.Offset))
	}
	return strings.Join(d, ", ")
}

func sameHeaders(a, b []Header) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !bytes.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

// checkSame fails unless got holds exactly the records of want (matched by id), each equal
// under o, with every partition's records in want's order.
func checkSame(t testing.TB, want, got []Rec, o cmpOpts) {
	t.Helper()
	byID := map[string]Rec{}
	order := map[string]int{}
	for i, w := range want {
		byID[w.id()] = w
		order[w.id()] = i
	}
	seen := map[string]bool{}
	last := map[int32]int{}
	bad := 0
	for _, g := range got {
		id := g.id()
		w, ok := byID[id]
		switch {
		case !ok:
			t.Errorf("unexpected record %v", g)
		case seen[id]:
			t.Errorf("record %s read twice: %v", id, g)
		default:
			if d := diffRec(w, g, o); d != "" {
				t.Errorf("record %s differs: %s", id, d)
			}
			if l, ok := last[g.Partition]; ok && order[id] < l {
				t.Errorf("partition %d out of order: %s after %s", g.Partition, id, want[l].id())
			}
			last[g.Partition] = order[id]
		}
		seen[id] = true
		if t.Failed() {
			if bad++; bad > 5 {
				t.FailNow()
			}
		}
	}
	if len(seen) != len(want) {
		var missing []string
		for _, w := range want {
			if !seen[w.id()] {
				missing = append(missing, w.id())
			}
		}
		if len(missing) > 0 {
			t.Fatalf("%d of %d records not read, e.g. %v", len(missing), len(want), missing[:min(5, len(missing))])
		}
	}
}

// --- franz-go as the reference client for set-up and checks ---

func refClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t testing.TB, addr, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	resp, err := kadm.NewClient(refClient(t, addr)).CreateTopic(ctxFor(t, 30*time.Second), partitions, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// refProduce writes recs with franz-go (explicit partitions; -1 is hashed by key).
func refProduce(t testing.TB, addr, topic string, recs []Rec, opts ...kgo.Opt) []Rec {
	t.Helper()
	cl := refClient(t, addr, append([]kgo.Opt{kgo.RecordPartitioner(kgo.BasicConsistentPartitioner(
		func(string) func(*kgo.Record, int) int {
			hash := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
			return func(r *kgo.Record, n int) int {
				if r.Partition >= 0 {
					return int(r.Partition)
				}
				return hash.Partition(r, n)
			}
		}))}, opts...)...)
	rs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		rs[i] = toKgo(topic, r)
	}
	if err := cl.ProduceSync(ctxFor(t, 30*time.Second), rs...).FirstErr(); err != nil {
		t.Fatalf("reference produce: %v", err)
	}
	out := make([]Rec, len(rs))
	for i, r := range rs {
		out[i] = fromKgo(r)
	}
	return out
}

func toKgo(topic string, r Rec) *kgo.Record {
	kr := &kgo.Record{Topic: topic, Partition: r.Partition, Key: r.Key, Value: r.Value}
	if r.Timestamp != 0 {
		kr.Timestamp = time.UnixMilli(r.Timestamp)
	}
	for _, h := range r.Headers {
		kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return kr
}

var codecNames = map[uint8]string{0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

func fromKgo(r *kgo.Record) Rec {
	out := Rec{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value,
		Timestamp: r.Timestamp.UnixMilli(), Codec: codecNames[r.Attrs.CompressionType()]}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, Header{h.Key, h.Value})
	}
	return out
}

// refRead reads every record of topic from the start with franz-go, until the high
// watermarks that ListOffsets reports at the call.
func refRead(t testing.TB, addr, topic string) []Rec {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	adm := kadm.NewClient(refClient(t, addr))
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	want := 0
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatalf("list start offsets: %v", err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(topic, o.Partition)
		want += int(o.Offset - s.Offset)
	})
	var out []Rec
	if want == 0 {
		return out
	}
	cl := refClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reference read: %d of %d records before timeout", len(out), want)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("reference read: %v", e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, fromKgo(r)) })
	}
	return out
}

// byPartition sorts records by (partition, offset).
func byPartition(recs []Rec) []Rec {
	out := append([]Rec(nil), recs...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return out[i].Offset < out[j].Offset
	})
	return out
}

// apiVersions asks the broker which API versions it serves and records them for the doc.
func recordAPIVersions(t testing.TB, addr string) {
	t.Helper()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctxFor(t, 30*time.Second), refClient(t, addr))
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	var apis []compat.API
	for _, k := range resp.ApiKeys {
		name := kmsg.NameForKey(k.ApiKey)
		apis = append(apis, compat.API{Key: k.ApiKey, Name: name, Min: k.MinVersion, Max: k.MaxVersion})
	}
	report.Lock()
	report.APIs = apis
	report.Unlock()
}

// waitFor polls cond until it holds or ctx ends (a condition with a deadline, never a sleep
// standing in for synchronisation).
func waitFor(ctx context.Context, what string, cond func() bool) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// goModVersion is the version of a module as go.mod requires it (the version this test
// binary was built with).
func goModVersion(path string) string {
	b, err := os.ReadFile(filepath.Join(compatDir(), "..", "go.mod"))
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == path {
			return f[1]
		}
	}
	return "unknown"
}
