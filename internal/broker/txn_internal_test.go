package broker

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strconv"
	"syscall"
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

// A broker that cannot be reached (its SYNs dropped: here a listener whose accept queue is
// full) holds up only the requests to it: a connection to another broker is made while the
// dial to it still waits. With one lock over every dial, verification and markers to every
// broker waited for the unreachable one's dial timeout.
func TestPeersDialOneBrokerAtATime(t *testing.T) {
	stuck := fullListener(t)
	ok, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ok.Close()
	go func() {
		for {
			c, err := ok.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	cfg := config.Default()
	b := &Broker{cfg: cfg, log: slog.New(slog.DiscardHandler), meta: metadata.NewPublisher()}
	endpoint := func(id int32, addr string) state.Record {
		_, port, _ := net.SplitHostPort(addr)
		pn, _ := strconv.Atoi(port)
		return &state.RegisterBrokerRecord{NodeID: id, BrokerEpoch: 1, Endpoints: []state.Endpoint{{Name: cfg.InterBrokerListenerName, Host: "127.0.0.1", Port: int32(pn)}}}
	}
	if err := b.meta.Apply(1, []state.Record{endpoint(2, stuck), endpoint(3, ok.Addr().String())}); err != nil {
		t.Fatal(err)
	}
	p := newPeers(b)
	defer p.Close()
	stuckDone := make(chan error, 1)
	go func() {
		_, _, err := p.conn(context.Background(), 2)
		stuckDone <- err
	}()
	// Wait until the dial to broker 2 is under way (its dial lock taken).
	deadline := time.Now().Add(10 * time.Second)
	for {
		pr, _, _ := p.live(2)
		if !pr.dial.TryLock() {
			break
		}
		pr.dial.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("the dial to broker 2 never started")
		}
		time.Sleep(time.Millisecond)
	}
	if _, _, err := p.conn(context.Background(), 3); err != nil {
		t.Fatalf("dialing broker 3: %v", err)
	}
	select {
	case err := <-stuckDone:
		t.Fatalf("broker 3's connection waited for broker 2's dial to end (%v)", err)
	default:
	}
}

// fullListener returns the address of a listening socket with a backlog of 0 whose queue is
// filled, so that a further connect waits for its SYN to be answered.
func fullListener(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	for i := 0; ; i++ {
		if i == 16 {
			t.Fatal("the listener's queue never filled")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		cancel()
		if err != nil {
			return addr // this connect waited: the queue is full
		}
		t.Cleanup(func() { c.Close() })
	}
}
