package limits

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/testutil"
)

// An acks=all Produce waiting for its followers does not hold its request's memory: the
// followers' fetches, which need memory from the same pool to be read, would otherwise wait
// for the produce requests that wait for them, until the produce timeout. Here two produce
// requests of nearly the whole pool each, sent to the leader at once, overdraw it; both must
// be committed and acknowledged, not time out (nor fail once the starved follower drops out
// of the ISR).
func TestAcksAllWaitHoldsNoRequestMemory(t *testing.T) {
	const pool = 1 << 20
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 1, Sets: []string{
		"queued.max.request.bytes=1048576", "socket.request.max.bytes=1048576",
	}})
	c.AddBroker(2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.Client(t))
	// min.insync.replicas 2: an ISR shrunk to the leader must not pass for a commit. The
	// second broker may not be registered and unfenced yet (INVALID_REPLICATION_FACTOR
	// until it is).
	c.WaitFor(t, 30*time.Second, func() bool {
		resp, err := adm.CreateTopic(ctx, 1, 2, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, "acks")
		if err == nil && resp.Err != nil && !errors.Is(resp.Err, kerr.InvalidReplicationFactor) && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
			t.Fatal(resp.Err)
		}
		return err == nil && (resp.Err == nil || errors.Is(resp.Err, kerr.TopicAlreadyExists))
	}, "topic acks created on two brokers")
	var leader int32 = -1
	c.WaitFor(t, 30*time.Second, func() bool {
		md, err := adm.Metadata(ctx, "acks")
		if err != nil {
			return false
		}
		p, ok := md.Topics["acks"].Partitions[0]
		if !ok || len(p.ISR) != 2 || !slices.Contains(p.ISR, p.Leader) {
			return false
		}
		leader = p.Leader
		return true
	}, "both replicas of acks-0 in the ISR")

	// 15 records of 64 KiB: a request of 983 KiB, so the second one in takes the pool below zero.
	frame := produceFrame(t, "acks", 15, 64<<10, 20000)
	if len(frame) > pool || 2*len(frame) < pool+64<<10 {
		t.Fatalf("a request of %d bytes does not overdraw a %d-byte pool twice over", len(frame), pool)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := produceOver(c.Node(leader).ClientAddr(), frame)
			if err == nil && r.ErrorCode != 0 {
				err = kerr.ErrorForCode(r.ErrorCode)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("acks=all produce %d: %v", i, err)
		}
	}
}
