package api_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Requests that only read transactions (DescribeTransactions, ListTransactions) on a
// cluster that never ran one do not create __transaction_state, as Kafka creates it only
// for FindCoordinator: the id is answered NOT_COORDINATOR (this broker owns no partition of
// the topic) and the list is empty. They created the topic before.
func TestReadingTransactionsCreatesNoTopic(t *testing.T) {
	b := testutil.StartBroker(t)
	cl := newClient(t, b.Addr())
	// Straight to the broker: the client's own routing would ask FindCoordinator first.
	seed := cl.SeedBrokers()[0]
	direct := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := seed.Request(ctxT(t), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	d := kmsg.NewPtrDescribeTransactionsRequest()
	d.TransactionalIDs = []string{"never-used"}
	ds := direct(d).(*kmsg.DescribeTransactionsResponse).TransactionStates
	if len(ds) != 1 || ds[0].ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("DescribeTransactions of an unknown id on a fresh broker: %+v, want NOT_COORDINATOR", ds)
	}
	l := direct(kmsg.NewPtrListTransactionsRequest()).(*kmsg.ListTransactionsResponse)
	if l.ErrorCode != 0 || len(l.TransactionStates) != 0 {
		t.Fatalf("ListTransactions on a fresh broker: error %d, %d states", l.ErrorCode, len(l.TransactionStates))
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("__transaction_state")}}
	mt := direct(md).(*kmsg.MetadataResponse).Topics
	if len(mt) != 1 || mt[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("__transaction_state after only reading: %+v, want UNKNOWN_TOPIC_OR_PARTITION", mt)
	}
}
