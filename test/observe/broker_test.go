package observe

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
	// Produce and fetch naming topics that do not exist make no series: a client cannot grow
	// the metrics by making up names.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod := kmsg.NewPtrProduceRequest()
	prod.Acks, prod.TimeoutMillis = 1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "made-up"
	pp := kmsg.NewProduceRequestTopicPartition()
	pt.Partitions = append(pt.Partitions, pp)
	prod.Topics = append(prod.Topics, pt)
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(12)
	fetch.MaxBytes, fetch.ReplicaID, fetch.SessionEpoch = 1<<20, -1, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "made-up-too"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	for _, req := range []kmsg.Request{prod, fetch} {
		if _, err := cl.Broker(1).Request(ctx, req); err != nil { // straight to the broker, unrouted
			t.Fatal(err)
		}
	}
	fams := scrape(b.HTTPAddr().String())
	for _, name := range []string{"made-up", "made-up-too"} {
		for _, m := range []string{"kafka_server_brokertopicmetrics_failedproducerequests_total", "kafka_server_brokertopicmetrics_failedfetchrequests_total"} {
			if present(fams, m, map[string]string{"topic": name}) {
				t.Errorf("%s{topic=%q} made for a topic that does not exist", m, name)
			}
		}
	}
	// A request is counted once its answer is written, so the answer can reach the client
	// (franz-go sends produce and fetch requests on connections of their own) first.
	deadline := time.Now().Add(10 * time.Second)
	for value(fams, "kafka_network_requestmetrics_requests_total", map[string]string{"request": "Produce"}) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the Produce request was not counted")
		}
		time.Sleep(10 * time.Millisecond)
		fams = scrape(b.HTTPAddr().String())
	}

	if off := testutil.StartBroker(t, "http.listener="); off.HTTPAddr() != nil {
		t.Fatalf("http.listener empty, yet listening on %v", off.HTTPAddr())
	}
}

// A controller-only node is ready once its quorum has a leader, and as the active
// controller counts the cluster from its own state.
func TestControllerOnlyNode(t *testing.T) {
	port := testutil.FreePort(t)
	b := testutil.StartBroker(t, "process.roles=controller", "node.id=1", "cluster.id=observe-controller-only",
		"controller.listener.names=CONTROLLER", fmt.Sprintf("listeners=CONTROLLER://127.0.0.1:%d", port),
		fmt.Sprintf("controller.quorum.voters=1@127.0.0.1:%d", port))
	addr := b.HTTPAddr().String()
	deadline := time.Now().Add(30 * time.Second)
	for status(addr, "/readyz") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("the controller-only node never became ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	fams := scrape(addr)
	if got := value(fams, "kafka_controller_kafkacontroller_activecontrollercount", nil); got != 1 {
		t.Fatalf("active controller count %v", got)
	}
	for _, m := range []string{"kafka_controller_kafkacontroller_offlinepartitionscount", "kafka_controller_kafkacontroller_globaltopiccount", "kafka_controller_kafkacontroller_fencedbrokercount"} {
		if !present(fams, m, nil) {
			t.Errorf("%s missing", m)
		}
	}
	if present(fams, "kafka_server_replicamanager_partitioncount", nil) {
		t.Error("a controller-only node reports broker gauges")
	}
}
