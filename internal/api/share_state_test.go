package api_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/testutil"
)

// A share-partition's state survives a restart (__share_group_state): records accepted
// before it never come back, records acquired and not acknowledged are delivered again
// with their delivery count kept, and nothing is skipped.
func TestShareStateSurvivesRestart(t *testing.T) {
	b := testutil.StartBroker(t, shareBroker...)
	c := shareTopic(t, b.Addr(), "durable", "g-durable", 1, 10)[0]
	got, _ := c.fetch(nil, 100, 0)
	if len(got) != 10 {
		t.Fatalf("acquired %v, want offsets 0-9", got)
	}
	if code := c.acknowledge(ack(0, 3, ackAccept), ack(4, 4, ackReject)); code != 0 {
		t.Fatalf("accept 0-3, reject 4: %v", kerr.ErrorForCode(code))
	}

	b = b.Restart()
	c = joinShare(t, b.Addr(), "g-durable", "durable", "g-durable-after")
	var again []shareRec
	for tries := 0; len(again) < 5 && tries < 40; tries++ {
		more, _ := c.fetch(nil, 100, 500)
		again = append(again, more...)
	}
	for i, r := range again {
		if r.off != int64(5+i) || r.deliveries != 2 {
			t.Fatalf("after the restart delivered %v, want offsets 5-9 with delivery count 2", again)
		}
	}
	if code := c.acknowledge(ack(5, 9, ackAccept)); code != 0 {
		t.Fatalf("accept 5-9 after the restart: %v", kerr.ErrorForCode(code))
	}

	b = b.Restart()
	c = joinShare(t, b.Addr(), "g-durable", "durable", "g-durable-last")
	if more, _ := c.fetch(nil, 100, 0); len(more) != 0 {
		t.Fatalf("after the second restart delivered %v, want nothing: 0-9 are done", more)
	}
}

// Records acquired but never acknowledged when the broker restarts are delivered again: the
// share-partition's start offset was made durable before its first fetch, so the new
// leader does not start afresh at the high watermark past them.
func TestShareStateRestartRedeliversUnacknowledged(t *testing.T) {
	b := testutil.StartBroker(t, shareBroker...)
	c := shareTopic(t, b.Addr(), "unacked", "g-unacked", 1, 10)[0]
	if got, _ := c.fetch(nil, 100, 0); len(got) != 10 {
		t.Fatalf("acquired %v, want offsets 0-9", got)
	}
	b = b.Restart()
	c = joinShare(t, b.Addr(), "g-unacked", "unacked", "g-unacked-after")
	var again []shareRec
	for tries := 0; len(again) < 10 && tries < 40; tries++ {
		more, _ := c.fetch(nil, 100, 500)
		again = append(again, more...)
	}
	if len(again) != 10 {
		t.Fatalf("after the restart delivered %v, want offsets 0-9", again)
	}
	for i, r := range again {
		if r.off != int64(i) {
			t.Fatalf("after the restart delivered %v, want offsets 0-9", again)
		}
	}
}
