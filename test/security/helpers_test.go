// Package security_test runs Gregor's TLS and SASL listeners against real clients over TCP:
// franz-go for the Kafka protocol, and raw frames for what a misbehaving client sends.
package security_test

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// plainJAAS is a PLAIN JAAS line with users admin (also the broker's own) and alice.
const plainJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`

// startSecure starts a broker with a PLAINTEXT listener (inter-broker) and the given secured
// listeners (e.g. "SSL", "SASL_SSL"), each on a free port, plus sets.
func startSecure(t *testing.T, listeners []string, sets ...string) *testutil.Broker {
	t.Helper()
	ls := "listeners=PLAINTEXT://127.0.0.1:0"
	for _, l := range listeners {
		ls += "," + l + "://127.0.0.1:0"
	}
	return testutil.StartBroker(t, append([]string{ls}, sets...)...)
}

// sslSets are the key store settings of a PEM key store for listener l ("" for the plain keys).
func sslSets(ca *testutil.CA, l string, extra ...string) []string {
	p := ""
	if l != "" {
		p = "listener.name." + l + "."
	}
	c := ca.Issue("broker")
	return append([]string{p + "ssl.keystore.type=PEM", p + "ssl.keystore.location=" + ca.KeyPEM("broker-"+l, c)}, extra...)
}

func addrOf(t *testing.T, b *testutil.Broker, listener string) string {
	t.Helper()
	a := b.ListenerAddr(listener)
	if a == nil {
		t.Fatalf("no listener %s", listener)
	}
	return a.String()
}

func client(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.RetryTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func tlsTo(ca *testutil.CA, certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: ca.Pool(), Certificates: certs, ServerName: "127.0.0.1"}
}

// produceConsume writes three records to a new topic through cl and reads them back.
func produceConsume(t *testing.T, cl *kgo.Client, topic string) {
	t.Helper()
	ctx := ctxT(t)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	if c := resp.Topics[0].ErrorCode; c != 0 {
		t.Fatalf("create topic: error code %d", c)
	}
	for i := range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte{byte('a' + i)}}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	cl.AddConsumeTopics(topic)
	got := 0
	for got < 3 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of 3: %v", got, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		got += fs.NumRecords()
	}
}

// rawConn is a client that writes Kafka frames by hand.
type rawConn struct {
	t    *testing.T
	nc   net.Conn
	fmt  *kmsg.RequestFormatter
	corr int32
}

func dialRaw(t *testing.T, addr string, cfg *tls.Config) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if cfg != nil {
		tc := tls.Client(nc, cfg)
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		nc = tc
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw"))}
}

// send writes req; request reads its answer.
func (c *rawConn) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	if _, err := c.nc.Write(c.fmt.AppendRequest(nil, req, c.corr)); err != nil {
		c.t.Fatal(err)
	}
	return c.corr
}

// frame reads one size-prefixed frame; an error when the connection closed.
func (c *rawConn) frame() ([]byte, error) {
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var sz [4]byte
	if _, err := io.ReadFull(c.nc, sz[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(sz[:]))
	_, err := io.ReadFull(c.nc, b)
	return b, err
}

// request sends req and decodes its answer (header v0 or v1 by the request's flexibility).
func (c *rawConn) request(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	corr := c.send(req)
	b, err := c.frame()
	if err != nil {
		c.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		c.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	b = b[4:]
	if req.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		b = b[1:] // empty tagged fields
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(b); err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// closed waits for the broker to close the connection (reading nothing but EOF or a reset).
func (c *rawConn) closed() bool {
	c.t.Helper()
	_, err := c.frame()
	return err != nil && !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func kgoTLS(cfg *tls.Config) kgo.Opt { return kgo.DialTLSConfig(cfg) }

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
