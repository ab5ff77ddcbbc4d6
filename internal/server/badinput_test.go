package server_test

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// frame builds a request frame: size, key, version, correlation id, client id, body.
func frame(key, version int16, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, 7)
	b = binary.BigEndian.AppendUint16(b, 1)
	b = append(b, 'c')
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	return c
}

// expectClosed reads until EOF: the broker must close the connection without answering.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("want the connection closed, got %v", err)
	}
	if len(b) != 0 {
		t.Fatalf("want no answer, got %d bytes", len(b))
	}
}

func TestBadFramesCloseTheConnection(t *testing.T) {
	b := testutil.StartBroker(t, "socket.request.max.bytes=1048576")
	cases := map[string][]byte{
		"negative length":     {0xff, 0xff, 0xff, 0xf0},
		"oversized length":    binary.BigEndian.AppendUint32(nil, 1<<30),
		"just over the max":   binary.BigEndian.AppendUint32(nil, 1048577),
		"tiny frame":          {0, 0, 0, 2, 0, 18},
		"unknown api key":     frame(9999, 0, nil),
		"unsupported version": frame(kmsg.Metadata.Int16(), 999, nil),
		"truncated body":      frame(kmsg.Produce.Int16(), 7, []byte{0xff}),
		"huge array count":    frame(kmsg.Metadata.Int16(), 1, []byte{0x7f, 0xff, 0xff, 0xff}),
		"client id too long":  {0, 0, 0, 12, 0, 3, 0, 1, 0, 0, 0, 1, 0x7f, 0xff, 0, 0},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			c := dial(t, b.Addr())
			if _, err := c.Write(f); err != nil {
				t.Fatal(err)
			}
			expectClosed(t, c)
		})
	}
	// The broker still serves.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(t.Context()); err != nil {
		t.Fatalf("broker stopped serving after bad input: %v", err)
	}
}

// KIP-511: an ApiVersions request of a version the broker does not know is answered in v0
// with UNSUPPORTED_VERSION and the served ranges.
func TestApiVersionsFallback(t *testing.T) {
	b := testutil.StartBroker(t)
	c := dial(t, b.Addr())
	if _, err := c.Write(frame(kmsg.ApiVersions.Int16(), 99, []byte{0, 0, 0})); err != nil {
		t.Fatal(err)
	}
	var sz [4]byte
	if _, err := io.ReadFull(c, sz[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	if cid := binary.BigEndian.Uint32(body); cid != 7 {
		t.Fatalf("correlation id %d", cid)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	if err := resp.ReadFrom(body[4:]); err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) == 0 {
		t.Fatalf("error %d with %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
}

// Pipelined requests on one connection are answered in order.
func TestPipelinedRequestsAnsweredInOrder(t *testing.T) {
	b := testutil.StartBroker(t)
	c := dial(t, b.Addr())
	var out []byte
	for i := 0; i < 50; i++ {
		f := frame(kmsg.ApiVersions.Int16(), 0, nil)
		binary.BigEndian.PutUint32(f[8:], uint32(i))
		out = append(out, f...)
	}
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		var sz [4]byte
		if _, err := io.ReadFull(c, sz[:]); err != nil {
			t.Fatal(err)
		}
		body := make([]byte, binary.BigEndian.Uint32(sz[:]))
		if _, err := io.ReadFull(c, body); err != nil {
			t.Fatal(err)
		}
		if cid := binary.BigEndian.Uint32(body); cid != uint32(i) {
			t.Fatalf("response %d has correlation id %d", i, cid)
		}
	}
}
