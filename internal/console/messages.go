package console

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The message browser reads a window of each chosen partition with a consumer of its own
// (assigned partitions, no group, so it commits nothing): from the newest records, an
// offset or a time, `limit` records a page, or with a key or value filter up to
// maxScan records a partition, keeping the first `limit` that match.

const (
	defaultLimit = 20
	maxLimit     = 500
	maxScan      = 10000
)

// messageRow is one record as shown.
type messageRow struct {
	Partition int32
	Offset    int64
	Time      string
	Key       string
	Value     string
	Headers   []string
	Size      int
}

// browseQuery is the message browser's form.
type browseQuery struct {
	Partition string // "" for all
	From      string // newest, offset, time
	Offset    int64
	Time      string
	Key, Val  string
	Format    string // text, json, hex
	Limit     int
	Pos       map[int32]int64 // explicit starts, from paging
}

func parseBrowse(r *http.Request) (browseQuery, error) {
	q := browseQuery{Partition: r.FormValue("p"), From: r.FormValue("from"), Time: r.FormValue("time"),
		Key: r.FormValue("key"), Val: r.FormValue("value"), Format: r.FormValue("fmt"), Limit: defaultLimit}
	if q.From == "" {
		q.From = "newest"
	}
	if q.Format == "" {
		q.Format = "text"
	}
	if s := r.FormValue("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return q, fmt.Errorf("limit %q: want a positive number", s)
		}
		q.Limit = min(n, maxLimit)
	}
	if s := r.FormValue("offset"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return q, fmt.Errorf("offset %q: %v", s, err)
		}
		q.Offset = n
	}
	if s := r.FormValue("pos"); s != "" {
		q.Pos = map[int32]int64{}
		for _, kv := range strings.Split(s, ",") {
			p, o, ok := strings.Cut(kv, ":")
			pn, err1 := strconv.ParseInt(p, 10, 32)
			on, err2 := strconv.ParseInt(o, 10, 64)
			if !ok || err1 != nil || err2 != nil {
				return q, fmt.Errorf("position %q: want PARTITION:OFFSET", kv)
			}
			q.Pos[int32(pn)] = on
		}
	}
	return q, nil
}

// parseTime reads the time field: RFC 3339, the browser's datetime-local (UTC), or epoch ms.
func parseTime(s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ms, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, fmt.Errorf("time %q: want RFC 3339, YYYY-MM-DDTHH:MM (UTC) or epoch milliseconds", s)
}

func (c *Console) messages(ctx context.Context, r *http.Request, adm *kadm.Client, cl *kgo.Client) view {
	return c.messagesWith(ctx, r, adm, cl, "", r.FormValue("msg"))
}

func (c *Console) messagesWith(ctx context.Context, r *http.Request, adm *kadm.Client, cl *kgo.Client, formErr, msg string) view {
	topic := r.PathValue("topic")
	q, err := parseBrowse(r)
	data := map[string]any{"Topic": topic, "Q": q, "Msg": msg, "Error": formErr}
	fail := func(s string) view {
		data["Error"] = s
		return view{page: "messages", title: "Messages in " + topic, status: http.StatusBadRequest, data: data}
	}
	if err != nil {
		return fail(err.Error())
	}
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return errorView(http.StatusBadGateway, "reading topic %s: %s", topic, errText(err, nil))
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err == kerr.UnknownTopicOrPartition {
		return view{page: "notfound", title: "Topic not found", status: http.StatusNotFound, data: map[string]any{"Kind": "Topic", "Name": topic}}
	}
	var parts []int32
	for _, p := range td.Partitions.Sorted() {
		parts = append(parts, p.Partition)
	}
	data["Partitions"] = parts
	chosen := parts
	if q.Partition != "" {
		n, err := strconv.ParseInt(q.Partition, 10, 32)
		if err != nil || !slices.Contains(parts, int32(n)) {
			return fail(fmt.Sprintf("partition %q: the topic has partitions 0 to %d", q.Partition, len(parts)-1))
		}
		chosen = []int32{int32(n)}
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return fail("listing offsets: " + errText(err, nil))
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return fail("listing offsets: " + errText(err, nil))
	}
	var byTime kadm.ListedOffsets
	if q.From == "time" && q.Pos == nil {
		ms, err := parseTime(q.Time)
		if err != nil {
			return fail(err.Error())
		}
		if byTime, err = adm.ListOffsetsAfterMilli(ctx, ms, topic); err != nil {
			return fail("listing offsets by time: " + errText(err, nil))
		}
	}
	lo, hi := map[int32]int64{}, map[int32]int64{}
	from, stop := map[int32]int64{}, map[int32]int64{}
	filtered := q.Key != "" || q.Val != ""
	for _, p := range chosen {
		s, _ := starts.Lookup(topic, p)
		e, _ := ends.Lookup(topic, p)
		if s.Err != nil || e.Err != nil {
			return fail(fmt.Sprintf("partition %d: %s", p, errText(firstErr(s.Err, e.Err), nil)))
		}
		lo[p], hi[p] = s.Offset, e.Offset
		at := e.Offset
		switch {
		case q.Pos != nil:
			if o, ok := q.Pos[p]; ok {
				at = o
			}
		case q.From == "offset":
			at = q.Offset
		case q.From == "time":
			if t, ok := byTime.Lookup(topic, p); ok && t.Err == nil && t.Offset >= 0 {
				at = t.Offset
			}
		default: // newest
			at = e.Offset - int64(q.Limit)
		}
		at = max(s.Offset, min(e.Offset, at))
		from[p] = at
		n := int64(q.Limit)
		if filtered {
			n = maxScan
		}
		stop[p] = min(e.Offset, at+n)
	}
	recs, err := readRange(ctx, cl, topic, from, stop)
	if err != nil {
		return fail("reading records: " + errText(err, nil))
	}
	var rows []messageRow
	next := map[int32]int64{}
	for p, s := range stop {
		next[p] = s
	}
	for _, rec := range recs {
		if !matches(rec, q.Key, q.Val) {
			continue
		}
		if len(rows) == q.Limit {
			if rec.Offset < next[rec.Partition] {
				next[rec.Partition] = rec.Offset
			}
			continue
		}
		rows = append(rows, renderRecord(rec, q.Format))
	}
	prev := map[int32]int64{}
	for p, f := range from {
		prev[p] = max(lo[p], f-int64(q.Limit))
	}
	data["Rows"], data["Filtered"] = rows, filtered
	data["Newer"], data["Older"] = c.pageLink(topic, q, next), c.pageLink(topic, q, prev)
	data["AtEnd"], data["AtStart"] = equalPos(next, hi), equalPos(from, lo)
	return view{page: "messages", title: "Messages in " + topic, data: data}
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func equalPos(a, b map[int32]int64) bool {
	for p, o := range a {
		if b[p] != o {
			return false
		}
	}
	return true
}

// pageLink is the browser's address starting at pos.
func (c *Console) pageLink(topic string, q browseQuery, pos map[int32]int64) string {
	ps := make([]int32, 0, len(pos))
	for p := range pos {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	var s []string
	for _, p := range ps {
		s = append(s, fmt.Sprintf("%d:%d", p, pos[p]))
	}
	v := url.Values{"pos": {strings.Join(s, ",")}, "fmt": {q.Format}, "limit": {strconv.Itoa(q.Limit)}}
	if q.Partition != "" {
		v.Set("p", q.Partition)
	}
	if q.Key != "" {
		v.Set("key", q.Key)
	}
	if q.Val != "" {
		v.Set("value", q.Val)
	}
	return c.cfg.Prefix + "/topics/" + url.PathEscape(topic) + "/messages?" + v.Encode()
}

// readRange reads [from[p], stop[p]) of each partition with a consumer of its own, sorted by
// partition then offset. Transaction markers and aborted records are skipped as a
// read_uncommitted consumer skips them, so a range may hold fewer records than offsets.
func readRange(ctx context.Context, base *kgo.Client, topic string, from, stop map[int32]int64) ([]*kgo.Record, error) {
	assign := map[int32]kgo.Offset{}
	for p, f := range from {
		if f < stop[p] {
			assign[p] = kgo.NewOffset().At(f)
		}
	}
	if len(assign) == 0 {
		return nil, nil
	}
	opts := append(base.Opts(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}), kgo.FetchMaxWait(500*time.Millisecond))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	reached := map[int32]int64{} // next offset to read, per partition
	pending := len(assign)
	var out []*kgo.Record
	for pending > 0 && ctx.Err() == nil {
		// A range ending in transaction markers has no record at its last offsets: a poll
		// that brings nothing for a while ends the read.
		pctx, pcancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		idle := pctx.Err() != nil && fs.NumRecords() == 0
		pcancel()
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = err
			}
		})
		if ferr != nil {
			return out, ferr
		}
		fs.EachRecord(func(rec *kgo.Record) {
			p := rec.Partition
			if reached[p] >= stop[p] {
				return
			}
			if rec.Offset < stop[p] {
				out = append(out, rec)
			}
			reached[p] = rec.Offset + 1
			if reached[p] >= stop[p] {
				pending--
				cl.PauseFetchPartitions(map[string][]int32{topic: {p}})
			}
		})
		if idle {
			break
		}
	}
	slices.SortFunc(out, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return out, nil
}

// matches says whether rec's key and value contain the filters.
func matches(rec *kgo.Record, key, val string) bool {
	return (key == "" || bytes.Contains(rec.Key, []byte(key))) && (val == "" || bytes.Contains(rec.Value, []byte(val)))
}

// renderRecord shows rec's key, value and headers in format.
func renderRecord(rec *kgo.Record, format string) messageRow {
	row := messageRow{Partition: rec.Partition, Offset: rec.Offset, Time: rec.Timestamp.UTC().Format("2006-01-02 15:04:05.000"),
		Key: decode(rec.Key, format), Value: decode(rec.Value, format), Size: len(rec.Key) + len(rec.Value)}
	if rec.Key == nil {
		row.Key = "null"
	}
	if rec.Value == nil {
		row.Value = "null"
	}
	for _, h := range rec.Headers {
		row.Headers = append(row.Headers, h.Key+"="+decode(h.Value, "text"))
	}
	return row
}

// decode renders b as text (hex when it is not UTF-8), pretty JSON (text when it is not
// JSON) or a hex dump.
func decode(b []byte, format string) string {
	switch format {
	case "hex":
		return strings.TrimRight(hex.Dump(b), "\n")
	case "json":
		var out bytes.Buffer
		if json.Indent(&out, b, "", "  ") == nil {
			return out.String()
		}
	}
	if !utf8.Valid(b) {
		return strings.TrimRight(hex.Dump(b), "\n")
	}
	return string(b)
}

// produce sends one record from the form: key, value, headers (KEY=VALUE lines), and a
// partition (empty: Kafka's default partitioner, murmur2 of the key).
func (c *Console) produce(ctx context.Context, r *http.Request, adm *kadm.Client, cl *kgo.Client) view {
	topic := r.PathValue("topic")
	rec := &kgo.Record{Topic: topic, Value: []byte(r.FormValue("value"))}
	if k := r.FormValue("key"); k != "" {
		rec.Key = []byte(k)
	}
	for _, line := range strings.Split(r.FormValue("headers"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return c.messagesWith(ctx, r, adm, cl, "header "+strconv.Quote(line)+": want KEY=VALUE", "")
		}
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	producer := cl
	if s := strings.TrimSpace(r.FormValue("partition")); s != "" {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return c.messagesWith(ctx, r, adm, cl, "partition: "+err.Error(), "")
		}
		rec.Partition = int32(n)
		pc, err := kgo.NewClient(append(cl.Opts(), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
		if err != nil {
			return c.messagesWith(ctx, r, adm, cl, err.Error(), "")
		}
		defer pc.Close()
		producer = pc
	}
	res := producer.ProduceSync(ctx, rec)
	if err := res.FirstErr(); err != nil {
		return c.messagesWith(ctx, r, adm, cl, "producing: "+errText(err, nil), "")
	}
	msg := fmt.Sprintf("produced to partition %d at offset %d", rec.Partition, rec.Offset)
	return view{redirect: "/topics/" + url.PathEscape(topic) + "/messages?msg=" + url.QueryEscape(msg)}
}
