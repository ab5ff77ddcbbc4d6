package api_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// shareBenchRecords is the records each run consumes (100-byte values).
const shareBenchRecords = 100000

// BenchmarkShareConsume measures records/s read with 1, 4 and 16 share group members on one
// partition, every record accepted one by one (acknowledgements piggy-backed on the next
// ShareFetch, contiguous offsets coalesced into one batch as Kafka's client does), and next to
// it 16 plain consumers on 16 partitions of the same records (one partition each, no
// acknowledgement): the target is that 16 share consumers of one partition reach half of that.
//
//	go test ./internal/api -run XXX -bench BenchmarkShareConsume -benchtime 1x
func BenchmarkShareConsume(b *testing.B) {
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("share-consumers=%d", n), func(b *testing.B) { benchShare(b, n) })
	}
	b.Run("partition-consumers=16", benchPartitionConsumers)
}

// benchProduce creates topic with parts partitions and writes shareBenchRecords records.
func benchProduce(b *testing.B, addr, topic string, parts int32, before func()) {
	b.Helper()
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	if parts > 0 {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, parts, 1, nil, topic); err != nil {
			b.Fatal(err)
		}
	}
	if before != nil {
		before()
	}
	val := make([]byte, 100)
	rs := make([]*kgo.Record, 0, 1000)
	for i := 0; i < shareBenchRecords; i += 1000 {
		rs = rs[:0]
		for range 1000 {
			rs = append(rs, &kgo.Record{Value: val})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
}

func benchShare(b *testing.B, members int) {
	br := testutil.StartBroker(b, "group.initial.rebalance.delay.ms=0")
	var elapsed time.Duration
	for iter := 0; iter < b.N; iter++ {
		topic, group := fmt.Sprintf("sq%d", iter), fmt.Sprintf("sg%d", iter)
		type member struct {
			cl      *kgo.Client
			id      string
			topicID [16]byte
			epoch   int32
		}
		ms := make([]*member, members)
		fetch := func(m *member, acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchResponse {
			req := kmsg.NewPtrShareFetchRequest()
			req.Version, req.GroupID, req.MemberID = 1, &group, &m.id
			req.ShareSessionEpoch, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords = m.epoch, 100, 1, 1<<20, 500
			req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: m.topicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0, AcknowledgementBatches: acks}}}}
			resp, err := m.cl.SeedBrokers()[0].Request(context.Background(), req)
			if err != nil {
				b.Error(err)
				return nil
			}
			r := resp.(*kmsg.ShareFetchResponse)
			if r.ErrorCode != 0 {
				b.Errorf("share fetch: %v", kerr.ErrorForCode(r.ErrorCode))
				return nil
			}
			m.epoch++
			return r
		}
		benchProduce(b, br.Addr(), topic, 1, func() {
			// Join every member and open its session before producing: the share-partition
			// starts at the high watermark.
			for i := range ms {
				cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr()))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(cl.Close)
				m := &member{cl: cl, id: fmt.Sprintf("m%d", i)}
				hb := kmsg.NewPtrShareGroupHeartbeatRequest()
				hb.Version, hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = 1, group, m.id, []string{topic}
				hr, err := hb.RequestWith(context.Background(), cl)
				if err != nil || hr.ErrorCode != 0 || hr.Assignment == nil {
					b.Fatalf("join: %v %+v", err, hr)
				}
				m.topicID = hr.Assignment.TopicPartitions[0].TopicID
				if fetch(m, nil) == nil {
					b.FailNow()
				}
				ms[i] = m
			}
		})
		var total atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for _, m := range ms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
				for total.Load() < shareBenchRecords {
					r := fetch(m, acks)
					if r == nil {
						return
					}
					acks = acks[:0]
					for _, t := range r.Topics {
						for _, p := range t.Partitions {
							for _, a := range p.AcquiredRecords {
								total.Add(a.LastOffset - a.FirstOffset + 1)
								acks = append(acks, kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{
									FirstOffset: a.FirstOffset, LastOffset: a.LastOffset, AcknowledgeTypes: []int8{1},
								})
							}
						}
					}
				}
			}()
		}
		wg.Wait()
		elapsed += time.Since(start)
		if got := total.Load(); got != shareBenchRecords {
			b.Fatalf("consumed %d records, want %d", got, shareBenchRecords)
		}
	}
	b.ReportMetric(float64(shareBenchRecords*b.N)/elapsed.Seconds(), "records/s")
	b.ReportMetric(0, "ns/op")
}

func benchPartitionConsumers(b *testing.B) {
	br := testutil.StartBroker(b)
	const parts = 16
	var elapsed time.Duration
	for iter := 0; iter < b.N; iter++ {
		topic := fmt.Sprintf("pq%d", iter)
		benchProduce(b, br.Addr(), topic, parts, nil)
		var total atomic.Int64
		var wg sync.WaitGroup
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		start := time.Now()
		for p := int32(0); p < parts; p++ {
			cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr()),
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(cl.Close)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					fs := cl.PollRecords(ctx, 500)
					if total.Add(int64(fs.NumRecords())) >= shareBenchRecords {
						cancel() // the others wait on partitions already read
					}
				}
			}()
		}
		wg.Wait()
		elapsed += time.Since(start)
		cancel()
		if got := total.Load(); got != shareBenchRecords {
			b.Fatalf("consumed %d records, want %d", got, shareBenchRecords)
		}
	}
	b.ReportMetric(float64(shareBenchRecords*b.N)/elapsed.Seconds(), "records/s")
	b.ReportMetric(0, "ns/op")
}
