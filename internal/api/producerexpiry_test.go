package api_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// An idempotent producer idle past producer.id.expiration.ms is forgotten by the partition
// (checked every producer.id.expiration.check.interval.ms), as Kafka's
// removeExpiredProducers does: DescribeProducers lists it, then no longer does. Without the
// sweep every producer id a partition ever saw stayed in memory and in its snapshots.
func TestIdleProducerExpires(t *testing.T) {
	b := testutil.StartBroker(t, "producer.id.expiration.ms=200", "producer.id.expiration.check.interval.ms=50")
	createTopic(t, b.Addr(), "expiring", 1, nil)
	p := newClient(t, b.Addr(), kgo.DefaultProduceTopic("expiring"))
	produceSync(t, p, &kgo.Record{Value: []byte("v")})
	producers := func() int {
		req := kmsg.NewPtrDescribeProducersRequest()
		req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "expiring", Partitions: []int32{0}}}
		pp := request[*kmsg.DescribeProducersResponse](t, newClient(t, b.Addr()), req).Topics[0].Partitions[0]
		if pp.ErrorCode != 0 {
			t.Fatalf("DescribeProducers: error %d", pp.ErrorCode)
		}
		return len(pp.ActiveProducers)
	}
	if n := producers(); n != 1 {
		t.Fatalf("after the produce: %d producers listed, want 1", n)
	}
	deadline := time.Now().Add(20 * time.Second)
	for producers() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the idle producer is still listed 20 s after its expiration")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
