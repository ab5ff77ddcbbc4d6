package server_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/server"
	"github.com/gregor-project/gregor/internal/testutil"
)

// FuzzConn drives the real connection loop — framing, request header parsing, API key and
// version checks, kmsg decoding — and the real api.Handler of a broker running in a temp dir,
// over loopback TCP. The first input byte picks the mode:
//
//   - even: the rest is sent as is, a byte stream of frames whose size prefixes the fuzzer
//     controls (framing, pipelining, truncation);
//   - odd: the rest is one frame's content (header and body), sent with its correct size
//     prefix, so mutations reach header parsing and body decoding.
//
// The broker must never panic (that kills this process), never hang (every input is answered
// or the connection closed within a deadline once the client has sent everything), and only
// ever send whole response frames; in framed mode a response must carry the request's
// correlation id and decode with kmsg at the request's version.
//
// Fetch long polls are answered at once: the server runs under an already cancelled context,
// which is how a parked fetch is released, so a fuzzed max_wait cannot stall an input.
//
// Run it with: go test ./internal/server -run '^$' -fuzz FuzzConn -fuzztime 2m
func FuzzConn(f *testing.F) {
	b := testutil.StartBroker(f, "auto.create.topics.enable=true")
	for _, s := range fuzzSeeds(f, b.Handler()) {
		f.Add(s)
	}
	var w io.Writer = io.Discard
	if os.Getenv("GREGOR_TEST_LOG") != "" {
		w = os.Stderr
	}
	srv := server.New("FUZZ", b.Handler(), slog.New(slog.NewTextHandler(w, nil)))
	addr, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	f.Cleanup(func() {
		srv.Close()
		if err := <-served; err != nil {
			f.Errorf("serve: %v", err)
		}
	})

	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		framed := in[0]&1 == 1
		out := in[1:]
		if framed {
			out = binary.BigEndian.AppendUint32(nil, uint32(len(in)-1))
			out = append(out, in[1:]...)
		}
		if heavy(out) {
			return
		}
		resp := exchange(t, addr.String(), out)
		frames, err := splitFrames(resp)
		if err != nil {
			t.Fatalf("broker sent a torn response stream (%d bytes): %v", len(resp), err)
		}
		if framed {
			checkFramedAnswer(t, in[1:], frames)
		}
		// Whatever the input did, the broker still takes connections and answers them.
		probe(t, addr.String())
	})
}

// maxFuzzPartitions is the most new partitions one input may legitimately create. Larger
// CreateTopics and CreatePartitions requests that the broker accepts (up to Kafka's 10,000
// per request) cost seconds of file creation and thousands of descriptors: capacity, not
// parsing, so the harness does not send them. Requests over the broker's limit are sent: they
// must be refused at once.
const maxFuzzPartitions = 64

// heavy reports whether a stream holds a create request the broker would accept that asks for
// more than maxFuzzPartitions new partitions. It decodes as the server does; frames the
// server would refuse to decode do not count.
func heavy(stream []byte) bool {
	for len(stream) >= 4 {
		n := int(binary.BigEndian.Uint32(stream))
		if n < 0 || n > len(stream)-4 {
			return false
		}
		if p := newPartitions(stream[4 : 4+n]); p > maxFuzzPartitions && p <= 10000 {
			return true
		}
		stream = stream[4+n:]
	}
	return false
}

// newPartitions is how many partitions a CreateTopics or CreatePartitions frame asks for
// (unset counts as one, the broker's num.partitions), 0 for other frames.
func newPartitions(frame []byte) int64 {
	if len(frame) < 10 {
		return 0
	}
	key := int16(binary.BigEndian.Uint16(frame))
	if key != kmsg.CreateTopics.Int16() && key != kmsg.CreatePartitions.Int16() {
		return 0
	}
	req := kmsg.RequestForKey(key)
	req.SetVersion(int16(binary.BigEndian.Uint16(frame[2:])))
	body := frame[10:]
	if l := int16(binary.BigEndian.Uint16(frame[8:])); l > 0 {
		if int(l) > len(body) {
			return 0
		}
		body = body[l:]
	}
	if req.IsFlexible() {
		var ok bool
		if body, ok = skipTagBuffer(body); !ok {
			return 0
		}
	}
	if req.ReadFrom(body) != nil {
		return 0
	}
	var n int64
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		for _, t := range r.Topics {
			n += max(int64(t.NumPartitions), int64(len(t.ReplicaAssignment)), 1)
		}
	case *kmsg.CreatePartitionsRequest:
		for _, t := range r.Topics {
			n += max(int64(t.Count), 0)
		}
	}
	return n
}

// skipTagBuffer skips a request header's tagged fields.
func skipTagBuffer(b []byte) ([]byte, bool) {
	n, l := binary.Uvarint(b)
	if l <= 0 {
		return nil, false
	}
	b = b[l:]
	for i := uint64(0); i < n; i++ {
		if _, l = binary.Uvarint(b); l <= 0 {
			return nil, false
		}
		b = b[l:]
		sz, l := binary.Uvarint(b)
		if l <= 0 || sz > uint64(len(b)-l) {
			return nil, false
		}
		b = b[l+int(sz):]
	}
	return b, true
}

// probe checks that the broker accepts a new connection and answers ApiVersions on it.
func probe(t *testing.T, addr string) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatalf("broker no longer accepts connections: %v", err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := apiVersions(c, 12345); err != nil {
		t.Fatalf("broker no longer answers a new connection: %v", err)
	}
}

// exchange sends out on a new connection, half-closes it and returns everything the broker
// sends until it closes its side. Reading runs alongside writing so a large answer cannot
// stall the broker while the request is still going out.
func exchange(t *testing.T, addr string, out []byte) []byte {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const hang = 10 * time.Second
	if err := c.SetDeadline(time.Now().Add(hang)); err != nil {
		t.Fatal(err)
	}
	type result struct {
		b   []byte
		err error
	}
	got := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(c)
		got <- result{b, err}
	}()
	if _, err := c.Write(out); err != nil && !isReset(err) {
		// The broker may close the connection before reading everything (a bad frame).
		t.Fatalf("write: %v", err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil && !isReset(err) {
		t.Fatalf("close write: %v", err)
	}
	r := <-got
	var ne net.Error
	if errors.As(r.err, &ne) && ne.Timeout() {
		t.Fatalf("broker neither answered nor closed the connection within %v (input %d bytes, answer so far %d bytes)", hang, len(out), len(r.b))
	}
	if r.err != nil && !isReset(r.err) {
		t.Fatalf("read: %v", r.err)
	}
	return r.b
}

// isReset reports the errors of a connection the broker closed while we were still talking.
// A reset connection can also fail shutdown(2) with ENOTCONN: the RST moved the socket to
// CLOSED before the test's CloseWrite.
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ENOTCONN)
}

// splitFrames splits a response stream into frames (each: correlation id and body); a
// partial frame at the end is an error.
func splitFrames(b []byte) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("%d stray bytes", len(b))
		}
		n := binary.BigEndian.Uint32(b)
		if n < 4 || uint64(n) > uint64(len(b)-4) {
			return nil, fmt.Errorf("frame of %d bytes with %d left", n, len(b)-4)
		}
		out = append(out, b[4:4+n])
		b = b[4+n:]
	}
	return out, nil
}

// checkFramedAnswer checks the answer to one well-framed request: none (closed, or acks=0
// produce) or one response with the request's correlation id that decodes at its version.
func checkFramedAnswer(t *testing.T, frame []byte, resps [][]byte) {
	if len(resps) == 0 {
		return
	}
	if len(resps) > 1 {
		t.Fatalf("%d responses to one request", len(resps))
	}
	if len(frame) < 8 {
		t.Fatalf("a %d-byte request was answered", len(frame))
	}
	key := int16(binary.BigEndian.Uint16(frame))
	version := int16(binary.BigEndian.Uint16(frame[2:]))
	cid := binary.BigEndian.Uint32(frame[4:])
	r := resps[0]
	if got := binary.BigEndian.Uint32(r); got != cid {
		t.Fatalf("response correlation id %d, request's %d", got, cid)
	}
	resp := kmsg.ResponseForKey(key)
	if resp == nil {
		t.Fatalf("api key %d answered", key)
	}
	if key == kmsg.ApiVersions.Int16() && (version < 0 || version > 3) {
		version = 0 // KIP-511: an unknown ApiVersions version is answered in v0
	}
	resp.SetVersion(version)
	body := r[4:]
	if resp.IsFlexible() && key != kmsg.ApiVersions.Int16() {
		if len(body) == 0 || body[0] != 0 {
			t.Fatalf("%s v%d response: flexible header without an empty tag buffer", kmsg.NameForKey(key), version)
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("%s v%d response does not decode: %v", kmsg.NameForKey(key), version, err)
	}
}

// fuzzSeeds are valid requests of every API key h serves — filled in for the keys below, at
// several versions; a default request at the lowest and highest version for any other served
// key — a pipelined stream of them, and the bad frames of TestBadFramesCloseTheConnection.
func fuzzSeeds(tb testing.TB, h server.Handler) [][]byte {
	rf := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	rec, err := batch.Build(batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]batch.Record{{Key: []byte("k"), Value: []byte("v")}}, batch.CodecNone)
	if err != nil {
		tb.Fatal(err)
	}
	topic := "fuzz"
	var reqs []kmsg.Request
	add := func(r kmsg.Request, versions ...int16) {
		for _, v := range versions {
			reqs = append(reqs, cloneAt(r, v))
		}
	}

	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "fuzz", "1"
	add(av, 0, 3)

	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	md.Topics = append(md.Topics, mt)
	md.AllowAutoTopicCreation = true
	add(md, 1, 9, 12)
	add(kmsg.NewPtrMetadataRequest(), 0)

	pr := kmsg.NewPtrProduceRequest()
	pr.Acks, pr.TimeoutMillis = -1, 1000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = rec
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	add(pr, 3, 9)

	fr := kmsg.NewPtrFetchRequest()
	fr.MaxWaitMillis, fr.MinBytes, fr.MaxBytes = 100, 1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fr.Topics = append(fr.Topics, ft)
	add(fr, 0, 4, 11, 13)

	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -2
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	add(lo, 1, 7)

	ct := kmsg.NewPtrCreateTopicsRequest()
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = "fuzz-created", 2, 1
	c := kmsg.NewCreateTopicsRequestTopicConfig()
	c.Name, c.Value = "retention.ms", kmsg.StringPtr("60000")
	ctt.Configs = append(ctt.Configs, c)
	ct.Topics = append(ct.Topics, ctt)
	ct.TimeoutMillis = 1000
	add(ct, 2, 7)

	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TopicNames = []string{"fuzz-created"}
	dtt := kmsg.NewDeleteTopicsRequestTopic()
	dtt.Topic = kmsg.StringPtr("fuzz-created")
	dt.Topics = append(dt.Topics, dtt)
	add(dt, 1, 6)

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = topic, 3
	cp.Topics = append(cp.Topics, cpt)
	cp.ValidateOnly = true
	add(cp, 1, 3)

	dc := kmsg.NewPtrDescribeConfigsRequest()
	dcr := kmsg.NewDescribeConfigsRequestResource()
	dcr.ResourceType, dcr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	dc.Resources = append(dc.Resources, dcr)
	dcb := kmsg.NewDescribeConfigsRequestResource()
	dcb.ResourceType, dcb.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	dc.Resources = append(dc.Resources, dcb)
	dc.IncludeSynonyms, dc.IncludeDocumentation = true, true
	add(dc, 1, 4)

	ac := kmsg.NewPtrAlterConfigsRequest()
	acr := kmsg.NewAlterConfigsRequestResource()
	acr.ResourceType, acr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	acc := kmsg.NewAlterConfigsRequestResourceConfig()
	acc.Name, acc.Value = "retention.ms", kmsg.StringPtr("120000")
	acr.Configs = append(acr.Configs, acc)
	ac.Resources = append(ac.Resources, acr)
	ac.ValidateOnly = true
	add(ac, 0, 2)

	ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
	iar := kmsg.NewIncrementalAlterConfigsRequestResource()
	iar.ResourceType, iar.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	iac := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	iac.Name, iac.Op, iac.Value = "cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, kmsg.StringPtr("delete")
	iar.Configs = append(iar.Configs, iac)
	ia.Resources = append(ia.Resources, iar)
	add(ia, 0, 1)

	dr := kmsg.NewPtrDeleteRecordsRequest()
	drt := kmsg.NewDeleteRecordsRequestTopic()
	drt.Topic = topic
	drp := kmsg.NewDeleteRecordsRequestTopicPartition()
	drp.Offset = 0
	drt.Partitions = append(drt.Partitions, drp)
	dr.Topics = append(dr.Topics, drt)
	dr.TimeoutMillis = 1000
	add(dr, 0, 2)

	add(kmsg.NewPtrDescribeClusterRequest(), 0, 1)

	dl := kmsg.NewPtrDescribeLogDirsRequest()
	dlt := kmsg.NewDescribeLogDirsRequestTopic()
	dlt.Topic, dlt.Partitions = topic, []int32{0}
	dl.Topics = append(dl.Topics, dlt)
	add(dl, 1, 4)

	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionTimeoutMillis = 60000
	add(ip, 0, 4)

	covered := map[int16]bool{}
	for _, r := range reqs {
		covered[r.Key()] = true
	}
	for key := int16(0); key < 100; key++ {
		lo, hi, ok := h.Versions(key)
		if !ok || covered[key] || kmsg.RequestForKey(key) == nil {
			continue
		}
		for _, v := range []int16{lo, hi} {
			r := kmsg.RequestForKey(key)
			r.SetVersion(v)
			reqs = append(reqs, r)
		}
	}

	var seeds [][]byte
	var stream []byte
	for i, r := range reqs {
		frame := rf.AppendRequest(nil, r, int32(i))
		seeds = append(seeds, append([]byte{1}, frame[4:]...)) // framed mode: no size prefix
		stream = append(stream, frame...)
	}
	seeds = append(seeds, append([]byte{0}, stream...)) // one pipelined stream of them all
	// The bad frames of TestBadFramesCloseTheConnection, as raw streams.
	for _, bad := range [][]byte{
		{0xff, 0xff, 0xff, 0xf0},
		binary.BigEndian.AppendUint32(nil, 1<<30),
		{0, 0, 0, 2, 0, 18},
		frame(9999, 0, nil),
		frame(kmsg.Metadata.Int16(), 999, nil),
		frame(kmsg.Produce.Int16(), 7, []byte{0xff}),
		frame(kmsg.Metadata.Int16(), 1, []byte{0x7f, 0xff, 0xff, 0xff}),
		{0, 0, 0, 12, 0, 3, 0, 1, 0, 0, 0, 1, 0x7f, 0xff, 0, 0},
		frame(kmsg.ApiVersions.Int16(), 99, []byte{0, 0, 0}),
	} {
		seeds = append(seeds, append([]byte{0}, bad...))
	}
	return seeds
}

// cloneAt re-encodes r at version v into a fresh request, so one request value can seed
// several versions.
func cloneAt(r kmsg.Request, v int16) kmsg.Request {
	r.SetVersion(v)
	c := kmsg.RequestForKey(r.Key())
	c.SetVersion(v)
	if err := c.ReadFrom(r.AppendTo(nil)); err != nil {
		panic(fmt.Sprintf("%s v%d does not round-trip: %v", kmsg.NameForKey(r.Key()), v, err))
	}
	return c
}
