package compaction

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// dirtyTopic creates a compacted topic of 2 KiB segments holding 100 versions of 5 keys
// and 100 filler keys, and returns its record count.
func dirtyTopic(t *testing.T, b *testutil.Broker, topic string) int {
	t.Helper()
	createCompacted(t, b.Addr(), topic, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01",
	})
	var recs []*kgo.Record
	for v := range 100 {
		for k := range 5 {
			recs = append(recs, record(topic, fmt.Sprintf("key-%d", k), fmt.Sprintf("value-%d-%d", k, v)))
		}
	}
	for i := range 100 {
		recs = append(recs, record(topic, fmt.Sprintf("filler-%03d", i), "f"))
	}
	produce(t, client(t, b.Addr()), recs)
	return len(recs)
}

// alterBroker sets key to value through IncrementalAlterConfigs: on the cluster-wide
// default resource when perBroker is false, else on the broker's own resource.
func alterBroker(t *testing.T, addr string, perBroker bool, key, value string) error {
	t.Helper()
	adm := kadm.NewClient(client(t, addr))
	ctx := ctxT(t, 30*time.Second)
	var ids []int32
	if perBroker {
		bs, err := adm.ListBrokers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = bs.NodeIDs()
	}
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: key, Value: &value}}, ids...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Err != nil {
			return fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
		}
	}
	return nil
}

// log.cleaner.io.max.bytes.per.second, changed cluster-wide through IncrementalAlterConfigs,
// applies to the running cleaner without a restart of the broker: a pass throttled to 1 byte
// a second, which would take days, finishes once the limit is raised.
func TestDynamicCleanerThrottle(t *testing.T) {
	b := testutil.StartBroker(t, append([]string{"log.cleaner.io.max.bytes.per.second=1"}, cleanerSets...)...)
	const topic = "throttled"
	n := dirtyTopic(t, b, topic)
	if got := len(readAll(t, b.Addr(), topic, 0)); got != n {
		t.Fatalf("%d of %d records read before the limit was raised: the 1 byte/s pass cannot have finished", got, n)
	}
	if err := alterBroker(t, b.Addr(), false, "log.cleaner.io.max.bytes.per.second", "100000000"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the pass under the raised limit", func() (bool, string) {
		got := len(readAll(t, b.Addr(), topic, 0))
		return got <= 105+10, fmt.Sprintf("%d of %d records left", got, n)
	})
}

// The cleaner settings that need new threads (here log.cleaner.backoff.ms and
// log.cleaner.threads, on the broker's own resource) restart its threads with the new
// values: a cleaner sleeping an hour-long backoff cleans the dirty topic as soon as the
// backoff is changed. log.cleaner.threads may change by at most a factor of two, as in
// Kafka.
func TestDynamicCleanerThreadsRestart(t *testing.T) {
	b := testutil.StartBroker(t, "log.cleaner.backoff.ms=3600000", "log.cleaner.dedupe.buffer.size=4194304")
	const topic = "asleep"
	n := dirtyTopic(t, b, topic)
	if got := len(readAll(t, b.Addr(), topic, 0)); got != n {
		t.Fatalf("%d of %d records read before the backoff changed: the cleaner found nothing at its start and sleeps an hour", got, n)
	}
	if err := alterBroker(t, b.Addr(), true, "log.cleaner.threads", "3"); err == nil {
		t.Fatal("log.cleaner.threads 1 -> 3 accepted; Kafka refuses more than double the current count")
	}
	if err := alterBroker(t, b.Addr(), true, "log.cleaner.threads", "2"); err != nil {
		t.Fatal(err)
	}
	if err := alterBroker(t, b.Addr(), true, "log.cleaner.backoff.ms", "20"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the restarted threads' pass", func() (bool, string) {
		got := len(readAll(t, b.Addr(), topic, 0))
		return got <= 105+10, fmt.Sprintf("%d of %d records left", got, n)
	})
}
