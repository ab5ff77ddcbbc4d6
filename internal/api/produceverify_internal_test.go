package api

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/storage"
	"github.com/gregor-project/gregor/internal/txn"
)

// fakeTxnCoordinator plays a remote transaction coordinator (node 2) answering the
// AddPartitionsToTxn of produce's verification: round i is answered codes[i] for every
// partition, after before(i) runs.
type fakeTxnCoordinator struct {
	mu     sync.Mutex
	rounds int
	codes  []int16
	before func(round int)
}

func (f *fakeTxnCoordinator) Request(_ context.Context, node int32, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.AddPartitionsToTxnRequest)
	f.mu.Lock()
	round := f.rounds
	f.rounds++
	f.mu.Unlock()
	f.before(round)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, tx := range req.Transactions {
		rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rt.TransactionalID = tx.TransactionalID
		for _, t := range tx.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				sp.Partition, sp.ErrorCode = p, f.codes[min(round, len(f.codes)-1)]
				st.Partitions = append(st.Partitions, sp)
			}
			rt.Topics = append(rt.Topics, st)
		}
		resp.Transactions = append(resp.Transactions, rt)
	}
	return resp, nil
}

// A Produce v12 (transaction version 2) that reaches the partition while the previous
// transaction's markers are still being written is answered CONCURRENT_TRANSACTIONS by the
// coordinator and asked again; the previous transaction's marker, landing between the two
// asks, clears the verification guard taken before it. Each round takes its guard anew, as
// Kafka's ReplicaManager does, so the batch confirmed by the second round is appended
// instead of being refused INVALID_TXN_STATE (which clients treat as fatal).
func TestVerifyRetryTakesFreshGuard(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	logs, err := storage.OpenManager(storage.OS, t.TempDir(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	m := replica.NewManager(storage.OS, logs, quiet)
	defer m.Close()
	p, err := m.Open("out", 0, replica.Settings{MaxMessageBytes: 1 << 20, MinInsyncReplicas: 1, Log: storage.DefaultConfig(), TxnVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	const pid = 7
	txnBatch := func(epoch int16, seq int32) ([]byte, []batch.Header) {
		h := batch.Header{PartitionLeaderEpoch: -1, Attributes: batch.AttrTransactional, BaseTimestamp: 1000, MaxTimestamp: 1000, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}
		b, err := batch.Build(h, []batch.Record{{Value: []byte("v")}}, batch.CodecNone)
		if err != nil {
			t.Fatal(err)
		}
		hd, err := batch.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		return b, []batch.Header{hd}
	}
	// The previous transaction (epoch 0) is open on the partition; EndTxn v5 aborted it,
	// bumping the epoch to 1, and its ABORT marker (in epoch 1) is on its way.
	g, _ := p.StartVerification(pid, 0)
	raw, hdrs := txnBatch(0, 0)
	if _, err := p.AppendVerified(raw, hdrs, 1000, -1, false, 10_000, g); err != nil {
		t.Fatal(err)
	}

	h := testHandler(t, nil)
	tid := txn.TopicName
	if err := h.Meta.Apply(1, []state.Record{
		&state.TopicRecord{Name: tid, TopicID: state.UUID{1}},
		&state.PartitionRecord{TopicID: state.UUID{1}, Partition: 0, Replicas: []int32{2}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 1},
	}); err != nil {
		t.Fatal(err)
	}
	f := &fakeTxnCoordinator{codes: []int16{kerr.ConcurrentTransactions.Code, 0}, before: func(round int) {
		if round == 0 { // the marker lands after the first round took its guard, before the second
			if _, err := p.WriteTxnMarker(replica.TxnMarker{ProducerID: pid, ProducerEpoch: 1, Commit: false}, 1000, 10_000); err != nil {
				t.Error(err)
			}
		}
	}}
	h.Brokers = f

	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(12)
	id := "app"
	req.TransactionID, req.Acks, req.TimeoutMillis = &id, 1, 10_000
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	st := kmsg.NewProduceResponseTopic()
	st.Topic = "out"
	st.Partitions = []kmsg.ProduceResponseTopicPartition{kmsg.NewProduceResponseTopicPartition()}
	resp.Topics = []kmsg.ProduceResponseTopic{st}
	raw, hdrs = txnBatch(1, 0)
	_, failed := h.appendTransactional(context.Background(), req, resp, []pendingAppend{{p: p, raw: raw, hdrs: hdrs}}, nil, 1000)
	sp := resp.Topics[0].Partitions[0]
	if failed || sp.ErrorCode != 0 {
		t.Fatalf("produce after %d rounds of verification: %v", f.rounds, kerr.ErrorForCode(sp.ErrorCode))
	}
	if f.rounds != 2 {
		t.Fatalf("%d rounds of verification, want 2", f.rounds)
	}
	if got := p.ActiveProducers(); len(got) != 1 || got[0].Epoch != 1 || got[0].TxnStartOffset != sp.BaseOffset {
		t.Fatalf("producer state after the append at %d: %+v", sp.BaseOffset, got)
	}
}
