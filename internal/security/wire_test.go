package security

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// countedConn counts the system calls made on a TCP connection.
type countedConn struct {
	net.Conn
	reads, writes atomic.Int64
}

func (c *countedConn) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return c.Conn.Read(p)
}

func (c *countedConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// wirePair is a TLS connection over Wires both ways on loopback TCP: a client WireConn and
// the server's tls.Conn, with the server's Wire and both TCP connections counted.
func wirePair(t *testing.T) (cli *WireConn, cliTCP *countedConn, srv *tls.Conn, srvWire *Wire, srvTCP *countedConn) {
	t.Helper()
	cert := selfSigned(t, "broker", "localhost")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type accepted struct {
		tc  *tls.Conn
		w   *Wire
		cc  *countedConn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			ch <- accepted{err: err}
			return
		}
		cc := &countedConn{Conn: nc}
		w := NewWire(cc)
		tc := tls.Server(w, &tls.Config{Certificates: []tls.Certificate{cert}})
		ch <- accepted{tc, w, cc, tc.Handshake()}
	}()
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cliTCP = &countedConn{Conn: nc}
	w := NewWire(cliTCP)
	tc := tls.Client(w, &tls.Config{RootCAs: roots, ServerName: "localhost"})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	a := <-ch
	if a.err != nil {
		t.Fatal(a.err)
	}
	t.Cleanup(func() { tc.Close(); a.tc.Close() })
	return &WireConn{Conn: tc, wire: w}, cliTCP, a.tc, a.w, a.cc
}

// A 1 MiB message crosses a Wire intact both ways, corked into one write (crypto/tls alone
// writes each 16 KiB record with its own system call: 64 for 1 MiB), and a reader that
// waits for more holds no read buffer.
func TestWireBatchesRecords(t *testing.T) {
	cli, cliTCP, srv, srvWire, srvTCP := wirePair(t)
	msg := make([]byte, 1<<20)
	rand.Read(msg)
	const maxWrites = 1

	before := cliTCP.writes.Load()
	if _, err := cli.Write(msg); err != nil {
		t.Fatal(err)
	}
	if n := cliTCP.writes.Load() - before; n > maxWrites {
		t.Errorf("client: %d socket writes for 1 MiB, want at most %d", n, maxWrites)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(srv, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("server read other bytes than the client wrote")
	}

	// A reader that has everything and wants more waits without a buffer.
	srv.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := srv.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the message: %v, want a deadline error", err)
	}
	if srvWire.rbuf != nil {
		t.Error("the server's Wire holds a read buffer while waiting for bytes")
	}
	srv.SetReadDeadline(time.Time{})

	// A corked write from the server side, as a WireConn corks its requests.
	before = srvTCP.writes.Load()
	srvWire.Cork()
	if _, err := srv.Write(got); err != nil {
		t.Fatal(err)
	}
	if err := srvWire.Uncork(); err != nil {
		t.Fatal(err)
	}
	if n := srvTCP.writes.Load() - before; n > maxWrites {
		t.Errorf("server: %d socket writes for 1 MiB, want at most %d", n, maxWrites)
	}
	back := make([]byte, len(msg))
	if _, err := io.ReadFull(cli, back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, msg) {
		t.Fatal("client read other bytes than the server wrote")
	}

	// Small writes, uncorked and corked, arrive in order and whole.
	var want []byte
	for i := range 100 {
		b := bytes.Repeat([]byte{byte(i)}, 1+i*97)
		want = append(want, b...)
		if _, err := cli.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	got = make([]byte, len(want))
	if _, err := io.ReadFull(srv, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("small writes arrived out of order or changed")
	}
}

// Closing a connection while another goroutine's answer is corked sends what was gathered
// or fails the write; it neither races nor loses the peer's view of the close.
func TestWireCloseWhileCorked(t *testing.T) {
	cli, _, srv, srvWire, _ := wirePair(t)
	srvWire.Cork()
	if _, err := srv.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Close() }()
	<-done
	srvWire.Uncork() // fails or sends: the socket is closed either way
	buf := make([]byte, 16)
	cli.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, err := cli.Read(buf)
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("the client never saw the connection close")
		}
		return
	}
}

// BenchmarkTLSStream streams 1 MiB messages from a TLS client to a TLS server on loopback,
// with crypto/tls straight on the sockets ("tls"), over Wires with corked writes ("wire"),
// and with a Wire on one side only. cpu-ns/op is the process's CPU time
// (user and system, both ends) per message.
func BenchmarkTLSStream(b *testing.B) {
	for _, mode := range []string{"tls", "wire", "wire-read", "wire-write"} {
		b.Run(mode, func(b *testing.B) {
			cert := selfSigned(b, "broker", "localhost")
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			wrap := func(nc net.Conn, side string) net.Conn {
				if mode == "wire" || mode == "wire-"+side {
					return NewWire(nc)
				}
				return nc
			}
			msg := make([]byte, 1<<20)
			rand.Read(msg)
			done := make(chan error, 1)
			go func() {
				nc, err := ln.Accept()
				if err != nil {
					done <- err
					return
				}
				tc := tls.Server(wrap(nc, "read"), &tls.Config{Certificates: []tls.Certificate{cert}})
				defer tc.Close()
				buf := make([]byte, len(msg))
				for {
					if _, err := io.ReadFull(tc, buf); err != nil {
						done <- nil
						return
					}
				}
			}()
			nc, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			w := wrap(nc, "write")
			tc := tls.Client(w, &tls.Config{InsecureSkipVerify: true})
			var conn net.Conn = tc
			if w, ok := w.(*Wire); ok {
				conn = &WireConn{Conn: tc, wire: w}
			}
			if err := tc.Handshake(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(msg)))
			cpu0 := processCPU()
			b.ResetTimer()
			for range b.N {
				if _, err := conn.Write(msg); err != nil {
					b.Fatal(err)
				}
			}
			conn.Close()
			<-done
			b.StopTimer()
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the process's user and system CPU time so far, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
