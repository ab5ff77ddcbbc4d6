package compat_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/gregor-project/gregor/compat"
)

func TestConfluentKafkaGo(t *testing.T) {
	t.Parallel()
	runScenario(t, confluentClient{})
}

// confluentClient drives confluent-kafka-go v2 (cgo, with its bundled librdkafka) with its
// defaults; consumers that only Assign still need a group.id.
type confluentClient struct{}

func (confluentClient) Info() compat.ClientInfo {
	_, lib := kafka.LibraryVersion()
	return compat.ClientInfo{Name: "confluent-kafka-go", Language: "Go (cgo)",
		Version: goModVersion("github.com/confluentinc/confluent-kafka-go/v2") + " (librdkafka " + lib + ")", Order: 4}
}

func (confluentClient) Caps() Caps {
	return Caps{Codecs: []string{"none", "gzip", "snappy", "lz4", "zstd"}, Timestamps: true, Headers: true, SkipsCompression: true}
}

func ckConfig(addr string, kv ...any) *kafka.ConfigMap {
	cm := &kafka.ConfigMap{"bootstrap.servers": addr, "log_level": 3}
	for _, p := range secured(addr).librdkafka() { // a secured listener's TLS and SASL properties
		(*cm)[p[0]] = p[1]
	}
	for i := 0; i+1 < len(kv); i += 2 {
		(*cm)[kv[i].(string)] = kv[i+1]
	}
	return cm
}

func (confluentClient) Admin(ctx context.Context, addr, topic string) (AdminResult, error) {
	var res AdminResult
	adm, err := kafka.NewAdminClient(ckConfig(addr))
	if err != nil {
		return res, err
	}
	defer adm.Close()
	cr, err := adm.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: topic, NumPartitions: 3, ReplicationFactor: 1,
		Config: map[string]string{"retention.ms": retentionValue}}})
	if err == nil && cr[0].Error.Code() != kafka.ErrNoError {
		err = cr[0].Error
	}
	if err != nil {
		return res, fmt.Errorf("create: %w", err)
	}
	dc, err := adm.DescribeConfigs(ctx, []kafka.ConfigResource{{Type: kafka.ResourceTopic, Name: topic}})
	if err == nil && dc[0].Error.Code() != kafka.ErrNoError {
		err = dc[0].Error
	}
	if err != nil {
		return res, fmt.Errorf("describe configs: %w", err)
	}
	res.Config = dc[0].Config["retention.ms"].Value
	listed := func() (bool, int, error) {
		md, err := adm.GetMetadata(nil, true, 10000)
		if err != nil {
			return false, 0, err
		}
		t, ok := md.Topics[topic]
		return ok, len(t.Partitions), nil
	}
	if res.Listed, res.Partitions, err = listed(); err != nil {
		return res, fmt.Errorf("list: %w", err)
	}
	dr, err := adm.DeleteTopics(ctx, []string{topic})
	if err == nil && dr[0].Error.Code() != kafka.ErrNoError {
		err = dr[0].Error
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

func ckProduce(ctx context.Context, addr, topic, codec string, recs []Rec, conf ...any) error {
	p, err := kafka.NewProducer(ckConfig(addr, append([]any{"compression.codec", codec}, conf...)...))
	if err != nil {
		return err
	}
	defer p.Close()
	dr := make(chan kafka.Event, len(recs))
	for _, r := range recs {
		m := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: r.Partition}, Key: r.Key, Value: r.Value}
		if r.Partition < 0 {
			m.TopicPartition.Partition = kafka.PartitionAny
		}
		if r.Timestamp != 0 {
			m.Timestamp = time.UnixMilli(r.Timestamp)
		}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: h.Value})
		}
		if err := p.Produce(m, dr); err != nil {
			return err
		}
	}
	var errs []error
	for range recs {
		select {
		case e := <-dr:
			if m, ok := e.(*kafka.Message); ok && m.TopicPartition.Error != nil {
				errs = append(errs, m.TopicPartition.Error)
			}
		case <-ctx.Done():
			return fmt.Errorf("delivery reports: %w", ctx.Err())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d messages failed, first: %w", len(errs), len(recs), errs[0])
	}
	return nil
}

func (confluentClient) Produce(ctx context.Context, addr, topic, codec string, recs []Rec) error {
	return ckProduce(ctx, addr, topic, codec, recs)
}

func fromCK(m *kafka.Message) Rec {
	r := Rec{Partition: m.TopicPartition.Partition, Offset: int64(m.TopicPartition.Offset), Key: m.Key, Value: m.Value,
		Timestamp: m.Timestamp.UnixMilli()}
	for _, h := range m.Headers {
		r.Headers = append(r.Headers, Header{h.Key, h.Value})
	}
	return r
}

// ckPoll polls c until n records, an error event, or ctx ends.
func ckPoll(ctx context.Context, c *kafka.Consumer, n int) ([]Rec, error) {
	var out []Rec
	for len(out) < n {
		if ctx.Err() != nil {
			return out, fmt.Errorf("%d of %d records: %w", len(out), n, ctx.Err())
		}
		switch e := c.Poll(100).(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				return out, e.TopicPartition.Error
			}
			out = append(out, fromCK(e))
		case kafka.Error:
			if e.IsFatal() || e.Code() != kafka.ErrTransport && e.Code() != kafka.ErrAllBrokersDown {
				return out, e
			}
		}
	}
	return out, nil
}

// ckAssigned reads partitions from the given offsets with a consumer that only assigns.
func ckAssigned(ctx context.Context, addr string, tps []kafka.TopicPartition, n int) ([]Rec, error) {
	c, err := kafka.NewConsumer(ckConfig(addr, "group.id", "compat-assign", "auto.offset.reset", "earliest",
		"enable.auto.commit", false))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.Assign(tps); err != nil {
		return nil, err
	}
	return ckPoll(ctx, c, n)
}

func (confluentClient) Consume(ctx context.Context, addr, topic string, n int) ([]Rec, error) {
	adm, err := kafka.NewAdminClient(ckConfig(addr))
	if err != nil {
		return nil, err
	}
	md, err := adm.GetMetadata(&topic, false, 10000)
	adm.Close()
	if err != nil {
		return nil, err
	}
	var tps []kafka.TopicPartition
	for _, p := range md.Topics[topic].Partitions {
		tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: p.ID, Offset: kafka.OffsetBeginning})
	}
	return ckAssigned(ctx, addr, tps, n)
}

func (confluentClient) Group(ctx context.Context, addr, topic, group string, recs []Rec) ([2]Member, error) {
	var members [2]Member
	var (
		cs    [2]*kafka.Consumer
		mu    sync.Mutex
		total int
		errs  []error
		wg    sync.WaitGroup
	)
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	for i := range cs {
		c, err := kafka.NewConsumer(ckConfig(addr, "group.id", group, "auto.offset.reset", "earliest",
			"enable.auto.commit", false))
		if err != nil {
			return members, err
		}
		defer c.Close()
		if err := c.Subscribe(topic, nil); err != nil {
			return members, err
		}
		cs[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pctx.Err() == nil {
				switch e := c.Poll(50).(type) {
				case *kafka.Message:
					mu.Lock()
					members[i].Records = append(members[i].Records, fromCK(e))
					total++
					mu.Unlock()
				case kafka.Error:
					mu.Lock()
					errs = append(errs, e)
					mu.Unlock()
				}
			}
		}()
	}
	defer wg.Wait()
	firstErr := func() error {
		mu.Lock()
		defer mu.Unlock()
		return errors.Join(errs...)
	}
	var assigned [2][]int32
	if err := waitFor(ctx, "partitions split between two members", func() bool {
		n := 0
		for i, c := range cs {
			tps, err := c.Assignment()
			if err != nil {
				return true
			}
			assigned[i] = nil
			for _, tp := range tps {
				assigned[i] = append(assigned[i], tp.Partition)
			}
			n += len(assigned[i])
		}
		return firstErr() != nil || len(assigned[0]) > 0 && len(assigned[1]) > 0 && n == 3
	}); err != nil {
		return members, fmt.Errorf("%w (assigned %v, %v)", err, assigned[0], assigned[1])
	}
	if err := firstErr(); err != nil {
		return members, err
	}
	members[0].Assigned, members[1].Assigned = assigned[0], assigned[1]
	if err := ckProduce(ctx, addr, topic, "none", recs); err != nil {
		return members, fmt.Errorf("produce: %w", err)
	}
	if err := waitFor(ctx, "group read every record", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return total >= len(recs) || len(errs) > 0
	}); err != nil {
		return members, err
	}
	stop()
	wg.Wait()
	if err := firstErr(); err != nil {
		return members, err
	}
	for _, c := range cs {
		if _, err := c.Commit(); err != nil {
			return members, fmt.Errorf("commit: %w", err)
		}
	}
	return members, nil
}

func (confluentClient) SeekOffset(ctx context.Context, addr, topic string, partition int32, offset int64, n int) ([]Rec, error) {
	return ckAssigned(ctx, addr, []kafka.TopicPartition{{Topic: &topic, Partition: partition, Offset: kafka.Offset(offset)}}, n)
}

func (confluentClient) SeekTime(ctx context.Context, addr, topic string, partition int32, ts int64, n int) ([]Rec, error) {
	c, err := kafka.NewConsumer(ckConfig(addr, "group.id", "compat-assign", "enable.auto.commit", false))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	tps, err := c.OffsetsForTimes([]kafka.TopicPartition{{Topic: &topic, Partition: partition, Offset: kafka.Offset(ts)}}, 10000)
	if err != nil {
		return nil, err
	}
	if err := c.Assign(tps); err != nil {
		return nil, err
	}
	return ckPoll(ctx, c, n)
}

// ProduceUnknown: librdkafka holds records for an unknown topic for
// topic.metadata.propagation.max.ms (30s by default) before failing them, as against Kafka;
// 1s keeps the suite fast.
func (confluentClient) ProduceUnknown(ctx context.Context, addr, topic string) error {
	return ckProduce(ctx, addr, topic, "none", []Rec{{Partition: -1, Value: []byte("v")}}, "topic.metadata.propagation.max.ms", 1000)
}

func (confluentClient) OutOfRange(ctx context.Context, addr, topic string, partition int32, _, high int64, n int) ([]Rec, error) {
	return ckAssigned(ctx, addr, []kafka.TopicPartition{{Topic: &topic, Partition: partition, Offset: kafka.Offset(high)}}, n)
}

func (confluentClient) ProduceTooLarge(ctx context.Context, addr, topic string, rec Rec) error {
	return ckProduce(ctx, addr, topic, "none", []Rec{rec})
}

func (confluentClient) Expect(kind string) Expectation {
	code := func(c kafka.ErrorCode) func(error) bool {
		return func(err error) bool {
			var ke kafka.Error
			return errors.As(err, &ke) && ke.Code() == c
		}
	}
	switch kind {
	case "unknown-topic":
		return Expectation{Desc: "delivery report kafka.ErrUnknownTopicOrPart", Match: code(kafka.ErrUnknownTopicOrPart)}
	case "out-of-range":
		return Expectation{Desc: "auto.offset.reset=earliest: resets to the log start", Reset: true}
	default:
		return Expectation{Desc: "delivery report kafka.ErrMsgSizeTooLarge", Match: code(kafka.ErrMsgSizeTooLarge)}
	}
}
