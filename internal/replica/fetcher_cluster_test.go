package replica_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/storage"
	"github.com/gregor-project/gregor/internal/testutil"
)

// Two real brokers over TCP: broker 1 leads a partition with ISR [1, 2]; broker 2 follows it
// through its Fetchers. Broker 2's log becomes byte-identical to broker 1's, broker 1's high
// watermark follows broker 2's fetches, and acks=all produces are answered.
func TestFetchersReplicateBetweenBrokers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := testutil.StartBroker(t, "node.id=1")
	b := testutil.StartBroker(t, "node.id=2")
	for _, br := range []*testutil.Broker{a, b} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "rep")
		cl.Close()
		if err != nil || resp.Err != nil {
			t.Fatalf("create topic: %v %v", err, resp.Err)
		}
	}
	// Each broker is its own single-node cluster: wait until its metadata made it the
	// partition's leader, then take the partition over by hand.
	var pa, pb *replica.Partition
	for i, br := range []*testutil.Broker{a, b} {
		id := int32(i + 1)
		var p *replica.Partition
		deadline := time.Now().Add(10 * time.Second)
		for {
			if p = br.Handler().Replicas.Get("rep", 0); p != nil {
				if leader, epoch, leads := p.Role(); leads && leader == id && epoch >= 0 {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("broker %d: partition not open and led", id)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if i == 0 {
			pa = p
		} else {
			pb = p
		}
	}
	_, epoch, _ := pa.Role()
	reg := replica.LeaderAndISR{Leader: 1, LeaderEpoch: epoch + 1, PartitionEpoch: pa.Registration().PartitionEpoch + 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	if err := pa.MakeLeader(reg, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if err := pb.MakeFollower(reg); err != nil {
		t.Fatal(err)
	}
	f := replica.NewFetchers(replica.FetcherOptions{
		LocalID:   2,
		Endpoint:  func(id int32) (string, bool) { return a.Addr(), id == 1 },
		MaxBytes:  4096,
		MaxWaitMs: 200,
		BackoffMs: 100,
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	defer f.Close()
	f.Follow(pb, 1, reg.LeaderEpoch)

	cl, err := kgo.NewClient(kgo.SeedBrokers(a.Addr()), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 50 {
		r := &kgo.Record{Topic: "rep", Value: fmt.Appendf(nil, "record %d %s", i, bytes.Repeat([]byte("v"), i*10))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("acks=all produce %d: %v", i, err)
		}
	}
	leo := pa.Log().LogEndOffset()
	if leo != 50 || pa.HighWatermark() != 50 {
		t.Fatalf("leader LEO %d HW %d, want 50/50", leo, pa.HighWatermark())
	}
	deadline := time.Now().Add(10 * time.Second)
	for pb.Log().LogEndOffset() != leo || pb.HighWatermark() != leo {
		if time.Now().After(deadline) {
			t.Fatalf("follower LEO %d HW %d, want %d", pb.Log().LogEndOffset(), pb.HighWatermark(), leo)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got, want := readLog(t, pb.Log()), readLog(t, pa.Log()); !bytes.Equal(got, want) {
		t.Fatalf("follower log (%d bytes) differs from the leader's (%d bytes)", len(got), len(want))
	}
	if lag, ok := f.Lag(pb); !ok || lag != 0 {
		t.Fatalf("lag %d %v", lag, ok)
	}
	t.Logf("replicated %d records", leo)
}

// readLog is the log's bytes from its start to its end.
func readLog(t *testing.T, l *storage.Log) []byte {
	t.Helper()
	var out []byte
	for pos := l.LogStartOffset(); pos < l.LogEndOffset(); {
		s, err := l.Read(pos, 1<<20, l.LogEndOffset(), true)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, s.Size)
		_, err = s.File.ReadAt(b, s.Pos)
		s.Release()
		if err != nil || len(b) == 0 {
			t.Fatalf("read at %d: %v (%d bytes)", pos, err, len(b))
		}
		out = append(out, b...)
		pos = lastOffset(b) + 1
	}
	return out
}

// lastOffset is the last offset of the last whole batch in b.
func lastOffset(b []byte) int64 {
	var last int64
	for len(b) > 0 {
		h, err := batch.ParseHeader(b)
		if err != nil || h.Size() > len(b) {
			break
		}
		last = h.LastOffset()
		b = b[h.Size():]
	}
	return last
}
