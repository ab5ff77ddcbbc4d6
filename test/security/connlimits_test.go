package security_test

import (
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// A connection closed by a failed TLS handshake gives its max.connections.per.ip slot back:
// after several from one address, that address still connects (its limit is 1).
func TestFailedHandshakesReleaseConnectionSlots(t *testing.T) {
	ca := testutil.NewCA(t)
	b := startSecure(t, []string{"SSL"}, sslSets(ca, "", "max.connections.per.ip.overrides=127.0.0.2:1")...)
	addr := addrOf(t, b, "SSL")
	from := &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}
	for range 3 {
		nc, err := (&net.Dialer{LocalAddr: from, Timeout: 5 * time.Second}).Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		garbage := &rawConn{t: t, nc: nc, fmt: kmsg.NewRequestFormatter()}
		if _, err := nc.Write([]byte(strings.Repeat("\x16\x03\x01\xff\xff garbage ", 64))); err != nil {
			t.Fatal(err)
		}
		if !garbage.closed() {
			t.Fatal("garbage instead of a ClientHello was not refused")
		}
		nc.Close()
	}
	// The slot comes back once the broker's connection goroutine ends, just after the close
	// the client saw: try until a deadline.
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := &tls.Dialer{NetDialer: &net.Dialer{LocalAddr: from, Timeout: 5 * time.Second}, Config: tlsTo(ca)}
		nc, err := d.Dial("tcp", addr)
		if err == nil {
			c := &rawConn{t: t, nc: nc, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw"))}
			c.send(kmsg.NewPtrApiVersionsRequest())
			_, err = c.frame()
			nc.Close()
			if err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no TLS connection from 127.0.0.2 after failed handshakes: %v", err)
		}
	}
}
