package broker

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/txn"
)

// A partition leader that takes the WriteTxnMarkers and never answers (a hung process, a
// half-open connection after its host vanished) fails the attempt after the marker
// request's timeout, as Kafka's marker channel's request.timeout.ms does, so the
// coordinator retries the partition at its leader of then; without a bound the attempt
// waited forever and the transaction hung in PrepareCommit for as long as this broker
// coordinated it.
func TestMarkerSenderTimesOutUnansweredLeader(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c) }() // reads, never answers
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	pn, _ := strconv.Atoi(port)

	cfg := config.Default()
	b := &Broker{cfg: cfg, log: slog.New(slog.DiscardHandler), meta: metadata.NewPublisher()}
	if err := b.meta.Apply(1, []state.Record{
		&state.RegisterBrokerRecord{NodeID: 2, BrokerEpoch: 1, Endpoints: []state.Endpoint{{Name: cfg.InterBrokerListenerName, Host: "127.0.0.1", Port: int32(pn)}}},
		&state.TopicRecord{Name: "out", TopicID: state.UUID{1}},
		&state.PartitionRecord{TopicID: state.UUID{1}, Partition: 0, Replicas: []int32{2}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 1},
	}); err != nil {
		t.Fatal(err)
	}
	p := newPeers(b)
	defer p.Close()
	s := markerSender{b: b, peers: p, timeout: 200 * time.Millisecond}
	tp := txn.TopicPartition{Topic: "out", Partition: 0}
	done := make(chan map[txn.TopicPartition]error, 1)
	go func() {
		done <- s.WriteMarkers(context.Background(), txn.Markers{ProducerID: 1, Commit: true, Partitions: []txn.TopicPartition{tp}})
	}()
	select {
	case failed := <-done:
		if failed[tp] == nil {
			t.Fatalf("an unanswered marker counted as written: %v", failed)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("WriteMarkers still waiting for a leader that never answers")
	}
}
