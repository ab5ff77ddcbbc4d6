package quorum

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "go.etcd.io/raft/v3/raftpb"
)

// newTestTransport starts a transport for raft id 1 with peer 2 at peerAddr.
func newTestTransport(t *testing.T, cluster, peerAddr string, maxFrame int) (*transport, chan *pb.Message) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *pb.Message, 16)
	tr := newTransport(1, cluster, ln, map[uint64]string{1: ln.Addr().String(), 2: peerAddr}, maxFrame, testLogger(t),
		func(m *pb.Message) { got <- m }, func(transportEvent) {})
	tr.start()
	t.Cleanup(tr.stop)
	return tr, got
}

// rawPeer dials tr as raft id from with cluster id cluster and sends frames.
func rawPeer(t *testing.T, tr *transport, from uint64, cluster string) net.Conn {
	c, err := net.Dial("tcp", tr.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h := append([]byte(helloMagic), helloVersion)
	h = binary.AppendUvarint(h, from)
	h = binary.AppendUvarint(h, uint64(len(cluster)))
	if _, err := c.Write(append(h, cluster...)); err != nil {
		t.Fatal(err)
	}
	return c
}

func frame(t *testing.T, m *pb.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// closedSoon reports whether the server closes c within 10 s (it does at once; the margin is
// for a loaded machine).
func closedSoon(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return err == io.EOF
}

func TestTransportDelivers(t *testing.T) {
	tr, got := newTestTransport(t, "c1", "127.0.0.1:1", 1<<20)
	c := rawPeer(t, tr, 2, "c1")
	m := &pb.Message{Type: pb.MsgHeartbeat.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(uint64(7))}
	if _, err := c.Write(frame(t, m)); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.GetTerm() != 7 || r.GetType() != pb.MsgHeartbeat {
			t.Fatalf("got %v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not delivered")
	}
}

func TestTransportRefuses(t *testing.T) {
	tr, got := newTestTransport(t, "c1", "127.0.0.1:1", 1024)
	for name, c := range map[string]net.Conn{
		"other cluster": rawPeer(t, tr, 2, "c2"),
		"unknown peer":  rawPeer(t, tr, 9, "c1"),
	} {
		if !closedSoon(c) {
			t.Errorf("%s: connection left open", name)
		}
	}
	// A frame over the limit closes the connection before its body is read.
	c := rawPeer(t, tr, 2, "c1")
	if _, err := c.Write(binary.BigEndian.AppendUint32(nil, 1<<30)); err != nil {
		t.Fatal(err)
	}
	if !closedSoon(c) {
		t.Error("oversized frame: connection left open")
	}
	// A message claiming another sender closes it too.
	c = rawPeer(t, tr, 2, "c1")
	if _, err := c.Write(frame(t, &pb.Message{Type: pb.MsgHeartbeat.Enum(), From: new(uint64(3)), To: new(uint64(1))})); err != nil {
		t.Fatal(err)
	}
	if !closedSoon(c) {
		t.Error("forged sender: connection left open")
	}
	// Garbage instead of a hello.
	raw, err := net.Dial("tcp", tr.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	if !closedSoon(raw) {
		t.Error("garbage: connection left open")
	}
	select {
	case m := <-got:
		t.Fatalf("delivered %v", m)
	default:
	}
}

func TestTransportSendReconnects(t *testing.T) {
	// A receiving peer that comes and goes.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	tr, _ := newTestTransport(t, "c1", addr, 1<<20)
	var mu sync.Mutex
	received := 0
	var conns []net.Conn
	serve := func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() {
				defer c.Close()
				var hello [5 + 1 + 1 + 2]byte
				if _, err := io.ReadFull(c, hello[:]); err != nil {
					return
				}
				var hdr [4]byte
				for {
					if _, err := io.ReadFull(c, hdr[:]); err != nil {
						return
					}
					if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(hdr[:]))); err != nil {
						return
					}
					mu.Lock()
					received++
					mu.Unlock()
				}
			}()
		}
	}
	go serve(ln)
	send := func() {
		tr.send([]*pb.Message{{Type: pb.MsgHeartbeat.Enum(), From: new(uint64(1)), To: new(uint64(2))}})
	}
	waitFor := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			send()
			mu.Lock()
			r := received
			mu.Unlock()
			if r >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("received %d, want %d", r, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor(3)
	ln.Close() // the peer restarts on the same port: its connections die
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	base := received
	mu.Unlock()
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skip("port not reusable:", err)
	}
	defer ln2.Close()
	go serve(ln2)
	waitFor(base + 3)
	mu.Lock()
	defer mu.Unlock()
	if len(conns) < 2 {
		t.Fatalf("%d connections: the transport did not reconnect", len(conns))
	}
}
