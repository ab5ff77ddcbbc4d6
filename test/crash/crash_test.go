// Package crash kills a real broker process mid-stream and proves that every acknowledged
// record survives exactly once and in order.
package crash

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

func TestKill9LosesNoAcknowledgedRecord(t *testing.T) {
	dir := t.TempDir()
	port := testutil.FreePort(t)
	// Small segments so the crash lands among several rolls and index entries.
	sets := []string{"log.segment.bytes=262144", "num.partitions=3"}
	p := testutil.StartProcess(t, dir, port, sets...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	admCl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(admCl).CreateTopic(ctx, 3, 1, nil, "crash"); err != nil {
		t.Fatal(err)
	}
	admCl.Close()

	const rounds = 3
	acked := map[uint64]bool{}
	var mu sync.Mutex
	seq := uint64(0)
	for round := 0; round < rounds; round++ {
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr), kgo.DefaultProduceTopic("crash"),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(5*time.Second),
			kgo.ProducerLinger(time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		// Produce continuously; kill the broker once enough has been acknowledged.
		target := 5000 * (round + 1)
		for {
			mu.Lock()
			n := len(acked)
			mu.Unlock()
			if n >= target {
				break
			}
			for i := 0; i < 200; i++ {
				seq++
				v := binary.BigEndian.AppendUint64(make([]byte, 0, 100), seq)
				v = append(v, make([]byte, 92)...)
				key := binary.BigEndian.AppendUint64(nil, seq%97)
				id := seq
				cl.Produce(ctx, &kgo.Record{Key: key, Value: v}, func(_ *kgo.Record, err error) {
					if err == nil {
						mu.Lock()
						acked[id] = true
						mu.Unlock()
					}
				})
			}
			if ctx.Err() != nil {
				t.Fatal("timed out producing")
			}
		}
		p.Kill() // mid-stream: records are still in flight
		cl.Close()
		p = testutil.StartProcess(t, dir, port, sets...)
	}

	mu.Lock()
	defer mu.Unlock()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr), kgo.ConsumeTopics("crash"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "crash")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	seen := map[uint64]int{}
	lastByPart := map[int32]int64{}
	lastSeqByKey := map[string]uint64{}
	read := int64(0)
	for read < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", read, total)
		}
		fs.EachRecord(func(r *kgo.Record) {
			read++
			if last, ok := lastByPart[r.Partition]; ok && r.Offset != last+1 {
				t.Errorf("partition %d: offset %d after %d (offsets must be contiguous)", r.Partition, r.Offset, last)
			}
			lastByPart[r.Partition] = r.Offset
			id := binary.BigEndian.Uint64(r.Value)
			seen[id]++
			if prev := lastSeqByKey[string(r.Key)]; id <= prev {
				t.Errorf("key %x: record %d after %d (out of order)", r.Key, id, prev)
			}
			lastSeqByKey[string(r.Key)] = id
		})
	}
	lost, dup := 0, 0
	for id := range acked {
		if seen[id] == 0 {
			lost++
		}
	}
	for _, n := range seen {
		if n > 1 {
			dup++
		}
	}
	t.Logf("acknowledged %d, stored %d, lost %d, duplicated %d over %d kills", len(acked), total, lost, dup, rounds)
	if lost > 0 || dup > 0 {
		t.Fatalf("lost %d acknowledged records, %d duplicated", lost, dup)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("clean stop: %v", err)
	}
}
