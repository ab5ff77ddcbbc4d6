package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Transactions across three broker processes: the coordinator writes its markers to
// partition leaders on other brokers (WriteTxnMarkers on the inter-broker listener), and a
// leader verifies a late write with a coordinator on another broker (AddPartitionsToTxn
// VerifyOnly) and refuses it.
func TestTransactionsAcrossBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3, Sets: []string{"transaction.state.log.num.partitions=3", "offsets.topic.num.partitions=3"}})
	addr := c.Node(1).ClientAddr()
	adm := newAdmin(t, addr)
	// Every broker unfenced first, or the controller may place all three on the first one.
	c.WaitBrokersReady(t, 30*time.Second)
	c.WaitFor(t, 30*time.Second, func() bool {
		resp, err := adm.CreateTopic(ctxT(t), 3, 1, nil, "spread")
		return err == nil && (resp.Err == nil || resp.Err == kerr.TopicAlreadyExists)
	}, "topic spread created")
	// The controller spreads the three partitions (RF 1) over the brokers: whichever
	// coordinates the transactional id, partitions led elsewhere are remote to it.
	leaders := map[int32]int32{}
	nodes := map[int32]bool{}
	c.WaitFor(t, 30*time.Second, func() bool {
		md, err := adm.Metadata(ctxT(t), "spread")
		if err != nil {
			return false
		}
		clear(leaders)
		clear(nodes)
		for _, p := range md.Topics["spread"].Partitions {
			if p.Leader < 0 {
				return false
			}
			leaders[p.Partition] = p.Leader
			nodes[p.Leader] = true
		}
		return len(leaders) == 3
	}, "three partitions of spread with leaders in metadata")
	if len(nodes) < 2 {
		t.Fatalf("partition leaders %v: want them on more than one broker", leaders)
	}
	p := newClient(t, addr, kgo.TransactionalID("spread-txn"), kgo.DefaultProduceTopic("spread"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceTo := func(commit bool, prefix string) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for part := int32(0); part < 3; part++ {
			if err := p.ProduceSync(ctxT(t), &kgo.Record{Partition: part, Value: []byte(prefix)}).FirstErr(); err != nil {
				t.Fatalf("produce to %d: %v", part, err)
			}
		}
		if err := p.EndTransaction(ctxT(t), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	produceTo(true, "c0")
	produceTo(false, "a0")
	produceTo(true, "c1")
	waitTxnComplete(t, addr, "spread-txn")

	// Each partition: c0, marker, a0, marker, c1, marker once every marker is written.
	for part := int32(0); part < 3; part++ {
		cl := newClient(t, addr, kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"spread": {part: kgo.NewOffset().AtStart()}}))
		var vs []string
		ctx := ctxT(t)
		for len(vs) < 2 && ctx.Err() == nil {
			for _, r := range cl.PollFetches(ctx).Records() {
				vs = append(vs, string(r.Value))
			}
		}
		if strings.Join(vs, ",") != "c0,c1" {
			t.Fatalf("partition %d (leader %d) read_committed: %v, want c0,c1", part, leaders[part], vs)
		}
	}

	// A late write to each partition, at Produce v11 with the transactional id: refused on
	// every leader after asking the coordinator, wherever it runs.
	pid, epoch, err := p.ProducerID(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	id := "spread-txn"
	for part := int32(0); part < 3; part++ {
		leader := v11Client(t, c.Node(leaders[part]).ClientAddr())
		r := txnProduceRawTo(t, leader, &id, "spread", part, pid, epoch, 2)
		if r.ErrorCode != kerr.InvalidTxnState.Code {
			t.Fatalf("late write to partition %d on broker %d: %v, want INVALID_TXN_STATE", part, leaders[part], kerr.ErrorForCode(r.ErrorCode))
		}
	}
}

// txnProduceRawTo is txnProduceRaw to a chosen partition, sent to the client's seed broker.
func txnProduceRawTo(t *testing.T, cl *kgo.Client, txnID *string, topic string, part int32, pid int64, epoch int16, seq int32) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := txnProduceRequest(t, txnID, topic, part, pid, epoch, seq)
	resp, err := cl.SeedBrokers()[0].Request(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}
