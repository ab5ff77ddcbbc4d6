package compat_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"github.com/segmentio/kafka-go/sasl"
	kgscram "github.com/segmentio/kafka-go/sasl/scram"

	"github.com/gregor-project/gregor/compat"
)

func TestKafkaGo(t *testing.T) {
	t.Parallel()
	runScenario(t, kafkaGoClient{})
}

// kafkaGoClient drives segmentio/kafka-go: Client for admin, Writer to produce (acks=all so
// that errors come back; its default is acks=none), Reader per partition to read, and the
// ConsumerGroup API (which Reader's GroupID mode runs on) for groups, as it shows each
// member's assignment. Each step uses a new Transport, as a new process would: kafka-go's
// shared DefaultTransport answers metadata from a cache refreshed every 6s, so a topic
// created by another client is unknown to it until then (as against Kafka).
type kafkaGoClient struct{}

// kafkaGoSASL is kafka-go's SASL mechanism for a secured listener (nil without SASL).
func kafkaGoSASL(sc *secConn) sasl.Mechanism {
	if sc == nil || sc.Mechanism != "SCRAM-SHA-512" {
		return nil
	}
	m, err := kgscram.Mechanism(kgscram.SHA512, sc.User, sc.Password)
	if err != nil {
		panic(err) // only for an unknown algorithm
	}
	return m
}

// kafkaGoTransport is a new Transport (for Writer and Client) with the TLS and SASL
// configuration of a secured listener.
func kafkaGoTransport(addr string) *kafka.Transport {
	sc := secured(addr)
	if sc == nil {
		return &kafka.Transport{}
	}
	return &kafka.Transport{TLS: sc.TLS.Clone(), SASL: kafkaGoSASL(sc)}
}

// kafkaGoDialer is the Dialer (for Reader and ConsumerGroup) of a secured listener; nil, the
// default, for a PLAINTEXT one.
func kafkaGoDialer(addr string) *kafka.Dialer {
	sc := secured(addr)
	if sc == nil {
		return nil
	}
	return &kafka.Dialer{Timeout: 10 * time.Second, DualStack: true, TLS: sc.TLS.Clone(), SASLMechanism: kafkaGoSASL(sc)}
}

func (kafkaGoClient) Info() compat.ClientInfo {
	return compat.ClientInfo{Name: "kafka-go", Language: "Go", Version: goModVersion("github.com/segmentio/kafka-go"), Order: 3}
}

func (kafkaGoClient) Caps() Caps {
	return Caps{Codecs: []string{"none", "gzip", "snappy", "lz4", "zstd"}, Timestamps: true, Headers: true}
}

var kafkaGoCodecs = map[string]compress.Compression{
	"none": 0, "gzip": compress.Gzip, "snappy": compress.Snappy, "lz4": compress.Lz4, "zstd": compress.Zstd,
}

func (kafkaGoClient) Admin(ctx context.Context, addr, topic string) (AdminResult, error) {
	var res AdminResult
	tr := kafkaGoTransport(addr)
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(addr), Transport: tr}
	cr, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: topic, NumPartitions: 3, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "retention.ms", ConfigValue: retentionValue}},
	}}})
	if err == nil {
		err = cr.Errors[topic]
	}
	if err != nil {
		return res, fmt.Errorf("create: %w", err)
	}
	dc, err := cl.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"retention.ms"},
	}}})
	if err != nil {
		return res, fmt.Errorf("describe configs: %w", err)
	}
	for _, r := range dc.Resources {
		if r.Error != nil {
			return res, fmt.Errorf("describe configs: %w", r.Error)
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName == "retention.ms" {
				res.Config = e.ConfigValue
			}
		}
	}
	listed := func() (bool, int, error) {
		md, err := cl.Metadata(ctx, &kafka.MetadataRequest{})
		if err != nil {
			return false, 0, err
		}
		for _, t := range md.Topics {
			if t.Name == topic {
				return true, len(t.Partitions), nil
			}
		}
		return false, 0, nil
	}
	if res.Listed, res.Partitions, err = listed(); err != nil {
		return res, fmt.Errorf("list: %w", err)
	}
	dr, err := cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	if err == nil {
		err = dr.Errors[topic]
	}
	if err != nil {
		return res, fmt.Errorf("delete: %w", err)
	}
	res.GoneAfterDelete = waitFor(ctx, "deleted topic unlisted", func() bool {
		l, _, err := listed()
		return err == nil && !l
	}) == nil
	return res, nil
}

func toKafkaGo(r Rec) kafka.Message {
	m := kafka.Message{Key: r.Key, Value: r.Value}
	if r.Timestamp != 0 {
		m.Time = time.UnixMilli(r.Timestamp)
	}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: h.Value})
	}
	return m
}

func fromKafkaGo(m kafka.Message) Rec {
	r := Rec{Partition: int32(m.Partition), Offset: m.Offset, Key: m.Key, Value: m.Value, Timestamp: m.Time.UnixMilli()}
	for _, h := range m.Headers {
		r.Headers = append(r.Headers, Header{h.Key, h.Value})
	}
	return r
}

// write produces recs with a Writer; explicit partitions go through a balancer that
// returns them (the Writer has no per-message partition).
func kafkaGoWrite(ctx context.Context, addr, topic, codec string, recs []Rec) error {
	tr := kafkaGoTransport(addr)
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: topic, RequiredAcks: kafka.RequireAll,
		Compression: kafkaGoCodecs[codec], BatchTimeout: 10 * time.Millisecond, Transport: tr}
	defer w.Close()
	msgs := make([]kafka.Message, len(recs))
	explicit := map[string]int{}
	for i, r := range recs {
		msgs[i] = toKafkaGo(r)
		if r.Partition >= 0 {
			explicit[r.id()] = int(r.Partition)
		}
	}
	if len(explicit) > 0 {
		w.Balancer = kafka.BalancerFunc(func(m kafka.Message, _ ...int) int {
			return explicit[Rec{Key: m.Key, Value: m.Value}.id()]
		})
	}
	err := w.WriteMessages(ctx, msgs...)
	if wes := (kafka.WriteErrors{}); errors.As(err, &wes) {
		for _, e := range wes {
			if e != nil {
				return fmt.Errorf("%d of %d messages failed, first: %w", wes.Count(), len(msgs), e)
			}
		}
	}
	return err
}

func (kafkaGoClient) Produce(ctx context.Context, addr, topic, codec string, recs []Rec) error {
	return kafkaGoWrite(ctx, addr, topic, codec, recs)
}

// readPartitions reads with one Reader per partition until n records in all; start positions
// each reader (SetOffset or SetOffsetAt).
func kafkaGoRead(ctx context.Context, addr, topic string, parts []int, start func(*kafka.Reader) error, n int) ([]Rec, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu   sync.Mutex
		out  []Rec
		errs []error
		wg   sync.WaitGroup
	)
	for _, p := range parts {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Dialer: kafkaGoDialer(addr), Topic: topic, Partition: p, MaxWait: 100 * time.Millisecond})
		defer r.Close()
		if err := start(r); err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := r.ReadMessage(rctx)
				mu.Lock()
				if err != nil {
					if rctx.Err() == nil {
						errs = append(errs, err)
					}
					mu.Unlock()
					return
				}
				out = append(out, fromKafkaGo(m))
				mu.Unlock()
			}
		}()
	}
	err := waitFor(ctx, "read every record", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(out) >= n || len(errs) > 0
	})
	cancel()
	wg.Wait()
	if e := errors.Join(errs...); e != nil {
		return out, e
	}
	if err != nil {
		return out, fmt.Errorf("%d of %d records: %w", len(out), n, err)
	}
	return out, nil
}

func kafkaGoPartitions(ctx context.Context, addr, topic string) ([]int, error) {
	tr := kafkaGoTransport(addr)
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(addr), Transport: tr}
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, err
	}
	var ps []int
	for _, t := range md.Topics {
		if t.Error != nil {
			return nil, t.Error
		}
		for _, p := range t.Partitions {
			ps = append(ps, p.ID)
		}
	}
	return ps, nil
}

func (kafkaGoClient) Consume(ctx context.Context, addr, topic string, n int) ([]Rec, error) {
	ps, err := kafkaGoPartitions(ctx, addr, topic)
	if err != nil {
		return nil, err
	}
	return kafkaGoRead(ctx, addr, topic, ps, func(r *kafka.Reader) error { return r.SetOffset(kafka.FirstOffset) }, n)
}

func (kafkaGoClient) Group(ctx context.Context, addr, topic, group string, recs []Rec) ([2]Member, error) {
	var members [2]Member
	var (
		mu       sync.Mutex
		assigned [2][]int32
		got      [2][]Rec
		next     [2]map[int]int64 // offset to commit per partition
		errs     []error
		total    int
		gens     [2]*kafka.Generation
		wg       sync.WaitGroup
	)
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	for i := range 2 {
		cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{ID: group, Brokers: []string{addr}, Dialer: kafkaGoDialer(addr),
			Topics: []string{topic}, StartOffset: kafka.FirstOffset})
		if err != nil {
			return members, err
		}
		defer cg.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				gen, err := cg.Next(gctx)
				if err != nil {
					// As kafka-go's Reader does: a failed generation (e.g. REBALANCE_IN_PROGRESS
					// while the second member joins) is followed by the next one.
					if gctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
						return
					}
					continue
				}
				mu.Lock()
				gens[i], assigned[i], next[i] = gen, nil, map[int]int64{}
				for _, pa := range gen.Assignments[topic] {
					assigned[i] = append(assigned[i], int32(pa.ID))
					gen.Start(func(gctx context.Context) {
						r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Dialer: kafkaGoDialer(addr), Topic: topic, Partition: pa.ID, MaxWait: 100 * time.Millisecond})
						defer r.Close()
						if err := r.SetOffset(pa.Offset); err != nil {
							return
						}
						for {
							m, err := r.ReadMessage(gctx)
							if err != nil {
								return
							}
							mu.Lock()
							got[i] = append(got[i], fromKafkaGo(m))
							next[i][m.Partition] = m.Offset + 1
							total++
							mu.Unlock()
						}
					})
				}
				mu.Unlock()
			}
		}()
	}
	groupErr := func() error { return errors.Join(errs...) }
	if err := waitFor(ctx, "partitions split between two members", func() bool {
		mu.Lock()
		defer mu.Unlock()
		members[0].Assigned, members[1].Assigned = assigned[0], assigned[1]
		return groupErr() != nil || len(assigned[0]) > 0 && len(assigned[1]) > 0 && len(assigned[0])+len(assigned[1]) == 3
	}); err != nil {
		return members, fmt.Errorf("%w (assigned %v, %v)", err, members[0].Assigned, members[1].Assigned)
	}
	if err := groupErr(); err != nil {
		return members, err
	}
	if err := kafkaGoWrite(ctx, addr, topic, "none", recs); err != nil {
		return members, fmt.Errorf("produce: %w", err)
	}
	if err := waitFor(ctx, "group read every record", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return total >= len(recs) || groupErr() != nil
	}); err != nil {
		return members, err
	}
	mu.Lock()
	defer mu.Unlock()
	if err := groupErr(); err != nil {
		return members, err
	}
	for i, gen := range gens {
		members[i].Records = got[i]
		if err := gen.CommitOffsets(map[string]map[int]int64{topic: next[i]}); err != nil {
			return members, fmt.Errorf("commit: %w", err)
		}
	}
	return members, nil
}

func (kafkaGoClient) SeekOffset(ctx context.Context, addr, topic string, partition int32, offset int64, n int) ([]Rec, error) {
	return kafkaGoRead(ctx, addr, topic, []int{int(partition)}, func(r *kafka.Reader) error { return r.SetOffset(offset) }, n)
}

func (kafkaGoClient) SeekTime(ctx context.Context, addr, topic string, partition int32, ts int64, n int) ([]Rec, error) {
	return kafkaGoRead(ctx, addr, topic, []int{int(partition)}, func(r *kafka.Reader) error {
		return r.SetOffsetAt(ctx, time.UnixMilli(ts))
	}, n)
}

func (kafkaGoClient) ProduceUnknown(ctx context.Context, addr, topic string) error {
	return kafkaGoWrite(ctx, addr, topic, "none", []Rec{{Partition: -1, Value: []byte("v")}})
}

// OutOfRange starts below the log start: kafka-go's reader then skips to the first offset
// (above the end it waits for the log to grow).
func (kafkaGoClient) OutOfRange(ctx context.Context, addr, topic string, partition int32, low, _ int64, n int) ([]Rec, error) {
	return kafkaGoRead(ctx, addr, topic, []int{int(partition)}, func(r *kafka.Reader) error { return r.SetOffset(low) }, n)
}

func (kafkaGoClient) ProduceTooLarge(ctx context.Context, addr, topic string, rec Rec) error {
	return kafkaGoWrite(ctx, addr, topic, "none", []Rec{rec})
}

func (kafkaGoClient) Expect(kind string) Expectation {
	is := func(target error) func(error) bool {
		return func(err error) bool { return errors.Is(err, target) }
	}
	switch kind {
	case "unknown-topic":
		return Expectation{Desc: "kafka.UnknownTopicOrPartition", Match: is(kafka.UnknownTopicOrPartition)}
	case "out-of-range":
		return Expectation{Desc: "below the log start the reader skips to the first offset", Reset: true}
	default:
		return Expectation{Desc: "kafka.MessageSizeTooLarge", Match: is(kafka.MessageSizeTooLarge)}
	}
}
