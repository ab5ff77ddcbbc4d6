package api_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/gregor-project/gregor/internal/testutil"
)

// recordsEnd is the offset after the last batch of a fetch's record bytes (-1: none).
func recordsEnd(t *testing.T, b []byte) int64 {
	t.Helper()
	end := int64(-1)
	for len(b) >= 27 {
		n := 12 + int(binary.BigEndian.Uint32(b[8:12]))
		if n > len(b) {
			break // a partial batch at the end
		}
		end = int64(binary.BigEndian.Uint64(b[:8])) + int64(binary.BigEndian.Uint32(b[23:27])) + 1
		b = b[n:]
	}
	return end
}

// A read_committed fetch lists the aborted transactions overlapping the records it returns,
// as Kafka bounds them by the end of the fetched data, not every aborted transaction up to
// the last stable offset: a consumer catching up on a log full of aborts would otherwise get
// (and the broker collect) the aborts of the whole rest of the log with every fetch.
func TestReadCommittedFetchAbortedTxnsBoundedByRecords(t *testing.T) {
	b := testutil.StartBroker(t)
	const topic, aborts = "txn-aborted-range", 20
	createTopic(t, b.Addr(), topic, 1, nil)
	p := txnProducer(t, b.Addr(), "txn-aborted-range", topic, tv1())
	for i := range aborts {
		inTxn(t, p, false, fmt.Sprintf("a%d", i))
	}
	waitTxnComplete(t, b.Addr(), "txn-aborted-range")

	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, 1<<20
	req.IsolationLevel = 1 // read_committed
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, 0, 1 // the first batch only (KIP-74)
	rt.Partitions = []kmsg.FetchRequestTopicPartition{rp}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(kmsg.Fetch.Int16(), 12) // topics by name
	resp := request[*kmsg.FetchResponse](t, newClient(t, b.Addr(), kgo.MaxVersions(vs)), req)
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		t.Fatalf("fetch: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	end := recordsEnd(t, sp.RecordBatches)
	if end != 1 {
		t.Fatalf("fetch of one batch from 0 returned records up to %d, want 1", end)
	}
	if sp.LastStableOffset != 2*aborts {
		t.Fatalf("last stable offset %d, want %d", sp.LastStableOffset, 2*aborts)
	}
	for _, a := range sp.AbortedTransactions {
		if a.FirstOffset >= end {
			t.Errorf("aborted transaction at %d listed for records ending at %d", a.FirstOffset, end)
		}
	}
	if len(sp.AbortedTransactions) != 1 {
		t.Fatalf("%d aborted transactions for a fetch of offset 0 only, want 1: %+v", len(sp.AbortedTransactions), sp.AbortedTransactions)
	}
}
