package security_test

import (
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/security"
	"github.com/gregor-project/gregor/internal/wire"
)

// The broker's own connections (internal/wire, as follower fetches and controller requests
// use them) renew their SASL session before connections.max.reauth.ms ends it: two
// goroutines sending requests on one connection across several lifetimes never see it
// closed.
func TestBrokerConnectionsRenewTheirSession(t *testing.T) {
	_, addr := saslPlaintext(t, "connections.max.reauth.ms=1000")
	sec := &security.Client{Mechanism: security.Plain, Username: "admin", Password: "admin-secret"}
	c, err := wire.DialSecure(ctxT(t), addr, "renew-test", sec)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	end := time.Now().Add(3500 * time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Now().Before(end); n++ {
				req := kmsg.NewPtrMetadataRequest()
				req.Version = 9
				if _, err := c.Request(ctxT(t), req); err != nil {
					errs <- err
					return
				}
				time.Sleep(20 * time.Millisecond) // a steady client, not synchronisation
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a request across session renewals: %v", err)
	}
	if err := c.Err(); err != nil {
		t.Fatalf("the connection failed: %v", err)
	}
}
