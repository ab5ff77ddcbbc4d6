package observe

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/gregor-project/gregor/internal/testutil"
)

// An in-process broker on http.listener port 0 says where it listens (HTTPAddr), is ready
// once Start returns, and may be scraped all through its start and its shutdown.
func TestScrapedThroughStartAndClose(t *testing.T) {
	port := testutil.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	scrapes := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if scrape(addr) != nil {
				scrapes++
			}
			status(addr, "/readyz")
		}
	}()
	b := testutil.StartBroker(t, "http.listener="+addr)
	if got := b.HTTPAddr().String(); got != addr {
		t.Fatalf("HTTPAddr %s, configured %s", got, addr)
	}
	if got := status(addr, "/readyz"); got != http.StatusOK {
		t.Fatalf("/readyz after Start: %d", got)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if scrapes == 0 {
		t.Fatal("no scrape answered while the broker ran")
	}
	if got := status(addr, "/healthz"); got != 0 {
		t.Fatalf("/healthz after Close: %d", got)
	}

	// Port 0 picks one; an empty http.listener serves nothing.
	b = testutil.StartBroker(t)
	if a := b.HTTPAddr(); a == nil || status(a.String(), "/healthz") != http.StatusOK {
		t.Fatalf("http.listener=127.0.0.1:0: %v", a)
	}
	if off := testutil.StartBroker(t, "http.listener="); off.HTTPAddr() != nil {
		t.Fatalf("http.listener empty, yet listening on %v", off.HTTPAddr())
	}
}
