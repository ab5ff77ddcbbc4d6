package compat_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/gregor-project/gregor/compat"
	"github.com/gregor-project/gregor/internal/testutil"
)

// Client is one Kafka client under test, driven through the scenario of issue 6. Every
// method talks to the broker at addr with the client's ordinary configuration (the few
// settings a method changes say why). A method returns an error wrapping errNA when the
// client has no such feature.
type Client interface {
	Info() compat.ClientInfo
	Caps() Caps
	// Admin creates topic with 3 partitions and retention.ms=86400000, describes it, lists
	// topics, deletes it and lists again until it is gone.
	Admin(ctx context.Context, addr, topic string) (AdminResult, error)
	// Produce writes recs (Partition -1: the client's partitioner) with codec, waiting for
	// every acknowledgement.
	Produce(ctx context.Context, addr, topic, codec string, recs []Rec) error
	// Consume reads n records of topic from the beginning of every partition.
	Consume(ctx context.Context, addr, topic string, n int) ([]Rec, error)
	// Group starts two members of group consuming topic, waits until the partitions are
	// split between them, then produces recs (explicit partitions), consumes until all are
	// read, commits and closes both members.
	Group(ctx context.Context, addr, topic, group string, recs []Rec) ([2]Member, error)
	// SeekOffset reads n records of one partition from offset on.
	SeekOffset(ctx context.Context, addr, topic string, partition int32, offset int64, n int) ([]Rec, error)
	// SeekTime reads n records of one partition from the first with a timestamp >= ts.
	SeekTime(ctx context.Context, addr, topic string, partition int32, ts int64, n int) ([]Rec, error)
	// ProduceUnknown produces one record to a topic that does not exist.
	ProduceUnknown(ctx context.Context, addr, topic string) error
	// OutOfRange starts reading a partition whose log starts at an offset above low and ends
	// below high at one of them (the client's choice), with reset policy "earliest" where
	// the client has one, and reads n records.
	OutOfRange(ctx context.Context, addr, topic string, partition int32, low, high int64, n int) ([]Rec, error)
	// ProduceTooLarge produces rec uncompressed to a topic whose max.message.bytes it exceeds.
	ProduceTooLarge(ctx context.Context, addr, topic string, rec Rec) error
	// Expect is what the client reports against Kafka for an error step: "unknown-topic",
	// "out-of-range" or "too-large".
	Expect(kind string) Expectation
}

// Caps is what a client can set when producing.
type Caps struct {
	Codecs     []string
	Timestamps bool // explicit record timestamps
	Headers    bool
	RunHeaders bool // headers are set per produce call, the same for all its records
	TextOnly   bool // values must avoid bytes a line-based tool cannot carry
	// SkipsCompression: the client sends a batch uncompressed when the codec would not
	// shrink it (librdkafka and kafka-python do), so some records may be stored uncompressed.
	SkipsCompression bool
	Note             string
}

// Expectation is an error step's expected outcome for one client.
type Expectation struct {
	Desc  string
	Match func(error) bool
	Reset bool // out-of-range: the client resets to the log start instead of failing
}

// AdminResult is what the admin step observed.
type AdminResult struct {
	Partitions      int
	Config          string // retention.ms as described
	Listed          bool
	GoneAfterDelete bool
}

// Member is what one group member was assigned and read.
type Member struct {
	Assigned []int32
	Records  []Rec
}

const (
	adminTopic     = "admin-topic"
	retentionValue = "86400000"
)

// runScenario runs every step of the scenario for c against a fresh broker.
func runScenario(t *testing.T, c Client) {
	info := c.Info()
	recordClient(info)
	caps := c.Caps()
	name := info.Name
	sc := compat.SectionScenario
	b := startBroker(t)

	step(t, sc, name, "admin", func(t *stepT) {
		res, err := c.Admin(ctxFor(t, time.Minute), b.Addr(), adminTopic)
		t.check(err, "admin")
		if res.Partitions != 3 {
			t.Errorf("described %d partitions, want 3", res.Partitions)
		}
		if res.Config != retentionValue {
			t.Errorf("described retention.ms=%q, want %s", res.Config, retentionValue)
		}
		if !res.Listed {
			t.Errorf("created topic not listed")
		}
		if !res.GoneAfterDelete {
			t.Errorf("deleted topic still listed")
		}
	})

	// produce and consume share the topic and the reference read.
	var ref []Rec
	step(t, sc, name, "produce", func(t *stepT) {
		createTopic(t, b.Addr(), "scenario", 3, nil)
		var all []Rec
		base := tsBase()
		for _, codec := range caps.Codecs {
			o := genOpts{prefix: codec, n: 20, headers: caps.Headers, textOnly: caps.TextOnly}
			if caps.Timestamps {
				o.tsBase = base + int64(len(all))*1000
			}
			recs := genRecords(o)
			for i := range recs {
				recs[i].Codec = codec
				if caps.RunHeaders {
					recs[i].Headers = []Header{{"codec", []byte(codec)}, {"client", []byte(name)}}
				}
			}
			t.check(c.Produce(ctxFor(t, time.Minute), b.Addr(), "scenario", codec, recs), "produce "+codec)
			all = append(all, recs...)
		}
		ref = refRead(t, b.Addr(), "scenario")
		checkSame(t, all, ref, cmpOpts{noTimestamps: !caps.Timestamps, noPosition: true})
		compressed := map[string]bool{}
		for _, r := range ref {
			want := strings.SplitN(r.id(), "-", 2)[0]
			if r.Codec == want {
				compressed[want] = true
			} else if !caps.SkipsCompression || r.Codec != "none" {
				t.Errorf("record %s stored with codec %s, produced with %s", r.id(), r.Codec, want)
			}
		}
		for _, codec := range caps.Codecs {
			if !compressed[codec] {
				t.Errorf("no record stored with codec %s", codec)
			}
		}
		t.Note("codecs: %s", strings.Join(caps.Codecs, ", "))
		if caps.Note != "" {
			t.Note("%s", caps.Note)
		}
	})

	step(t, sc, name, "consume", func(t *stepT) {
		if len(ref) == 0 {
			t.Fatal("nothing was produced")
		}
		got, err := c.Consume(ctxFor(t, time.Minute), b.Addr(), "scenario", len(ref))
		t.check(err, "consume")
		checkSame(t, ref, got, cmpOpts{})
	})

	step(t, sc, name, "group", func(t *stepT) {
		groupStep(t, c, &b)
	})

	var seekRef []Rec
	seekTopic := func(t testing.TB) []Rec {
		if seekRef == nil {
			seekRef = writeSeekTopic(t, b.Addr())
		}
		return seekRef
	}
	step(t, sc, name, "seek-offset", func(t *stepT) {
		ref := seekTopic(t)
		got, err := c.SeekOffset(ctxFor(t, time.Minute), b.Addr(), "seek", 1, 7, 5)
		t.check(err, "seek to offset")
		checkSame(t, ref[7:12], firstN(got, 5), cmpOpts{})
	})

	step(t, sc, name, "seek-time", func(t *stepT) {
		ref := seekTopic(t)
		got, err := c.SeekTime(ctxFor(t, time.Minute), b.Addr(), "seek", 1, ref[7].Timestamp-500, 5)
		t.check(err, "seek to timestamp")
		checkSame(t, ref[7:12], firstN(got, 5), cmpOpts{})
	})

	step(t, sc, name, "compacted", func(t *stepT) {
		ref := compactedTopic(t, b.Addr())
		if start := logStart(t, b.Addr(), "compacted"); start != 0 || ref[0].Offset == 0 {
			t.Fatalf("log start %d, first surviving offset %d: want a log from 0 whose first records were cleaned away", start, ref[0].Offset)
		}
		got, err := c.Consume(ctxFor(t, time.Minute), b.Addr(), "compacted", len(ref))
		t.check(err, "consume a compacted topic")
		checkSame(t, ref, got, cmpOpts{})
		t.Note("%d records surviving at offsets %d..%d", len(ref), ref[0].Offset, ref[len(ref)-1].Offset)
	})

	step(t, sc, name, "err-unknown-topic", func(t *stepT) {
		exp := c.Expect("unknown-topic")
		err := c.ProduceUnknown(ctxFor(t, time.Minute), b.Addr(), "no-such-topic")
		t.check(errNAOnly(err), "produce to unknown topic")
		if err == nil {
			t.Fatalf("produce to an unknown topic succeeded, want %s", exp.Desc)
		}
		if !exp.Match(err) {
			t.Fatalf("produce to an unknown topic: got %v, want %s", err, exp.Desc)
		}
		topics, lerr := kadm.NewClient(refClient(t, b.Addr())).ListTopics(ctxFor(t, 30*time.Second))
		if lerr != nil {
			t.Fatal(lerr)
		}
		if topics.Has("no-such-topic") {
			t.Fatal("the topic was created with auto.create.topics.enable=false")
		}
		t.Note("%s", exp.Desc)
	})

	step(t, sc, name, "err-out-of-range", func(t *stepT) {
		ref := rangeTopic(t, b.Addr())
		exp := c.Expect("out-of-range")
		got, err := c.OutOfRange(ctxFor(t, time.Minute), b.Addr(), "range", 0, 1, 1000, 3)
		t.check(errNAOnly(err), "out of range")
		if exp.Reset {
			if err != nil {
				t.Fatalf("out-of-range read: %v, want a reset to the log start", err)
			}
			checkSame(t, ref[:3], firstN(got, 3), cmpOpts{})
		} else if err == nil || !exp.Match(err) {
			t.Fatalf("out-of-range read: got %v (%d records), want %s", err, len(got), exp.Desc)
		}
		t.Note("%s", exp.Desc)
	})

	step(t, sc, name, "err-too-large", func(t *stepT) {
		max := "2048"
		createTopic(t, b.Addr(), "large", 1, map[string]*string{"max.message.bytes": &max})
		v := make([]byte, 8192)
		rand.New(rand.NewSource(1)).Read(v)
		copy(v, "large|")
		for i := range v[6:] {
			if caps.TextOnly {
				v[6+i] = 'a' + v[6+i]%26
			} else if v[6+i] == '\n' || v[6+i] == '\t' {
				v[6+i] = 0
			}
		}
		rec := Rec{Partition: 0, Key: []byte("k"), Value: v}
		exp := c.Expect("too-large")
		err := c.ProduceTooLarge(ctxFor(t, time.Minute), b.Addr(), "large", rec)
		t.check(errNAOnly(err), "too large")
		if err == nil || !exp.Match(err) {
			t.Fatalf("too-large record: got %v, want %s", err, exp.Desc)
		}
		if n := len(refRead(t, b.Addr(), "large")); n != 0 {
			t.Fatalf("%d records appended", n)
		}
		t.Note("%s", exp.Desc)
	})
}

// errNAOnly passes on err only when it says the client has no such feature.
func errNAOnly(err error) error {
	if errors.Is(err, errNA) {
		return err
	}
	return nil
}

// groupStep: two members split 3 partitions and read 30 records; the broker and the clients
// restart; two new members read exactly the 30 records produced after the commit.
func groupStep(t *stepT, c Client, bp **testutil.Broker) {
	b := *bp
	createTopic(t, b.Addr(), "group", 3, nil)
	part := func(i int) int32 { return int32(i % 3) }
	runs := [][]Rec{
		genRecords(genOpts{prefix: "run1", n: 30, partition: part, textOnly: c.Caps().TextOnly}),
		genRecords(genOpts{prefix: "run2", n: 30, partition: part, textOnly: c.Caps().TextOnly}),
	}
	group := "compat-group"
	for run, recs := range runs {
		if run == 1 {
			b = b.Restart()
			*bp = b
			checkCommitted(t, b.Addr(), group, "group", 10, "after the broker restarted")
		}
		members, err := c.Group(ctxFor(t, 90*time.Second), b.Addr(), "group", group, recs)
		t.check(err, fmt.Sprintf("group run %d", run+1))
		owner := map[int32]int{}
		for i, m := range members {
			if len(m.Assigned) == 0 {
				t.Fatalf("run %d: member %d was assigned no partition (assignments %v, %v)", run+1, i, members[0].Assigned, members[1].Assigned)
			}
			for _, p := range m.Assigned {
				if o, dup := owner[p]; dup {
					t.Fatalf("run %d: partition %d assigned to members %d and %d", run+1, p, o, i)
				}
				owner[p] = i
			}
		}
		if len(owner) != 3 {
			t.Fatalf("run %d: assigned partitions %v, want 0, 1, 2", run+1, owner)
		}
		var got []Rec
		for i, m := range members {
			for _, r := range m.Records {
				if owner[r.Partition] != i {
					t.Errorf("run %d: member %d read %s of partition %d, owned by member %d", run+1, i, r.id(), r.Partition, owner[r.Partition])
				}
			}
			got = append(got, m.Records...)
		}
		checkSame(t, recs, got, cmpOpts{noTimestamps: true, noPosition: true})
		for _, r := range got {
			// Each partition holds 10 records per run: run 2 starts exactly at the commit.
			if r.Offset < int64(run*10) || r.Offset >= int64(run*10+10) {
				t.Fatalf("run %d read %s at offset %d of partition %d: not resumed at the commit", run+1, r.id(), r.Offset, r.Partition)
			}
		}
		checkCommitted(t, b.Addr(), group, "group", int64(run*10+10), fmt.Sprintf("after run %d", run+1))
	}
}

// writeSeekTopic writes 20 records with timestamps one second apart to partition 1 of
// "seek" (and a few to the other partitions) and returns partition 1's records.
func writeSeekTopic(t testing.TB, addr string) []Rec {
	t.Helper()
	createTopic(t, addr, "seek", 3, nil)
	recs := genRecords(genOpts{prefix: "seek", n: 26, tsBase: tsBase(), headers: true, textOnly: true,
		partition: func(i int) int32 {
			if i >= 20 {
				return int32((i % 2) * 2)
			}
			return 1
		}})
	var ref []Rec
	for _, r := range byPartition(refProduce(t, addr, "seek", recs)) {
		if r.Partition == 1 {
			ref = append(ref, r)
		}
	}
	return ref
}

// rangeTopic writes 10 records to the one partition of "range" and deletes those below
// offset 3, so the log holds offsets 3-9; it returns them.
func rangeTopic(t testing.TB, addr string) []Rec {
	t.Helper()
	createTopic(t, addr, "range", 1, nil)
	recs := refProduce(t, addr, "range", genRecords(genOpts{prefix: "range", n: 10, tsBase: tsBase(), headers: true, textOnly: true,
		partition: func(int) int32 { return 0 }}))
	adm := kadm.NewClient(refClient(t, addr))
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "range", Partition: 0, At: 3})
	res, err := adm.DeleteRecords(ctxFor(t, 30*time.Second), os)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("delete records: %v", err)
	}
	return recs[3:]
}

// firstN is the first n records (a client may return more than it was asked for, as one
// fetch holds more; the steps read one partition).
func firstN(recs []Rec, n int) []Rec {
	if len(recs) > n {
		return recs[:n]
	}
	return recs
}

// checkCommitted fails unless every partition of topic has offset want committed by group.
func checkCommitted(t testing.TB, addr, group, topic string, want int64, when string) {
	t.Helper()
	committed, err := kadm.NewClient(refClient(t, addr)).FetchOffsets(ctxFor(t, 30*time.Second), group)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		t.Fatalf("fetch committed offsets %s: %v", when, err)
	}
	for p := int32(0); p < 3; p++ {
		o, ok := committed.Lookup(topic, p)
		if !ok || o.At != want {
			t.Fatalf("%s: committed offset of partition %d is %v (found %v), want %d", when, p, o.At, ok, want)
		}
	}
}
