package api_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/api"
)

// Fetch session benchmarks (docs/benchmarks.md): a consumer of 1 or 1,000 partitions polling
// with max_wait 0, sessionless (every fetch names every partition) and through a session
// (each incremental fetch names none, as a consumer whose positions did not move).

// benchOpenSession answers a full fetch of req with epoch 0 and returns the session id.
func benchOpenSession(b *testing.B, h *api.Handler, req *kmsg.FetchRequest) int32 {
	b.Helper()
	req.SessionID, req.SessionEpoch = 0, 0
	r := h.Handle(context.Background(), &api.Conn{ClientID: "bench"}, req)
	if r.Raw == nil || len(r.Raw.Parts) == 0 || len(r.Raw.Parts[0].B) < 10 {
		b.Fatal("no fetch answer")
	}
	// v7-11: throttle_ms int32, error_code int16, session_id int32.
	head := r.Raw.Parts[0].B
	code, id := int16(binary.BigEndian.Uint16(head[4:])), int32(binary.BigEndian.Uint32(head[6:]))
	if r.Raw.Done != nil {
		r.Raw.Done()
	}
	if code != 0 || id == 0 {
		b.Fatalf("no session: error %d, id %d", code, id)
	}
	return id
}

// benchSessionLoop answers incremental fetches of session id naming no partitions; each
// answer must be at least minSize bytes.
func benchSessionLoop(b *testing.B, h *api.Handler, id int32, minSize int) {
	inc := benchIncremental(id)
	b.ReportAllocs()
	cpu := startCPU()
	epoch := int32(1)
	for b.Loop() {
		inc.SessionEpoch = epoch
		epoch++
		if _, size := benchHandle(b, h, inc); size < minSize {
			b.Fatalf("answer of %d bytes", size)
		}
	}
	cpu.report(b)
}

// benchIncremental is an incremental fetch (v11) of session id naming no partitions; the
// caller sets its epoch.
func benchIncremental(id int32) *kmsg.FetchRequest {
	inc := kmsg.NewPtrFetchRequest()
	inc.SetVersion(11)
	inc.ReplicaID, inc.MaxBytes, inc.SessionID = -1, 64<<20, id
	return inc
}

func benchCaughtUp(b *testing.B, partitions int) (*api.Handler, *kmsg.FetchRequest) {
	_, h := benchBroker(b, "f", int32(partitions))
	benchHandle(b, h, benchProduceReq("f", partitions, benchRecords(b, 1, 100)))
	offs := make([]int64, partitions)
	for i := range offs {
		offs[i] = 1
	}
	return h, benchFetchReq("f", offs, 0, 0)
}

func benchSessionless(b *testing.B, h *api.Handler, req *kmsg.FetchRequest) {
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		benchHandle(b, h, req)
	}
	cpu.report(b)
}

// A consumer caught up on one partition, sessionless.
func BenchmarkHandlerFetchCaughtUp1(b *testing.B) {
	h, req := benchCaughtUp(b, 1)
	benchSessionless(b, h, req)
}

// A consumer caught up on one partition, through a session.
func BenchmarkHandlerFetchSessionCaughtUp1(b *testing.B) {
	h, req := benchCaughtUp(b, 1)
	benchSessionLoop(b, h, benchOpenSession(b, h, req), 0)
}

// A consumer caught up on 1,000 partitions, through a session: each fetch reads all 1,000
// and answers none (BenchmarkHandlerFetchCaughtUp1000 is the sessionless one).
func BenchmarkHandlerFetchSessionCaughtUp1000(b *testing.B) {
	h, req := benchCaughtUp(b, 1000)
	benchSessionLoop(b, h, benchOpenSession(b, h, req), 0)
}

// One small batch from each of 1,000 partitions through a session (the positions never move,
// so every fetch answers all 1,000 and moves each to the end of the session's order):
// BenchmarkHandlerFetchData1000 with the session's bookkeeping.
func BenchmarkHandlerFetchSessionData1000(b *testing.B) {
	_, h := benchBroker(b, "f", 1000)
	recs := benchRecords(b, 10, 100)
	benchHandle(b, h, benchProduceReq("f", 1000, recs))
	req := benchFetchReq("f", make([]int64, 1000), 0, 0)
	benchSessionLoop(b, h, benchOpenSession(b, h, req), 1000*len(recs))
}

// A consumer caught up on 1,000 partitions over a connection, through a session: each
// incremental fetch names none and is answered with none (BenchmarkConnFetchCaughtUp1000 is
// the sessionless one, which the client encodes and the broker decodes and answers with all
// 1,000).
func BenchmarkConnFetchSessionCaughtUp1000(b *testing.B) {
	br, h := benchBroker(b, "f", 1000)
	benchHandle(b, h, benchProduceReq("f", 1000, benchRecords(b, 1, 100)))
	offs := make([]int64, 1000)
	for i := range offs {
		offs[i] = 1
	}
	full := benchFetchReq("f", offs, 0, 0)
	full.SessionEpoch = 0
	rc := newRawClient(b, br.Addr(), full)
	rc.roundTrip(b)
	// The answer's body, read into the start of the buffer: correlation id, throttle, error,
	// session id.
	id := int32(binary.BigEndian.Uint32(rc.buf[10:]))
	if id == 0 {
		b.Fatal("no session")
	}
	inc := benchIncremental(id)
	format := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench"))
	b.ReportAllocs()
	cpu := startCPU()
	epoch := int32(1)
	for b.Loop() {
		inc.SessionEpoch = epoch
		epoch++
		rc.req = format.AppendRequest(rc.req[:0], inc, 1)
		rc.roundTrip(b)
		if code := binary.BigEndian.Uint16(rc.buf[8:]); code != 0 {
			b.Fatalf("incremental fetch: error %d", code)
		}
	}
	cpu.report(b)
}
