package server_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"

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
