package compat_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/gregor-project/gregor/compat"
)

func TestFranzGo(t *testing.T) {
	t.Parallel()
	runScenario(t, franzClient{})
}

// TestApiVersions records the API keys and versions the broker serves, for the doc.
func TestApiVersions(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	recordAPIVersions(t, b.Addr())
	report.Lock()
	defer report.Unlock()
	if len(report.APIs) == 0 {
		t.Fatal("ApiVersions listed no API")
	}
	for _, a := range report.APIs {
		if a.Min > a.Max || a.Name == "" {
			t.Errorf("API %d (%q): versions %d-%d", a.Key, a.Name, a.Min, a.Max)
		}
	}
}

// franzClient drives franz-go (kgo, kadm) with its defaults (idempotent producer).
type franzClient struct{}

func (franzClient) Info() compat.ClientInfo {
	return compat.ClientInfo{Name: "franz-go", Language: "Go", Version: goModVersion("github.com/twmb/franz-go"), Order: 1}
}

func (franzClient) Caps() Caps {
	return Caps{Codecs: []string{"none", "gzip", "snappy", "lz4", "zstd"}, Timestamps: true, Headers: true}
}

var franzCodecs = map[string]kgo.CompressionCodec{
	"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
	"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
}

func kgoCodec(name string) kgo.Opt { return kgo.ProducerBatchCompression(franzCodecs[name]) }

func franzNew(addr string, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(addr)}, franzSecurity(addr)...), opts...)...)
}

// franzSecurity is franz-go's TLS and SASL configuration for a secured listener.
func franzSecurity(addr string) []kgo.Opt {
	sc := secured(addr)
	if sc == nil {
		return nil
	}
	opts := []kgo.Opt{kgo.DialTLSConfig(sc.TLS.Clone())}
	if sc.Mechanism == "SCRAM-SHA-512" {
		opts = append(opts, kgo.SASL(scram.Auth{User: sc.User, Pass: sc.Password, IsToken: sc.TokenAuth}.AsSha512Mechanism()))
	}
	return opts
}

func (franzClient) Admin(ctx context.Context, addr, topic string) (AdminResult, error) {
	var res AdminResult
	cl, err := franzNew(addr)
	if err != nil {
		return res, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	v := retentionValue
	cr, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": &v}, topic)
	if err == nil {
		err = cr.Err
	}
	if err != nil {
		return res, fmt.Errorf("create: %w", err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return res, fmt.Errorf("describe configs: %w", err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return res, fmt.Errorf("describe configs: %w", err)
	}
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" {
			res.Config = c.MaybeValue()
		}
	}
	td, err := adm.ListTopics(ctx)
	if err != nil {
		return res, fmt.Errorf("list: %w", err)
	}
	res.Listed = td.Has(topic)
	res.Partitions = len(td[topic].Partitions)
	dr, err := adm.DeleteTopic(ctx, topic)
	if err == nil {
		err = dr.Err
	}
	if err != nil {
		return res, fmt.Errorf("delete: %w", err)
	}
	for ctx.Err() == nil && !res.GoneAfterDelete {
		td, err := adm.ListTopics(ctx)
		if err != nil {
			return res, fmt.Errorf("list: %w", err)
		}
		res.GoneAfterDelete = !td.Has(topic)
	}
	return res, nil
}

func (franzClient) Produce(ctx context.Context, addr, topic, codec string, recs []Rec) error {
	cl, err := franzNew(addr, kgo.ProducerBatchCompression(franzCodecs[codec]))
	if err != nil {
		return err
	}
	defer cl.Close()
	rs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		rs[i] = toKgo(topic, r)
	}
	return cl.ProduceSync(ctx, rs...).FirstErr()
}

// franzPoll polls until n records or an error.
func franzPoll(ctx context.Context, cl *kgo.Client, n int) ([]Rec, error) {
	var out []Rec
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("%d of %d records: %w", len(out), n, err)
		}
		if err := fs.Err(); err != nil {
			return out, err
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, fromKgo(r)) })
	}
	return out, nil
}

func (franzClient) Consume(ctx context.Context, addr, topic string, n int) ([]Rec, error) {
	cl, err := franzNew(addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return franzPoll(ctx, cl, n)
}

func (franzClient) Group(ctx context.Context, addr, topic, group string, recs []Rec) ([2]Member, error) {
	var members [2]Member
	type state struct {
		mu       sync.Mutex
		assigned map[int32]bool
	}
	var st [2]state
	var cls [2]*kgo.Client
	for i := range cls {
		s := &st[i]
		s.assigned = map[int32]bool{}
		cl, err := franzNew(addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				s.mu.Lock()
				defer s.mu.Unlock()
				for _, p := range m[topic] {
					s.assigned[p] = true
				}
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				s.mu.Lock()
				defer s.mu.Unlock()
				for _, p := range m[topic] {
					delete(s.assigned, p)
				}
			}),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				s.mu.Lock()
				defer s.mu.Unlock()
				for _, p := range m[topic] {
					delete(s.assigned, p)
				}
			}))
		if err != nil {
			return members, err
		}
		defer cl.Close()
		cls[i] = cl
	}
	assignment := func() ([2][]int32, bool) {
		var a [2][]int32
		total := 0
		for i := range st {
			st[i].mu.Lock()
			for p := range st[i].assigned {
				a[i] = append(a[i], p)
			}
			st[i].mu.Unlock()
			total += len(a[i])
		}
		return a, len(a[0]) > 0 && len(a[1]) > 0 && total == 3
	}
	// Both members poll (which drives their group membership) until the split is done.
	var (
		mu    sync.Mutex
		total int
		errs  []error
		wg    sync.WaitGroup
	)
	pollCtx, stop := context.WithCancel(ctx)
	defer stop()
	for i, cl := range cls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				fs := cl.PollFetches(pollCtx)
				if pollCtx.Err() != nil {
					return
				}
				mu.Lock()
				if err := fs.Err(); err != nil {
					errs = append(errs, err)
				}
				fs.EachRecord(func(r *kgo.Record) {
					members[i].Records = append(members[i].Records, fromKgo(r))
					total++
				})
				mu.Unlock()
			}
		}()
	}
	var split [2][]int32
	if err := waitFor(ctx, "partitions split between two members", func() (ok bool) {
		split, ok = assignment()
		return ok
	}); err != nil {
		return members, fmt.Errorf("%w (assigned %v)", err, split)
	}
	members[0].Assigned, members[1].Assigned = split[0], split[1]
	pcl, err := franzNew(addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return members, err
	}
	defer pcl.Close()
	rs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		rs[i] = toKgo(topic, r)
	}
	if err := pcl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return members, fmt.Errorf("produce: %w", err)
	}
	var readErr error
	if err := waitFor(ctx, "group read every record", func() bool {
		mu.Lock()
		defer mu.Unlock()
		readErr = errors.Join(errs...)
		return readErr != nil || total >= len(recs)
	}); err != nil {
		return members, err
	}
	if readErr != nil {
		return members, readErr
	}
	stop()
	wg.Wait()
	for _, cl := range cls {
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			return members, fmt.Errorf("commit: %w", err)
		}
	}
	return members, nil
}

func (franzClient) SeekOffset(ctx context.Context, addr, topic string, partition int32, offset int64, n int) ([]Rec, error) {
	return franzPartition(ctx, addr, topic, partition, kgo.NewOffset().At(offset), n)
}

func (franzClient) SeekTime(ctx context.Context, addr, topic string, partition int32, ts int64, n int) ([]Rec, error) {
	return franzPartition(ctx, addr, topic, partition, kgo.NewOffset().AfterMilli(ts), n)
}

func franzPartition(ctx context.Context, addr, topic string, partition int32, at kgo.Offset, n int, opts ...kgo.Opt) ([]Rec, error) {
	cl, err := franzNew(addr, append([]kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: at}})}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return franzPoll(ctx, cl, n)
}

func (franzClient) ProduceUnknown(ctx context.Context, addr, topic string) error {
	cl, err := franzNew(addr)
	if err != nil {
		return err
	}
	defer cl.Close()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
}

func (franzClient) OutOfRange(ctx context.Context, addr, topic string, partition int32, _, high int64, n int) ([]Rec, error) {
	return franzPartition(ctx, addr, topic, partition, kgo.NewOffset().At(high), n,
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
}

func (franzClient) ProduceTooLarge(ctx context.Context, addr, topic string, rec Rec) error {
	cl, err := franzNew(addr, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	return cl.ProduceSync(ctx, toKgo(topic, rec)).FirstErr()
}

func (franzClient) Expect(kind string) Expectation {
	switch kind {
	case "unknown-topic":
		return Expectation{Desc: "kerr.UnknownTopicOrPartition after its metadata retries",
			Match: func(err error) bool { return errors.Is(err, kerr.UnknownTopicOrPartition) }}
	case "out-of-range":
		return Expectation{Desc: "resets to the log start (ConsumeResetOffset AtStart)", Reset: true}
	default:
		return Expectation{Desc: "kerr.MessageTooLarge",
			Match: func(err error) bool { return errors.Is(err, kerr.MessageTooLarge) }}
	}
}
