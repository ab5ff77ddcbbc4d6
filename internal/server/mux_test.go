package server

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"
)

func newTestMux(t *testing.T, timeout time.Duration) *Mux {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := newMux(ln, "GRFT", timeout, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() { m.Close() })
	return m
}

// sendAndClose dials the mux, writes b and closes the write side.
func sendAndClose(t *testing.T, addr net.Addr, b string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte(b)); err != nil {
		t.Fatal(err)
	}
	// The mux may already have closed the connection (a closed half drops it as soon as
	// the magic is read); with bytes still unread that resets it, and CloseWrite then
	// fails: the test sees the close when it reads.
	if err := c.(*net.TCPConn).CloseWrite(); err != nil && !connReset(err) {
		t.Fatal(err)
	}
	return c
}

// connReset reports the errors of a connection the peer reset: ENOTCONN from shutdown(2)
// once the RST has moved the socket to CLOSED.
func connReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ENOTCONN)
}

// acceptAll accepts one connection from ln and returns everything it sends.
func acceptAll(t *testing.T, ln net.Listener) string {
	t.Helper()
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			ch <- res{err: err}
			return
		}
		defer c.Close()
		b, err := io.ReadAll(c)
		ch <- res{string(b), err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.s
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted")
		return ""
	}
}

func TestMuxSplitsByMagicAndReplaysIt(t *testing.T) {
	m := newTestMux(t, 5*time.Second)
	sendAndClose(t, m.Addr(), "GRFT\x01raft bytes")
	sendAndClose(t, m.Addr(), "\x00\x00\x00\x10kafka request")
	sendAndClose(t, m.Addr(), "GRF") // shorter than the magic: closed, never delivered
	if got := acceptAll(t, m.Matched()); got != "GRFT\x01raft bytes" {
		t.Fatalf("matched half read %q", got)
	}
	if got := acceptAll(t, m.Other()); got != "\x00\x00\x00\x10kafka request" {
		t.Fatalf("other half read %q", got)
	}
}

// A client that connects and sends nothing does not hold up later connections, and is
// closed once the peek deadline passes.
func TestMuxSilentConnectionDoesNotBlock(t *testing.T) {
	m := newTestMux(t, 300*time.Millisecond)
	silent, err := net.Dial("tcp", m.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	sendAndClose(t, m.Addr(), "GRFTx")
	if got := acceptAll(t, m.Matched()); got != "GRFTx" {
		t.Fatalf("matched half read %q", got)
	}
	silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("silent connection was not closed after the peek timeout")
		}
	}
}

func TestMuxCloseClosesBothHalves(t *testing.T) {
	m := newTestMux(t, time.Second)
	errs := make(chan error, 2)
	for _, ln := range []net.Listener{m.Matched(), m.Other()} {
		go func() { _, err := ln.Accept(); errs <- err }()
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, net.ErrClosed) {
				t.Fatalf("Accept after Close: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Accept still blocked after Close")
		}
	}
}

// Closing one half leaves the other serving; closing both closes the parent.
func TestMuxHalvesCloseIndependently(t *testing.T) {
	m := newTestMux(t, time.Second)
	m.Matched().Close()
	c := sendAndClose(t, m.Addr(), "GRFTraft")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection for the closed half was not closed")
	}
	sendAndClose(t, m.Addr(), "kafka")
	if got := acceptAll(t, m.Other()); got != "kafka" {
		t.Fatalf("other half read %q", got)
	}
	m.Other().Close()
	select {
	case <-m.done:
	case <-time.After(5 * time.Second):
		t.Fatal("parent listener not closed with both halves")
	}
}
