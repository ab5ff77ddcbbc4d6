package api_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// A fetch parked on a partition whose topic is then deleted answers at once with a retriable
// error (the client refreshes metadata and finds the topic gone), not UNKNOWN_SERVER_ERROR
// after max_wait: the log it was reading is closed.
func TestFetchParkedTopicDeleted(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "doomed", 1, nil)
	cl := newClient(t, b.Addr())
	req := fetchReq(t, b.Addr(), "doomed", 0, 0, 60000)
	done := make(chan parkedFetch, 1)
	// The goroutine reports through done only: it may outlive a test that failed first.
	ctx := ctxT(t)
	go func() {
		resp, err := cl.Request(ctx, req)
		fr, _ := resp.(*kmsg.FetchResponse)
		done <- parkedFetch{fr, err}
	}()
	select {
	case <-done:
		t.Fatal("fetch answered before the topic was deleted")
	case <-time.After(200 * time.Millisecond): // not synchronisation: a negative check window
	}
	dr, err := newAdmin(t, b.Addr()).DeleteTopics(ctxT(t), "doomed")
	if err != nil || dr["doomed"].Err != nil {
		t.Fatalf("delete: %v %v", err, dr["doomed"].Err)
	}
	select {
	case r := <-done:
		if r.resp == nil {
			t.Fatalf("no response: %v", r.err)
		}
		p := r.resp.Topics[0].Partitions[0]
		switch p.ErrorCode {
		case kerr.NotLeaderForPartition.Code, kerr.UnknownTopicOrPartition.Code:
		default:
			t.Fatalf("parked fetch of a deleted topic: error %v", kerr.ErrorForCode(p.ErrorCode))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("parked fetch was not answered when its topic was deleted")
	}
}
