package broker

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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

// A leader that answers a marker UNSUPPORTED_VERSION or UNSUPPORTED_FOR_MESSAGE_FORMAT can
// never write it: as Kafka's marker channel does, the partition is dropped from the
// transaction's markers (and logged) instead of being retried for as long as this broker
// coordinates the transaction, which held it in PrepareCommit for ever.
func TestMarkerSenderDropsUnsupported(t *testing.T) {
	for _, code := range []int16{kerr.UnsupportedVersion.Code, kerr.UnsupportedForMessageFormat.Code} {
		addr := markerLeader(t, code)
		_, port, _ := net.SplitHostPort(addr)
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
		s := markerSender{b: b, peers: p, timeout: 10 * time.Second}
		tp := txn.TopicPartition{Topic: "out", Partition: 0}
		failed := s.WriteMarkers(context.Background(), txn.Markers{ProducerID: 1, Commit: true, Partitions: []txn.TopicPartition{tp}})
		p.Close()
		if len(failed) != 0 {
			t.Errorf("error %d: the partition is to be retried (%v), want it dropped", code, failed)
		}
	}
}

// markerLeader serves WriteTxnMarkers (flexible versions) on loopback, answering every
// partition with code.
func markerLeader(t *testing.T, code int16) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for {
					var size [4]byte
					if _, err := io.ReadFull(c, size[:]); err != nil {
						return
					}
					buf := make([]byte, binary.BigEndian.Uint32(size[:]))
					if _, err := io.ReadFull(c, buf); err != nil {
						return
					}
					version, corr := int16(binary.BigEndian.Uint16(buf[2:])), binary.BigEndian.Uint32(buf[4:])
					n := int(int16(binary.BigEndian.Uint16(buf[8:]))) // client id
					body := buf[10+max(n, 0)+1:]                      // and an empty tag section
					req := kmsg.NewPtrWriteTxnMarkersRequest()
					req.SetVersion(version)
					if err := req.ReadFrom(body); err != nil {
						return
					}
					resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
					for _, m := range req.Markers {
						rm := kmsg.NewWriteTxnMarkersResponseMarker()
						rm.ProducerID = m.ProducerID
						for _, rt := range m.Topics {
							st := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
							st.Topic = rt.Topic
							for _, part := range rt.Partitions {
								sp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
								sp.Partition, sp.ErrorCode = part, code
								st.Partitions = append(st.Partitions, sp)
							}
							rm.Topics = append(rm.Topics, st)
						}
						resp.Markers = append(resp.Markers, rm)
					}
					out := binary.BigEndian.AppendUint32(nil, corr)
					out = append(out, 0) // the flexible response header's tags
					out = resp.AppendTo(out)
					if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(out))), out...)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}
