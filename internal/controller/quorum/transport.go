package quorum

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	pb "go.etcd.io/raft/v3/raftpb"
)

// The transport carries raft messages between controllers over TCP, on the CONTROLLER
// listener.
//
// # Wire format
//
// Each controller dials every peer once and sends its messages to it on that connection;
// nothing is sent back on it (the peer answers on its own connection). A connection starts
// with a hello, then carries frames:
//
//	hello = "GRFT"  version:uint8 (1)  from:uvarint (raft id)  clusterLen:uvarint  cluster
//	frame = length:uint32 (big-endian)  raftpb.Message (protobuf, length bytes)
//
// A hello from another cluster id, or a frame longer than the configured limit, closes the
// connection. Frames are read into a buffer that grows with the bytes actually received.
//
// On a TLS controller listener the connection is TLS from its first byte (Config.Dial and
// the broker's listener do the handshakes) and the hello travels inside it; an accepted
// connection must pass Config.Admit (a verified client certificate) before its hello is
// read. The transport itself never sees a certificate.
//
// Raft tolerates lost messages, so sending never blocks the raft loop: each peer has a
// bounded queue drained by its own goroutine, and a full queue or a failed connection drops
// messages and reports the peer unreachable (and a failed snapshot as such).
const (
	helloMagic      = "GRFT"
	helloVersion    = 1
	peerQueue       = 4096
	dialTimeout     = time.Second
	writeTimeout    = 10 * time.Second
	redialBackoff   = 50 * time.Millisecond
	readChunk       = 64 << 10
	maxClusterIDLen = 1024
)

// dialTCP is the default dial: plain TCP.
func dialTCP(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// transportEvent is what the transport tells the raft loop besides messages.
type transportEvent struct {
	to          uint64
	unreachable bool
	snapshot    bool // a MsgSnap finished (failed when !snapOK)
	snapOK      bool
}

type transport struct {
	id        uint64
	clusterID string
	maxFrame  int
	log       *slog.Logger
	ln        net.Listener
	dial      func(ctx context.Context, addr string) (net.Conn, error) // set before start
	admit     func(net.Conn) error                                     // nil: admit all; set before start
	deliver   func(*pb.Message)                                        // a received message; must not block
	event     func(transportEvent)                                     // must not block
	peers     map[uint64]*peer                                         // immutable after start
	done      chan struct{}
	wg        sync.WaitGroup

	mu struct {
		sync.Mutex
		conns map[net.Conn]struct{} // accepted connections, closed on stop
	}
}

// peer is the sending side towards one controller. conn, w and lastFail belong to its run
// goroutine.
type peer struct {
	t    *transport
	id   uint64
	addr string
	q    chan *pb.Message

	conn     net.Conn
	w        *bufio.Writer
	lastFail time.Time
}

func newTransport(id uint64, clusterID string, ln net.Listener, addrs map[uint64]string, maxFrame int, log *slog.Logger,
	deliver func(*pb.Message), event func(transportEvent)) *transport {
	t := &transport{id: id, clusterID: clusterID, maxFrame: maxFrame, log: log, ln: ln, deliver: deliver, event: event,
		peers: map[uint64]*peer{}, done: make(chan struct{}), dial: dialTCP}
	t.mu.conns = map[net.Conn]struct{}{}
	for pid, addr := range addrs {
		if pid != id {
			t.peers[pid] = &peer{t: t, id: pid, addr: addr, q: make(chan *pb.Message, peerQueue)}
		}
	}
	return t
}

func (t *transport) start() {
	t.wg.Add(1)
	go t.acceptLoop()
	for _, p := range t.peers {
		t.wg.Add(1)
		go p.run()
	}
}

// stop closes the listener and every connection and waits for the goroutines.
func (t *transport) stop() {
	close(t.done)
	t.ln.Close()
	t.mu.Lock()
	for c := range t.mu.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
}

// send queues messages for their peers without blocking.
func (t *transport) send(msgs []*pb.Message) {
	for _, m := range msgs {
		p := t.peers[m.GetTo()]
		if p == nil {
			continue
		}
		select {
		case p.q <- m:
		default:
			t.event(transportEvent{to: p.id, unreachable: true})
			if m.GetType() == pb.MsgSnap {
				t.event(transportEvent{to: p.id, snapshot: true})
			}
		}
	}
}

func (t *transport) acceptLoop() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			select {
			case <-t.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			t.log.Warn("controller listener accept failed", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		t.mu.Lock()
		select {
		case <-t.done:
			t.mu.Unlock()
			c.Close()
			return
		default:
		}
		t.mu.conns[c] = struct{}{}
		t.mu.Unlock()
		t.wg.Add(1)
		go t.readConn(c)
	}
}

// readConn reads one peer's messages until the connection fails.
func (t *transport) readConn(c net.Conn) {
	defer t.wg.Done()
	defer func() {
		t.mu.Lock()
		delete(t.mu.conns, c)
		t.mu.Unlock()
		c.Close()
	}()
	if t.admit != nil {
		if err := t.admit(c); err != nil {
			t.log.Warn("refused controller connection", "remote", c.RemoteAddr().String(), "err", err)
			return
		}
	}
	r := bufio.NewReaderSize(c, readChunk)
	from, err := t.readHello(r)
	if err != nil {
		t.log.Warn("refused controller connection", "remote", c.RemoteAddr().String(), "err", err)
		return
	}
	var hdr [4]byte
	var buf bytes.Buffer
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if int64(n) > int64(t.maxFrame) {
			t.log.Warn("controller message too large", "from", from, "bytes", n, "limit", t.maxFrame)
			return
		}
		buf.Reset()
		if _, err := io.CopyN(&buf, r, int64(n)); err != nil { // grows with what arrives
			return
		}
		m := &pb.Message{}
		if err := proto.Unmarshal(buf.Bytes(), m); err != nil {
			t.log.Warn("bad controller message", "from", from, "err", err)
			return
		}
		if m.GetFrom() != from || m.GetTo() != t.id {
			t.log.Warn("misaddressed controller message", "conn_from", from, "from", m.GetFrom(), "to", m.GetTo())
			return
		}
		t.deliver(m)
	}
}

func (t *transport) readHello(r *bufio.Reader) (uint64, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, err
	}
	if string(head[:4]) != helloMagic || head[4] != helloVersion {
		return 0, errors.New("not a Gregor controller connection")
	}
	from, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, err
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, err
	}
	if n > maxClusterIDLen {
		return 0, fmt.Errorf("cluster id of %d bytes", n)
	}
	cluster := make([]byte, n)
	if _, err := io.ReadFull(r, cluster); err != nil {
		return 0, err
	}
	if string(cluster) != t.clusterID {
		return 0, fmt.Errorf("peer %d is in cluster %q, this is %q", from-1, cluster, t.clusterID)
	}
	if _, ok := t.peers[from]; !ok {
		return 0, fmt.Errorf("raft id %d is not a voter", from)
	}
	return from, nil
}

func (t *transport) hello() []byte {
	b := append([]byte(helloMagic), helloVersion)
	b = binary.AppendUvarint(b, t.id)
	b = binary.AppendUvarint(b, uint64(len(t.clusterID)))
	return append(b, t.clusterID...)
}

// run sends the peer's queue in bursts, (re)connecting as needed.
func (p *peer) run() {
	defer p.t.wg.Done()
	defer p.disconnect()
	batch := make([]*pb.Message, 0, 256)
	for {
		batch = batch[:0]
		select {
		case <-p.t.done:
			return
		case m := <-p.q:
			batch = append(batch, m)
		}
	more:
		for len(batch) < cap(batch) {
			select {
			case m := <-p.q:
				batch = append(batch, m)
			default:
				break more
			}
		}
		err := p.sendBatch(batch)
		if err != nil {
			p.disconnect()
			if !errors.Is(err, errBackoff) {
				p.lastFail = time.Now()
			}
			p.t.log.Debug("controller peer unreachable", "peer", p.id-1, "addr", p.addr, "err", err)
			p.t.event(transportEvent{to: p.id, unreachable: true})
		}
		for _, m := range batch {
			if m.GetType() == pb.MsgSnap {
				p.t.event(transportEvent{to: p.id, snapshot: true, snapOK: err == nil})
			}
		}
	}
}

func (p *peer) disconnect() {
	if p.conn != nil {
		p.conn.Close()
		p.conn, p.w = nil, nil
	}
}

var errBackoff = errors.New("not redialing yet after a failure")

// sendBatch writes and flushes msgs, connecting first if needed (not sooner than
// redialBackoff after a failure: meanwhile messages are dropped, as raft allows).
func (p *peer) sendBatch(msgs []*pb.Message) error {
	if p.conn == nil {
		if time.Since(p.lastFail) < redialBackoff {
			return errBackoff
		}
		ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
		c, err := p.t.dial(ctx, p.addr)
		cancel()
		if err != nil {
			return err
		}
		p.conn, p.w = c, bufio.NewWriterSize(c, readChunk)
		if _, err := p.w.Write(p.t.hello()); err != nil {
			return err
		}
	}
	if err := p.conn.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return err
	}
	for _, m := range msgs {
		if err := p.write(m); err != nil {
			return err
		}
	}
	return p.w.Flush()
}

func (p *peer) write(m *pb.Message) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
	if _, err := p.w.Write(hdr[:]); err != nil {
		return err
	}
	_, err = p.w.Write(b)
	return err
}
