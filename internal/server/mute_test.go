package server_test

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/server"
)

// throttler answers ApiVersions at once with a throttle (KIP-219) and counts the requests.
type throttler struct {
	throttle time.Duration
	handled  atomic.Int64
}

func (h *throttler) Versions(key int16) (int16, int16, bool) {
	return 0, 3, key == kmsg.ApiVersions.Int16()
}

func (h *throttler) Handle(_ context.Context, _ *server.Conn, req kmsg.Request) server.Reply {
	h.handled.Add(1)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ThrottleMillis = int32(h.throttle.Milliseconds())
	return server.Reply{Msg: resp, Throttle: h.throttle}
}

func (h *throttler) UnsupportedApiVersions() kmsg.Response { return kmsg.NewPtrApiVersionsResponse() }
func (h *throttler) MaxRequestBytes() int32                { return 1 << 20 }

func startThrottler(t *testing.T, throttle time.Duration) (*server.Server, *throttler, net.Conn) {
	t.Helper()
	h := &throttler{throttle: throttle}
	s := server.New("test", h, slog.New(slog.DiscardHandler))
	addr, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(t.Context())
	t.Cleanup(s.Close)
	nc, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return s, h, nc
}

// sendTwo writes two pipelined ApiVersions v0 requests.
func sendTwo(t *testing.T, nc net.Conn) {
	t.Helper()
	var b []byte
	for id := int32(1); id <= 2; id++ {
		start := len(b)
		b = append(b, 0, 0, 0, 0, 0, 18, 0, 0)
		b = binary.BigEndian.AppendUint32(b, uint32(id))
		b = append(b, 0xff, 0xff) // no client id
		binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	}
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
}

func readFrame(nc net.Conn) error {
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return err
	}
	_, err := io.ReadFull(nc, make([]byte, binary.BigEndian.Uint32(size[:])))
	return err
}

// The answer to a throttled request is sent at once; the next request, already sent, is read
// only once the throttle has passed.
func TestThrottledConnectionMuted(t *testing.T) {
	const throttle = 300 * time.Millisecond
	_, h, nc := startThrottler(t, throttle)
	start := time.Now()
	sendTwo(t, nc)
	if err := readFrame(nc); err != nil {
		t.Fatal(err)
	}
	if h.handled.Load() != 1 {
		t.Fatalf("%d requests handled before the throttle passed, want 1", h.handled.Load())
	}
	if err := readFrame(nc); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < throttle {
		t.Fatalf("second answer after %v, before the throttle of %v passed", d, throttle)
	}
}

// A stopping server does not wait out a throttle: the muted connection is closed.
func TestStopDoesNotWaitForThrottle(t *testing.T) {
	s, _, nc := startThrottler(t, time.Hour)
	sendTwo(t, nc)
	if err := readFrame(nc); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for a muted connection's throttle")
	}
	if err := readFrame(nc); err == nil {
		t.Fatal("the muted connection was answered after the server stopped")
	}
}
