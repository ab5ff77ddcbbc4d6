package wire_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
	"github.com/gregor-project/gregor/internal/wire"
)

func TestRequestsAgainstBroker(t *testing.T) {
	b := testutil.StartBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := wire.Dial(ctx, b.Addr(), "wire-test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// ApiVersions keeps a v0 response header even at a flexible version.
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	resp, err := c.Request(ctx, av)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 || len(r.ApiKeys) == 0 {
		t.Fatalf("ApiVersions: %+v", r)
	}

	// Pipelined flexible requests from many goroutines each get their own answer.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(int16(9 + i%4))
			resp, err := c.Request(ctx, req)
			if err != nil {
				t.Error(err)
				return
			}
			if r := resp.(*kmsg.MetadataResponse); len(r.Brokers) != 1 {
				t.Errorf("metadata v%d: %d brokers", req.Version, len(r.Brokers))
			}
		}()
	}
	wg.Wait()

	// A closed connection fails requests at once.
	c.Close()
	if _, err := c.Request(ctx, av); err == nil {
		t.Fatal("request on a closed connection succeeded")
	}
}

func TestDeadConnectionFailsWaiters(t *testing.T) {
	b := testutil.StartBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := wire.Dial(ctx, b.Addr(), "wire-test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A fetch that parks for 5 s; the broker closing answers it or fails the connection,
	// never leaves the caller hanging.
	done := make(chan error, 1)
	go func() {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.MaxWaitMillis = 5000
		req.MinBytes = 1
		_, err := c.Request(ctx, req)
		done <- err
	}()
	b.Close()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("request still waiting after the broker closed")
	}
}
