package server_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Idle connections are cheap: 1,000 clients that each asked for ApiVersions and then went
// quiet cost the broker a bounded amount of memory per connection (its goroutine stack, read
// buffer and bookkeeping: nothing that scales with a request once it is answered), and the
// broker goes on serving a producer and consumer meanwhile.

const (
	idleConns = 1000
	// idleBudget is the memory budget per idle connection: heap plus goroutine stack, measured
	// in-process, so it also pays for the client's side of each socket.
	idleBudget = 64 << 10
)

// raiseFileLimit makes room for n more descriptors (client and broker ends of each connection
// live in this process), raising the soft RLIMIT_NOFILE up to the hard limit if needed.
func raiseFileLimit(t *testing.T, n uint64) {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	need := n + 256 // what the test binary, the broker's files and franz-go use besides
	if rl.Cur >= need {
		t.Logf("RLIMIT_NOFILE soft %d, hard %d: enough for %d connections", rl.Cur, rl.Max, idleConns)
		return
	}
	if rl.Max < need {
		t.Fatalf("RLIMIT_NOFILE hard limit %d is below the %d descriptors this test needs", rl.Max, need)
	}
	old := rl.Cur
	rl.Cur = need
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatalf("raising RLIMIT_NOFILE from %d to %d: %v", old, need, err)
	}
	t.Cleanup(func() {
		rl.Cur = old
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			t.Errorf("restoring RLIMIT_NOFILE: %v", err)
		}
	})
	t.Logf("raised RLIMIT_NOFILE soft limit from %d to %d", old, need)
}

// apiVersions sends an ApiVersions v3 request (what modern clients send first) with the given
// correlation id on c and checks the answer.
func apiVersions(c net.Conn, cid int32) error {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "idle-test", "1.0"
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("idle")).AppendRequest(nil, req, cid)
	if _, err := c.Write(f); err != nil {
		return err
	}
	var sz [4]byte
	if _, err := io.ReadFull(c, sz[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		return err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != cid {
		return fmt.Errorf("correlation id %d, want %d", got, cid)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(3)
	if err := resp.ReadFrom(body[4:]); err != nil {
		return err
	}
	if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		return fmt.Errorf("ApiVersions error %d with %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
	return nil
}

// memInUse is the live heap plus goroutine stacks, after collecting garbage.
func memInUse() (heap, stack uint64) {
	var ms runtime.MemStats
	for i := 0; i < 3; i++ {
		runtime.GC() // the second and third cycles also shrink stacks and free finalized objects
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.StackInuse
}

func TestManyIdleConnections(t *testing.T) {
	raiseFileLimit(t, 2*idleConns)
	b := testutil.StartBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Warm up everything shared across connections (request buffer pool, metadata, client
	// code paths) so the measurement sees only what each connection adds.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("busy"),
		kgo.ConsumeTopics("busy"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm-up")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		c := dial(t, b.Addr())
		if err := apiVersions(c, 1); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}

	heap0, stack0 := memInUse()
	goroutines0 := runtime.NumGoroutine()
	conns := make([]net.Conn, 0, idleConns)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < idleConns; i++ {
		c, err := net.Dial("tcp", b.Addr())
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if err := apiVersions(c, int32(i)); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	heap1, stack1 := memInUse()
	goroutines1 := runtime.NumGoroutine()

	heapPer := (int64(heap1) - int64(heap0)) / idleConns
	stackPer := (int64(stack1) - int64(stack0)) / idleConns
	t.Logf("%d idle connections: heap +%d B/conn, goroutine stacks +%d B/conn, total %d B/conn (budget %d); goroutines %d -> %d",
		idleConns, heapPer, stackPer, heapPer+stackPer, idleBudget, goroutines0, goroutines1)
	if heapPer+stackPer > idleBudget {
		t.Fatalf("each idle connection costs %d bytes (heap %d + stack %d), over the %d-byte budget",
			heapPer+stackPer, heapPer, stackPer, idleBudget)
	}
	if goroutines1-goroutines0 > 2*idleConns {
		t.Fatalf("%d goroutines for %d idle connections", goroutines1-goroutines0, idleConns)
	}

	// The broker still serves a producer and a consumer with all of them open...
	var rs []*kgo.Record
	for i := 0; i < 100; i++ {
		rs = append(rs, &kgo.Record{Value: []byte(fmt.Sprintf("busy-%d", i))})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce with %d idle connections open: %v", idleConns, err)
	}
	got := 0
	for got < 101 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 101 records with %d idle connections open", got, idleConns)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("fetch: %v", e.Err)
		}
		got += fs.NumRecords()
	}
	// ...and every idle connection is still open and answered when it speaks again.
	for i, c := range conns {
		if err := apiVersions(c, int32(idleConns+i)); err != nil {
			t.Fatalf("idle connection %d after the quiet spell: %v", i, err)
		}
	}
}

// idleMs is connections.max.idle.ms of the brokers below: short, so each test waits about a
// second for what a production broker does after ten minutes.
const idleMs = 1000

// A connection that sends nothing for connections.max.idle.ms after its last answer is
// closed, as Kafka's Selector closes it; one that keeps talking is not.
func TestIdleConnectionClosed(t *testing.T) {
	b := testutil.StartBroker(t, fmt.Sprintf("connections.max.idle.ms=%d", idleMs))
	quiet, busy := dial(t, b.Addr()), dial(t, b.Addr())
	if err := apiVersions(quiet, 1); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		expectClosed(t, quiet)
	}()
	// The busy connection asks every idleMs/4 until the quiet one is closed: never idle that long.
	for i := int32(0); ; i++ {
		select {
		case <-closed:
			if err := apiVersions(busy, i); err != nil {
				t.Fatalf("a connection that was never idle: %v", err)
			}
			return
		case <-time.After(idleMs / 4 * time.Millisecond):
			if err := apiVersions(busy, i); err != nil {
				t.Fatalf("a connection that was never idle, request %d: %v", i, err)
			}
		}
	}
}

// A request whose bytes stop coming (a length, part of the body, then nothing) or come too
// slowly (one byte every 200 ms: never idle, but the request would take minutes) is dropped
// connections.max.idle.ms after its first byte, so a client cannot hold a connection and its
// buffer by never finishing a request.
func TestStalledRequestDropped(t *testing.T) {
	b := testutil.StartBroker(t, fmt.Sprintf("connections.max.idle.ms=%d", idleMs))
	req := frame(kmsg.ApiVersions.Int16(), 0, make([]byte, 1000))

	t.Run("half-sent", func(t *testing.T) {
		c := dial(t, b.Addr())
		if _, err := c.Write(req[:20]); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, c)
	})
	t.Run("length only", func(t *testing.T) {
		c := dial(t, b.Addr())
		if _, err := c.Write(req[:2]); err != nil { // not even the whole length
			t.Fatal(err)
		}
		expectClosed(t, c)
	})
	t.Run("dribbled", func(t *testing.T) {
		c := dial(t, b.Addr())
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for i := range req {
				if _, err := c.Write(req[i : i+1]); err != nil {
					return // closed by the broker
				}
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond): // the client's pace, not synchronisation
				}
			}
		}()
		expectClosed(t, c)
	})
}

// A connection whose request is in progress is not idle: a Fetch that waits longer than
// connections.max.idle.ms is answered, and the connection serves on.
func TestLongPollNotIdle(t *testing.T) {
	b := testutil.StartBroker(t, fmt.Sprintf("connections.max.idle.ms=%d", idleMs))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "quiet"); err != nil {
		t.Fatal(err)
	}
	c := dial(t, b.Addr())
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(4)
	req.ReplicaID = -1
	req.MaxWaitMillis = 3 * idleMs // nothing arrives: the broker holds the request this long
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "quiet"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	start := time.Now()
	if _, err := c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 9)); err != nil {
		t.Fatal(err)
	}
	var sz [4]byte
	if _, err := io.ReadFull(c, sz[:]); err != nil {
		t.Fatalf("long-polling fetch after %v: %v", time.Since(start), err)
	}
	body := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(4)
	if err := resp.ReadFrom(body[4:]); err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("fetch answer %+v", resp.Topics)
	}
	t.Logf("fetch answered after %v (connections.max.idle.ms %d)", time.Since(start), idleMs)
	if err := apiVersions(c, 10); err != nil {
		t.Fatalf("after the long poll: %v", err)
	}
}

// 500 connections each holding a half-sent request cost the broker what they sent, do not
// stop it serving a producer and a consumer, and are all dropped in bounded time.
func TestManyStalledRequests(t *testing.T) {
	const stalled = 500
	raiseFileLimit(t, 2*stalled)
	b := testutil.StartBroker(t, fmt.Sprintf("connections.max.idle.ms=%d", 4*idleMs))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Each declares a 1 MiB request and sends 100 bytes of it.
	head := frame(kmsg.ApiVersions.Int16(), 0, make([]byte, 1<<20))[:100]
	conns := make([]net.Conn, 0, stalled)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < stalled; i++ {
		c, err := net.Dial("tcp", b.Addr())
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		if err := c.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(head); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("busy"),
		kgo.ConsumeTopics("busy"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for i := 0; i < 100; i++ {
		rs = append(rs, &kgo.Record{Value: []byte(fmt.Sprintf("busy-%d", i))})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce with %d stalled requests held: %v", stalled, err)
	}
	for got := 0; got < len(rs); {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records with %d stalled requests held", got, len(rs), stalled)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("fetch: %v", e.Err)
		}
		got += fs.NumRecords()
	}
	for i, c := range conns {
		n, err := c.Read(make([]byte, 1))
		if n != 0 || !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("stalled connection %d: read %d bytes, %v; want it closed by the broker", i, n, err)
		}
	}
}

// A client that stops reading in the middle of an answer moves no bytes: after
// connections.max.idle.ms without progress the broker drops the connection (as Kafka's Selector
// closes a connection idle in both directions) instead of holding its goroutine and the
// answer's segment files for ever. A client that reads slowly but steadily gets everything.
func TestStalledReaderClosed(t *testing.T) {
	b := testutil.StartBroker(t, fmt.Sprintf("connections.max.idle.ms=%d", idleMs))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("big"), kgo.ProducerBatchMaxBytes(1<<20),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	segment := "67108864" // one segment, so one Fetch answers all 16 MB
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": &segment}, "big"); err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 100<<10)
	var rs []*kgo.Record
	for range 160 { // 16 MB, far more than the socket buffers of both ends hold
		rs = append(rs, &kgo.Record{Value: value})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fetch := func(c net.Conn) int {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(4)
		req.ReplicaID = -1
		req.MaxBytes = 32 << 20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "big"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 32 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		if _, err := c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)); err != nil {
			t.Fatal(err)
		}
		var sz [4]byte
		if _, err := io.ReadFull(c, sz[:]); err != nil {
			t.Fatal(err)
		}
		return int(binary.BigEndian.Uint32(sz[:]))
	}

	// Stalled: the frame's length arrives, then the client reads nothing for three idle
	// periods (the fault itself), then reads what it can: the answer ends early.
	c := dial(t, b.Addr())
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetReadBuffer(256 << 10); err != nil { // above loopback's MSS, or window updates stall
			t.Fatal(err)
		}
	}
	size := fetch(c)
	if size < 16e6 {
		t.Fatalf("answer of %d bytes: want the 16 MB", size)
	}
	time.Sleep(3 * idleMs * time.Millisecond) // the stall being tested, not synchronisation
	if err := c.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, io.LimitReader(c, int64(size)))
	if err == nil && n == int64(size) {
		t.Fatalf("the whole %d-byte answer was written to a client that read nothing for %d ms", size, 3*idleMs)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d of %d bytes, then the connection stayed open", n, size)
	}
	t.Logf("stalled reader: %d of %d bytes, then the connection was closed (%v)", n, size, err)

	// Slow but steady: 256 KiB every 20 ms is never idle for a second, and gets everything.
	c = dial(t, b.Addr())
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetReadBuffer(256 << 10); err != nil { // above loopback's MSS, or window updates stall
			t.Fatal(err)
		}
	}
	size = fetch(c)
	buf := make([]byte, 256<<10)
	for left := size; left > 0; {
		if err := c.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
			t.Fatal(err)
		}
		n, err := io.ReadFull(c, buf[:min(left, len(buf))])
		if err != nil {
			t.Fatalf("slow reader, %d bytes left: %v", left, err)
		}
		left -= n
		time.Sleep(20 * time.Millisecond) // the reader's pace
	}
	if err := apiVersions(c, 2); err != nil {
		t.Fatalf("slow reader after the answer: %v", err)
	}
}
