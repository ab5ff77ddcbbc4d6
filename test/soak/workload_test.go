package soak

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// A background loop of the soak: started with run, ended with stop. Loops
// never fail the test themselves (errors during faults are expected); they
// count what they saw, and the test asserts on what they did after the
// faults.
type loop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func run(fn func(ctx context.Context)) *loop {
	ctx, cancel := context.WithCancel(context.Background())
	l := &loop{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		fn(ctx)
	}()
	return l
}

func (l *loop) stop() {
	l.cancel()
	<-l.done
}

// member is one consumer of the soak's group, polling and committing
// (franz-go's autocommit, on an interval and on revoke) until closed.
type member struct {
	cl       *kgo.Client
	loop     *loop
	consumed atomic.Int64 // records polled, over all partitions (duplicates after a rebalance count again)
	errors   atomic.Int64 // fetch errors seen
}

func startMember(seeds []string, group, topic string) (*member, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitInterval(500*time.Millisecond),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.RequestTimeoutOverhead(2*time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	)
	if err != nil {
		return nil, err
	}
	m := &member{cl: cl}
	m.loop = run(func(ctx context.Context) {
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachError(func(string, int32, error) { m.errors.Add(1) })
			m.consumed.Add(int64(fs.NumRecords()))
		}
	})
	return m, nil
}

// close ends the member's polling and leaves the group (committing what it
// polled).
func (m *member) close() {
	m.loop.stop()
	m.cl.Close()
}

// churnStats counts the topic churn's outcomes.
type churnStats struct {
	createOK, createErr, deleteOK, deleteErr atomic.Int64
	mu                                       sync.Mutex
	lastErr                                  error
}

func (s *churnStats) fail(err error) {
	s.mu.Lock()
	s.lastErr = err
	s.mu.Unlock()
}

// churnPrefix names the churned topics; no other topic of the soak starts
// with it.
const churnPrefix = "churn-"

// createTopic creates topic through adm and returns the error of the request
// or of the topic.
func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32, rf int16, configs map[string]*string) error {
	resp, err := adm.CreateTopic(ctx, partitions, rf, configs, topic)
	if err == nil {
		err = resp.Err
	}
	return err
}

// deleteTopic deletes topic through adm.
func deleteTopic(ctx context.Context, adm *kadm.Client, topic string) error {
	resp, err := adm.DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	return err
}

// startChurn creates and deletes small topics (churn-<n>, 1 to 3 partitions,
// replication factor 1 to 3) in a loop, one every 250 ms at most, produces a
// few records to each, and counts the outcomes. A topic whose creation
// failed is deleted anyway (the request may have been carried out).
func startChurn(c *testutil.Cluster, seeds []string, stats *churnStats, names *atomic.Int64) (*loop, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequestRetries(2),
		kgo.RecordDeliveryTimeout(5*time.Second), kgo.ProducerLinger(0))
	if err != nil {
		return nil, err
	}
	adm := kadm.NewClient(cl)
	return run(func(ctx context.Context) {
		defer cl.Close()
		tick := time.NewTicker(250 * time.Millisecond) // pacing, not synchronisation
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			n := names.Add(1)
			topic := fmt.Sprintf("%s%d", churnPrefix, n)
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := createTopic(rctx, adm, topic, int32(1+n%3), int16(1+n%3), nil); err != nil {
				stats.createErr.Add(1)
				stats.fail(fmt.Errorf("create %s: %w", topic, err))
			} else {
				stats.createOK.Add(1)
				// A few records, so the partitions have data to delete;
				// their outcome does not matter.
				for i := range 3 {
					cl.Produce(rctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))}, nil)
				}
				if err := cl.Flush(rctx); err != nil && ctx.Err() == nil {
					stats.fail(fmt.Errorf("produce to %s: %w", topic, err))
				}
			}
			if err := deleteTopic(rctx, adm, topic); err != nil {
				stats.deleteErr.Add(1)
				stats.fail(fmt.Errorf("delete %s: %w", topic, err))
			} else {
				stats.deleteOK.Add(1)
			}
			cl.PurgeTopicsFromClient(topic) // else the client asks for every churned topic's metadata
			cancel()
		}
	}), nil
}

// startMetadataTraffic sends Metadata and ListOffsets (earliest and latest)
// for topic every 100 ms and counts the answers.
func startMetadataTraffic(seeds []string, topic string, ok, failed *atomic.Int64) (*loop, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequestRetries(1))
	if err != nil {
		return nil, err
	}
	adm := kadm.NewClient(cl)
	return run(func(ctx context.Context) {
		defer cl.Close()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := adm.Metadata(rctx, topic)
			if err == nil {
				var ends kadm.ListedOffsets
				ends, err = adm.ListEndOffsets(rctx, topic)
				if err == nil {
					err = ends.Error()
				}
			}
			if err == nil {
				var starts kadm.ListedOffsets
				starts, err = adm.ListStartOffsets(rctx, topic)
				if err == nil {
					err = starts.Error()
				}
			}
			cancel()
			if err != nil {
				failed.Add(1)
			} else {
				ok.Add(1)
			}
		}
	}), nil
}

// churnLeftovers lists the entries of the nodes' log dirs that belong to a
// churned topic (its partition dirs, live or renamed -delete).
func churnLeftovers(c *testutil.Cluster) ([]string, error) {
	var out []string
	var errs []error
	for _, n := range c.Nodes() {
		ents, err := os.ReadDir(n.Dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), churnPrefix) {
				out = append(out, fmt.Sprintf("node %d: %s", n.ID, e.Name()))
			}
		}
	}
	return out, errors.Join(errs...)
}
