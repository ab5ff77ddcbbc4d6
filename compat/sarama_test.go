package compat_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"

	"github.com/gregor-project/gregor/compat"
)

func TestSarama(t *testing.T) {
	t.Parallel()
	runScenario(t, saramaClient{})
}

// saramaClient drives IBM/sarama with its default configuration (Version 2.8 unless
// version is set: an old version makes it speak old protocol versions and message formats).
type saramaClient struct {
	version sarama.KafkaVersion // zero: sarama's default
	name    string
	// readCommitted consumes with isolation level read_committed (sarama's default is
	// read_uncommitted).
	readCommitted bool
}

func (c saramaClient) Info() compat.ClientInfo {
	name := "sarama"
	if c.name != "" {
		name = c.name
	}
	return compat.ClientInfo{Name: name, Language: "Go", Version: goModVersion("github.com/IBM/sarama"), Order: 2}
}

func (c saramaClient) old() bool { return c.version != (sarama.KafkaVersion{}) }

func (c saramaClient) Caps() Caps {
	switch {
	case !c.old():
		return Caps{Codecs: []string{"none", "gzip", "snappy", "lz4", "zstd"}, Timestamps: true, Headers: true}
	case c.version.IsAtLeast(sarama.V0_10_0_0):
		return Caps{Codecs: []string{"none", "gzip", "snappy", "lz4"}, Timestamps: true}
	default:
		return Caps{Codecs: []string{"none", "gzip", "snappy"}}
	}
}

func (c saramaClient) config(addr string) *sarama.Config {
	cfg := sarama.NewConfig()
	saramaSecurity(cfg, addr)
	if c.old() {
		cfg.Version = c.version
	}
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Consumer.Return.Errors = true
	if c.readCommitted {
		cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	}
	return cfg
}

// saramaSecurity sets sarama's TLS and SASL configuration for a secured listener. sarama has
// no SCRAM implementation of its own: its users plug one in (here xdg-go/scram, as in
// sarama's examples) through SCRAMClientGeneratorFunc.
func saramaSecurity(cfg *sarama.Config, addr string) {
	sc := secured(addr)
	if sc == nil {
		return
	}
	cfg.Net.TLS.Enable = true
	cfg.Net.TLS.Config = sc.TLS.Clone()
	if sc.Mechanism == "SCRAM-SHA-512" {
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		cfg.Net.SASL.User, cfg.Net.SASL.Password = sc.User, sc.Password
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{hash: scram.SHA512} }
	}
}

// saramaSCRAM is sarama.SCRAMClient over xdg-go/scram.
type saramaSCRAM struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (s *saramaSCRAM) Begin(user, password, authzID string) error {
	cl, err := s.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	s.conv = cl.NewConversation()
	return nil
}

func (s *saramaSCRAM) Step(challenge string) (string, error) { return s.conv.Step(challenge) }

func (s *saramaSCRAM) Done() bool { return s.conv.Done() }

var saramaCodecs = map[string]sarama.CompressionCodec{
	"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP, "snappy": sarama.CompressionSnappy,
	"lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD,
}

func (c saramaClient) Admin(ctx context.Context, addr, topic string) (AdminResult, error) {
	var res AdminResult
	adm, err := sarama.NewClusterAdmin([]string{addr}, c.config(addr))
	if err != nil {
		return res, err
	}
	defer adm.Close()
	v := retentionValue
	if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"retention.ms": &v}}, false); err != nil {
		return res, fmt.Errorf("create: %w", err)
	}
	entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	if err != nil {
		return res, fmt.Errorf("describe config: %w", err)
	}
	for _, e := range entries {
		if e.Name == "retention.ms" {
			res.Config = e.Value
		}
	}
	topics, err := adm.ListTopics()
	if err != nil {
		return res, fmt.Errorf("list: %w", err)
	}
	d, ok := topics[topic]
	res.Listed, res.Partitions = ok, int(d.NumPartitions)
	if err := adm.DeleteTopic(topic); err != nil {
		return res, fmt.Errorf("delete: %w", err)
	}
	err = waitFor(ctx, "deleted topic unlisted", func() bool {
		topics, err := adm.ListTopics()
		_, listed := topics[topic]
		return err == nil && !listed
	})
	res.GoneAfterDelete = err == nil
	return res, nil
}

func (c saramaClient) producer(addr string, codec string, manual bool) (sarama.SyncProducer, error) {
	cfg := c.config(addr)
	cfg.Producer.Compression = saramaCodecs[codec]
	if manual {
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
	}
	return sarama.NewSyncProducer([]string{addr}, cfg)
}

func toSarama(topic string, r Rec) *sarama.ProducerMessage {
	m := &sarama.ProducerMessage{Topic: topic, Partition: r.Partition}
	if r.Key != nil { // a nil Encoder is a null key or value; ByteEncoder(nil) an empty one
		m.Key = sarama.ByteEncoder(r.Key)
	}
	if r.Value != nil {
		m.Value = sarama.ByteEncoder(r.Value)
	}
	if r.Timestamp != 0 {
		m.Timestamp = time.UnixMilli(r.Timestamp)
	}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
	}
	return m
}

func fromSarama(m *sarama.ConsumerMessage) Rec {
	r := Rec{Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value, Timestamp: -1}
	if !m.Timestamp.IsZero() {
		r.Timestamp = m.Timestamp.UnixMilli()
	}
	for _, h := range m.Headers {
		r.Headers = append(r.Headers, Header{string(h.Key), h.Value})
	}
	return r
}

func (c saramaClient) send(addr, topic, codec string, recs []Rec, manual bool) error {
	p, err := c.producer(addr, codec, manual)
	if err != nil {
		return err
	}
	defer p.Close()
	msgs := make([]*sarama.ProducerMessage, len(recs))
	for i, r := range recs {
		msgs[i] = toSarama(topic, r)
	}
	err = p.SendMessages(msgs)
	if pes := (sarama.ProducerErrors{}); errors.As(err, &pes) && len(pes) > 0 {
		return fmt.Errorf("%d of %d messages failed, first: %w", len(pes), len(msgs), pes[0])
	}
	return err
}

func (c saramaClient) Produce(_ context.Context, addr, topic, codec string, recs []Rec) error {
	return c.send(addr, topic, codec, recs, false)
}

// readPartitions reads from every (partition, offset) until n records in all.
func (c saramaClient) readPartitions(ctx context.Context, addr, topic string, starts map[int32]int64, n int) ([]Rec, error) {
	cons, err := sarama.NewConsumer([]string{addr}, c.config(addr))
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	out := make(chan Rec)
	errc := make(chan error, len(starts))
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for p, off := range starts {
		pc, err := cons.ConsumePartition(topic, p, off)
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer pc.AsyncClose()
			for {
				select {
				case m := <-pc.Messages():
					select {
					case out <- fromSarama(m):
					case <-pctx.Done():
						return
					}
				case e := <-pc.Errors():
					errc <- e
					return
				case <-pctx.Done():
					return
				}
			}
		}()
	}
	defer wg.Wait()
	var recs []Rec
	for len(recs) < n {
		select {
		case r := <-out:
			recs = append(recs, r)
		case err := <-errc:
			return recs, err
		case <-ctx.Done():
			return recs, fmt.Errorf("%d of %d records: %w", len(recs), n, ctx.Err())
		}
	}
	cancel()
	return recs, nil
}

func (c saramaClient) Consume(ctx context.Context, addr, topic string, n int) ([]Rec, error) {
	cl, err := sarama.NewClient([]string{addr}, c.config(addr))
	if err != nil {
		return nil, err
	}
	parts, err := cl.Partitions(topic)
	cl.Close()
	if err != nil {
		return nil, err
	}
	starts := map[int32]int64{}
	for _, p := range parts {
		starts[p] = sarama.OffsetOldest
	}
	return c.readPartitions(ctx, addr, topic, starts, n)
}

// saramaMember is a ConsumerGroupHandler that keeps its current claims and what it read.
type saramaMember struct {
	mu       sync.Mutex
	assigned []int32
	recs     []Rec
	total    *int
	totalMu  *sync.Mutex
	topic    string
}

func (m *saramaMember) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.assigned = append([]int32(nil), s.Claims()[m.topic]...)
	return nil
}

// Cleanup commits what the session marked, as the session ends.
func (m *saramaMember) Cleanup(s sarama.ConsumerGroupSession) error {
	s.Commit()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.assigned = nil
	return nil
}

func (m *saramaMember) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			m.mu.Lock()
			m.recs = append(m.recs, fromSarama(msg))
			m.mu.Unlock()
			m.totalMu.Lock()
			*m.total++
			m.totalMu.Unlock()
			s.MarkMessage(msg, "")
		case <-s.Context().Done():
			return nil
		}
	}
}

func (c saramaClient) Group(ctx context.Context, addr, topic, group string, recs []Rec) ([2]Member, error) {
	var members [2]Member
	if c.old() && !c.version.IsAtLeast(sarama.V0_10_2_0) {
		return members, notSupported("sarama's consumer groups need Version V0_10_2_0 or later")
	}
	cfg := c.config(addr)
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	var (
		total   int
		totalMu sync.Mutex
		hs      [2]*saramaMember
		wg      sync.WaitGroup
		errMu   sync.Mutex
		errs    []error
	)
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	for i := range hs {
		hs[i] = &saramaMember{total: &total, totalMu: &totalMu, topic: topic}
		cg, err := sarama.NewConsumerGroup([]string{addr}, group, cfg)
		if err != nil {
			return members, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for gctx.Err() == nil {
				if err := cg.Consume(gctx, []string{topic}, hs[i]); err != nil && gctx.Err() == nil {
					errMu.Lock()
					errs = append(errs, err)
					errMu.Unlock()
					return
				}
			}
		}()
		defer cg.Close()
	}
	defer wg.Wait()
	firstErr := func() error {
		errMu.Lock()
		defer errMu.Unlock()
		return errors.Join(errs...)
	}
	if err := waitFor(ctx, "partitions split between two members", func() bool {
		n := 0
		for i, h := range hs {
			h.mu.Lock()
			members[i].Assigned = append([]int32(nil), h.assigned...)
			h.mu.Unlock()
			if len(members[i].Assigned) == 0 {
				return firstErr() != nil
			}
			n += len(members[i].Assigned)
		}
		return n == 3 || firstErr() != nil
	}); err != nil {
		return members, fmt.Errorf("%w (assigned %v, %v)", err, members[0].Assigned, members[1].Assigned)
	}
	if err := firstErr(); err != nil {
		return members, err
	}
	if err := c.send(addr, topic, "none", recs, true); err != nil {
		return members, fmt.Errorf("produce: %w", err)
	}
	if err := waitFor(ctx, "group read every record", func() bool {
		totalMu.Lock()
		defer totalMu.Unlock()
		return total >= len(recs) || firstErr() != nil
	}); err != nil {
		return members, err
	}
	stop() // ends both sessions: Cleanup commits
	wg.Wait()
	for i, h := range hs {
		members[i].Records = h.recs
	}
	return members, firstErr()
}

func (c saramaClient) SeekOffset(ctx context.Context, addr, topic string, partition int32, offset int64, n int) ([]Rec, error) {
	return c.readPartitions(ctx, addr, topic, map[int32]int64{partition: offset}, n)
}

func (c saramaClient) SeekTime(ctx context.Context, addr, topic string, partition int32, ts int64, n int) ([]Rec, error) {
	cl, err := sarama.NewClient([]string{addr}, c.config(addr))
	if err != nil {
		return nil, err
	}
	off, err := cl.GetOffset(topic, partition, ts)
	cl.Close()
	if err != nil {
		return nil, err
	}
	return c.readPartitions(ctx, addr, topic, map[int32]int64{partition: off}, n)
}

func (c saramaClient) ProduceUnknown(_ context.Context, addr, topic string) error {
	return c.send(addr, topic, "none", []Rec{{Partition: -1, Value: []byte("v")}}, false)
}

func (c saramaClient) OutOfRange(ctx context.Context, addr, topic string, partition int32, _, high int64, n int) ([]Rec, error) {
	return c.readPartitions(ctx, addr, topic, map[int32]int64{partition: high}, n)
}

func (c saramaClient) ProduceTooLarge(_ context.Context, addr, topic string, rec Rec) error {
	return c.send(addr, topic, "none", []Rec{rec}, true)
}

func (c saramaClient) Expect(kind string) Expectation {
	is := func(target error) func(error) bool {
		return func(err error) bool { return errors.Is(err, target) }
	}
	switch kind {
	case "unknown-topic":
		return Expectation{Desc: "sarama.ErrUnknownTopicOrPartition", Match: is(sarama.ErrUnknownTopicOrPartition)}
	case "out-of-range":
		return Expectation{Desc: "ConsumePartition returns sarama.ErrOffsetOutOfRange (sarama resets only committed group offsets)",
			Match: is(sarama.ErrOffsetOutOfRange)}
	case "zstd-topic":
		return Expectation{Desc: "ConsumerError sarama.ErrUnsupportedCompressionType", Match: is(sarama.ErrUnsupportedCompressionType)}
	default:
		return Expectation{Desc: "sarama.ErrMessageSizeTooLarge", Match: is(sarama.ErrMessageSizeTooLarge)}
	}
}
