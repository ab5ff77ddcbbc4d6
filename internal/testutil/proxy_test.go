package testutil

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// echoServer accepts connections on a loopback port and writes back every
// line it reads. Its accepted connections are kept so a test can close them
// from the server side; each connection's end (EOF or error) is reported on
// ended.
type echoServer struct {
	ln    net.Listener
	ended chan struct{}

	mu    sync.Mutex
	conns []net.Conn
}

func startEcho(t *testing.T) *echoServer { return startEchoOn(t, "127.0.0.1:0") }

// startEchoOn is startEcho on a given address.
func startEchoOn(t *testing.T, addr string) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln, ended: make(chan struct{}, 100)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			go func() {
				defer c.Close()
				// A reset (a cut proxy) ends the echo like EOF does.
				_, _ = io.Copy(c, c)
				s.ended <- struct{}{}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			c.Close()
		}
	})
	return s
}

func (s *echoServer) addr() string { return s.ln.Addr().String() }

// closeAll closes every connection the server accepted.
func (s *echoServer) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
}

// roundTrip writes one line on c and reads it back.
func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, line string) {
	t.Helper()
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	got, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if strings.TrimSuffix(got, "\n") != line {
		t.Fatalf("echo: got %q, want %q", got, line)
	}
}

// expectClosed checks that c is closed by the far side: a read ends with EOF
// or a reset within the deadline, never a timeout.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	var buf [64]byte
	for {
		n, err := c.Read(buf[:])
		if n > 0 {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("connection still open: read timed out")
		}
		if err != nil {
			return
		}
	}
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

func TestProxyForwardsBothWays(t *testing.T) {
	echo := startEcho(t)
	p := StartProxy(t, echo.addr(), ProxyOptions{})
	if p.Target() != echo.addr() {
		t.Fatalf("Target = %s, want %s", p.Target(), echo.addr())
	}
	c1, r1 := dial(t, p.Addr())
	c2, r2 := dial(t, p.Addr())
	roundTrip(t, c1, r1, "one")
	roundTrip(t, c2, r2, "two")
	roundTrip(t, c1, r1, strings.Repeat("x", 1<<20)) // larger than socket buffers
	if n := p.Conns(); n != 2 {
		t.Fatalf("Conns = %d, want 2", n)
	}
}

func TestProxyCutAndHeal(t *testing.T) {
	echo := startEcho(t)
	p := StartProxy(t, echo.addr(), ProxyOptions{})
	c, r := dial(t, p.Addr())
	roundTrip(t, c, r, "before")

	p.Cut()
	expectClosed(t, c)
	// Cutting closed the target side too.
	select {
	case <-echo.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("target connection still open after Cut")
	}
	// New connections are accepted and closed at once.
	for range 3 {
		c2, _ := dial(t, p.Addr())
		expectClosed(t, c2)
	}
	if n := p.Conns(); n != 0 {
		t.Fatalf("Conns = %d after Cut, want 0", n)
	}

	p.Heal()
	c3, r3 := dial(t, p.Addr())
	roundTrip(t, c3, r3, "after")
}

func TestProxyClosingOneSideClosesTheOther(t *testing.T) {
	echo := startEcho(t)
	p := StartProxy(t, echo.addr(), ProxyOptions{})

	// The client closes: the target sees its connection end.
	c, r := dial(t, p.Addr())
	roundTrip(t, c, r, "hello")
	c.Close()
	select {
	case <-echo.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("target connection still open after the client closed")
	}

	// The target closes: the client sees its connection end.
	c2, r2 := dial(t, p.Addr())
	roundTrip(t, c2, r2, "hello")
	echo.closeAll()
	expectClosed(t, c2)

	deadline := time.Now().Add(5 * time.Second)
	for p.Conns() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("Conns = %d, want 0 once both connections ended", p.Conns())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestProxyTargetDown(t *testing.T) {
	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := StartProxy(t, addr, ProxyOptions{})
	c, _ := dial(t, p.Addr())
	expectClosed(t, c)
}

func TestProxyCutPeer(t *testing.T) {
	echo := startEcho(t)
	// Peers are told apart by the client's local port: the test binds its
	// clients itself.
	var mu sync.Mutex
	names := map[int]string{}
	p := StartProxy(t, echo.addr(), ProxyOptions{Identify: func(c net.Conn) string {
		mu.Lock()
		defer mu.Unlock()
		return names[c.RemoteAddr().(*net.TCPAddr).Port]
	}})
	dialAs := func(name string) (net.Conn, *bufio.Reader) {
		t.Helper()
		port := FreePort(t)
		mu.Lock()
		names[port] = name
		mu.Unlock()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	a, ra := dialAs("a")
	b, rb := dialAs("b")
	roundTrip(t, a, ra, "a1")
	roundTrip(t, b, rb, "b1")

	p.CutPeer("a")
	expectClosed(t, a)
	roundTrip(t, b, rb, "b2") // b's connection is untouched
	a2, _ := dialAs("a")
	expectClosed(t, a2) // a is refused
	b2, rb2 := dialAs("b")
	roundTrip(t, b2, rb2, "b3") // b still gets in

	p.HealPeer("a")
	a3, ra3 := dialAs("a")
	roundTrip(t, a3, ra3, "a2")
}

func TestProxyClose(t *testing.T) {
	echo := startEcho(t)
	p, err := NewProxy(echo.addr(), ProxyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, r := dial(t, p.Addr())
	roundTrip(t, c, r, "x")
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	expectClosed(t, c)
	if c2, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		c2.Close()
		t.Fatal("dial after Close succeeded")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
