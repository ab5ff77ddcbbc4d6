package security_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/security"
	"github.com/gregor-project/gregor/internal/testutil"
)

// Megabytes of records cross an SSL listener intact both ways, in produce requests and fetch
// answers of about 1 MiB (some 64 TLS records each), from a client with crypto/tls straight
// on its socket (one write per record) and from one that corks its requests over a
// security.Wire as the command-line tools do; the broker reads both through its own Wire.
func TestSSLBulkRecords(t *testing.T) {
	ca := testutil.NewCA(t)
	b := startSecure(t, []string{"SSL"}, sslSets(ca, "")...)
	addr := addrOf(t, b, "SSL")
	wired := kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		c, err := security.DialWire(ctx, &net.Dialer{Timeout: 10 * time.Second}, network, host, tlsTo(ca))
		if err != nil {
			return nil, err
		}
		return c, nil
	})
	for _, tc := range []struct {
		topic string
		dial  kgo.Opt
	}{{"bulk-tls", kgoTLS(tlsTo(ca))}, {"bulk-wire", wired}} {
		t.Run(tc.topic, func(t *testing.T) {
			topic := tc.topic
			cl := client(t, addr, tc.dial, kgo.ProducerLinger(50*time.Millisecond), kgo.FetchMaxBytes(1<<20))
			produceConsume(t, cl, topic) // creates the topic; the client then consumes it on
			ctx := ctxT(t)
			want := make([][]byte, 96)
			for i := range want {
				want[i] = make([]byte, 60<<10)
				rand.Read(want[i])
				cl.Produce(ctx, &kgo.Record{Topic: topic, Value: want[i]}, func(_ *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce: %v", err)
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			var got [][]byte
			for len(got) < len(want) {
				fs := cl.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("consumed %d of %d records: %v", len(got), len(want), err)
				}
				fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
				fs.EachRecord(func(r *kgo.Record) {
					if r.Topic == topic {
						got = append(got, r.Value)
					}
				})
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("record %d came back changed", i)
				}
			}
		})
	}
}
