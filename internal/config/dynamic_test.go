package config

import (
	"math"
	"reflect"
	"strconv"
	"sync"
	"testing"
)

func TestDynamicPrecedence(t *testing.T) {
	b, err := Parse(map[string]string{"log.retention.ms": "1000", "message.max.bytes": "100"})
	if err != nil {
		t.Fatal(err)
	}
	static := b
	steps := []struct {
		do        func() error
		retention int64
		source    int8
	}{
		{func() error { return nil }, 1000, SourceStaticBroker},
		{func() error { return b.SetDynamicDefault("log.retention.ms", "2000") }, 2000, SourceDynamicDefaultBroker},
		{func() error { return b.SetDynamic("log.retention.ms", " 3000 ") }, 3000, SourceDynamicBroker},
		{func() error { return b.DeleteDynamicDefault("log.retention.ms") }, 3000, SourceDynamicBroker},
		{func() error { return b.DeleteDynamic("log.retention.ms") }, 1000, SourceStaticBroker},
		{func() error { return b.DeleteDynamic("log.retention.ms") }, 1000, SourceStaticBroker}, // not set: no-op
		{func() error { return b.SetDynamic("log.retention.ms", "-1") }, -1, SourceDynamicBroker},
	}
	for i, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		cur := b.Current()
		if cur.LogRetentionMs != s.retention || b.TopicDefaults().RetentionMs != s.retention || b.Values()["log.retention.ms"] != cur.values["log.retention.ms"] {
			t.Errorf("step %d: retention %d (topic %d), want %d", i, cur.LogRetentionMs, b.TopicDefaults().RetentionMs, s.retention)
		}
		if e := entryByName(b.DescribeTopic(nil), "retention.ms"); e.Source != s.source {
			t.Errorf("step %d: source %d, want %d", i, e.Source, s.source)
		}
	}
	// The snapshot returned by Parse never changes.
	if static.LogRetentionMs != 1000 {
		t.Errorf("original snapshot changed: %d", static.LogRetentionMs)
	}
	if got := b.Dynamic(); !reflect.DeepEqual(got, map[string]string{"log.retention.ms": "-1"}) {
		t.Errorf("Dynamic = %v", got)
	}
	if got := b.DynamicDefaults(); len(got) != 0 {
		t.Errorf("DynamicDefaults = %v", got)
	}
	// Dynamic ms beats a static hours value.
	c, err := Parse(map[string]string{"log.roll.hours": "2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetDynamic("log.roll.ms", "10"); err != nil || c.Current().LogRollMs != 10 {
		t.Errorf("roll: %v %d", err, c.Current().LogRollMs)
	}
}

func TestDynamicErrors(t *testing.T) {
	b := Default()
	for _, tc := range []struct {
		key, value string
		kind       error
		reason     string
	}{
		{"num.partitions", "3", ErrInvalidConfig, "cannot be updated dynamically"},
		{"log.retention.hours", "3", ErrInvalidConfig, "cannot be updated dynamically"},
		{"listeners", "PLAINTEXT://:1", ErrInvalidConfig, "cannot be updated dynamically"},
		{"node.id", "2", ErrInvalidConfig, "cannot be updated dynamically"},
		{"bogus", "1", ErrUnknownConfig, "unknown"},
		{"retention.ms", "1", ErrUnknownConfig, "unknown"},
		{"log.segment.bytes", "1", ErrInvalidConfig, "minimum 14"},
		{"log.retention.ms", "0", ErrInvalidConfig, "unlimited (-1)"},
		{"compression.type", "brotli", ErrInvalidConfig, "not one of"},
		{"leader.replication.throttled.rate", "-1", ErrInvalidConfig, "minimum 0"},
		{"follower.replication.throttled.rate", "1MB", ErrInvalidConfig, "not an integer"},
		{"follower.replication.throttled.rate", "9223372036854775808", ErrInvalidConfig, "64-bit"},
		{"leader.replication.throttled.replicas", "*", ErrUnknownConfig, "unknown"},
	} {
		checkConfigErr(t, b.SetDynamic(tc.key, tc.value), tc.kind, tc.key, tc.reason)
		checkConfigErr(t, b.ValidateDynamic(tc.key, tc.value), tc.kind, tc.key, tc.reason)
		checkConfigErr(t, b.SetDynamicDefault(tc.key, tc.value), tc.kind, tc.key, tc.reason)
	}
	c := Default()
	if err := c.SetDynamic("log.cleaner.min.compaction.lag.ms", "100"); err != nil {
		t.Fatal(err)
	}
	checkConfigErr(t, c.SetDynamic("log.cleaner.max.compaction.lag.ms", "50"), ErrInvalidConfig, "log.cleaner.max.compaction.lag.ms", "conflicts with log.cleaner.min.compaction.lag.ms: 100 must not exceed")
	checkConfigErr(t, b.DeleteDynamic("num.partitions"), ErrInvalidConfig, "num.partitions", "cannot be updated dynamically")
	checkConfigErr(t, b.DeleteDynamic("bogus"), ErrUnknownConfig, "bogus", "unknown")
	if !reflect.DeepEqual(b.Values(), Default().Values()) || len(b.Dynamic()) != 0 {
		t.Error("a failed dynamic change left a trace")
	}
	if err := b.ValidateDynamic("log.segment.bytes", "2000"); err != nil || b.Current().LogSegmentBytes != 1<<30 {
		t.Errorf("ValidateDynamic: %v, changed %d", err, b.Current().LogSegmentBytes)
	}
	var lit Broker
	if err := lit.SetDynamic("log.retention.ms", "1"); err == nil {
		t.Error("SetDynamic on a literal Broker succeeded")
	}
	if lit.Current() != &lit {
		t.Error("Current of a literal Broker")
	}
}

func TestDynamicKeys(t *testing.T) {
	for _, k := range []string{"log.retention.ms", "log.retention.bytes", "log.segment.bytes", "log.roll.ms",
		"message.max.bytes", "log.flush.interval.ms", "log.flush.interval.messages", "log.index.interval.bytes",
		"min.insync.replicas", "compression.type", "log.message.timestamp.type", "log.cleanup.policy",
		"unclean.leader.election.enable", "leader.replication.throttled.rate", "follower.replication.throttled.rate",
		"log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size",
		"log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms",
		"max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides", "max.connection.creation.rate"} {
		if !IsDynamic(k) {
			t.Errorf("%s should be dynamic", k)
		}
	}
	for _, k := range []string{"num.partitions", "log.retention.hours", "log.retention.minutes", "log.roll.hours",
		"log.flush.scheduler.interval.ms", "log.dirs", "node.id", "log.cleaner.enable", "bogus"} {
		if IsDynamic(k) {
			t.Errorf("%s should not be dynamic", k)
		}
	}
}

// Run with -race: readers of snapshots and writers never conflict.
func TestDynamicConcurrent(t *testing.T) {
	b := Default()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c := b.Current()
				if c.LogRetentionMs <= 0 && c.LogRetentionMs != -1 {
					t.Error("bad retention")
					return
				}
				_ = b.DescribeTopic(map[string]string{"retention.ms": "5"})
				_ = b.Values()
			}
		}()
	}
	for i := 1; i <= 200; i++ {
		if err := b.SetDynamic("log.retention.ms", "1000"); err != nil {
			t.Fatal(err)
		}
		if err := b.DeleteDynamic("log.retention.ms"); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}

func TestReplicationThrottleRates(t *testing.T) {
	b, err := Parse(map[string]string{"follower.replication.throttled.rate": "500"})
	if err != nil {
		t.Fatal(err)
	}
	if c := b.Current(); c.LeaderReplicationThrottledRate != math.MaxInt64 || c.FollowerReplicationThrottledRate != 500 {
		t.Fatalf("static: leader %d follower %d", c.LeaderReplicationThrottledRate, c.FollowerReplicationThrottledRate)
	}
	steps := []struct {
		do               func() error
		leader, follower int64
		leaderSrc        int8
		followerSrc      int8
	}{
		{func() error { return nil }, math.MaxInt64, 500, SourceDefault, SourceStaticBroker},
		{func() error { return b.SetDynamicDefault("leader.replication.throttled.rate", "1000000") }, 1000000, 500, SourceDynamicDefaultBroker, SourceStaticBroker},
		{func() error { return b.SetDynamic("leader.replication.throttled.rate", " 2000 ") }, 2000, 500, SourceDynamicBroker, SourceStaticBroker},
		{func() error { return b.SetDynamicDefault("follower.replication.throttled.rate", "0") }, 2000, 0, SourceDynamicBroker, SourceDynamicDefaultBroker},
		{func() error { return b.SetDynamic("follower.replication.throttled.rate", "9223372036854775807") }, 2000, math.MaxInt64, SourceDynamicBroker, SourceDynamicBroker},
		{func() error { return b.DeleteDynamic("leader.replication.throttled.rate") }, 1000000, math.MaxInt64, SourceDynamicDefaultBroker, SourceDynamicBroker},
		{func() error { return b.DeleteDynamicDefault("leader.replication.throttled.rate") }, math.MaxInt64, math.MaxInt64, SourceDefault, SourceDynamicBroker},
		{func() error { return b.DeleteDynamic("follower.replication.throttled.rate") }, math.MaxInt64, 0, SourceDefault, SourceDynamicDefaultBroker},
	}
	for i, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		c := b.Current()
		if c.LeaderReplicationThrottledRate != s.leader || c.FollowerReplicationThrottledRate != s.follower {
			t.Errorf("step %d: leader %d follower %d, want %d %d", i, c.LeaderReplicationThrottledRate, c.FollowerReplicationThrottledRate, s.leader, s.follower)
		}
		es := b.DescribeBroker()
		for _, w := range []struct {
			key   string
			value int64
			src   int8
		}{{"leader.replication.throttled.rate", s.leader, s.leaderSrc}, {"follower.replication.throttled.rate", s.follower, s.followerSrc}} {
			e := entryByName(es, w.key)
			if e.Value != strconv.FormatInt(w.value, 10) || e.Source != w.src || e.ReadOnly || e.Type != TypeLong || e.Null {
				t.Errorf("step %d: %s: %+v, want value %d source %d", i, w.key, e, w.value, w.src)
			}
		}
	}
	if err := b.ValidateDynamic("leader.replication.throttled.rate", "0"); err != nil {
		t.Error(err)
	}
	_, err = Parse(map[string]string{"leader.replication.throttled.rate": "-5"})
	checkConfigErr(t, err, ErrInvalidConfig, "leader.replication.throttled.rate", "minimum 0")
}

// log.cleaner.threads changes, as Kafka's LogCleaner allows, to between half and double the
// current count and never below 1; the other cleaner settings keep their cross-key rule.
func TestCleanerReconfiguration(t *testing.T) {
	c, err := Parse(map[string]string{"log.cleaner.threads": "2", "log.cleaner.dedupe.buffer.size": "16777216"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ok := range []string{"1", "2", "3", "4"} {
		if err := c.ValidateDynamic("log.cleaner.threads", ok); err != nil {
			t.Errorf("threads 2 -> %s: %v", ok, err)
		}
	}
	checkConfigErr(t, c.ValidateDynamic("log.cleaner.threads", "5"), ErrInvalidConfig, "log.cleaner.threads", "more than double the current value 2")
	checkConfigErr(t, c.ValidateDynamic("log.cleaner.threads", "0"), ErrInvalidConfig, "log.cleaner.threads", "at least 1")
	if err := c.SetDynamic("log.cleaner.threads", "4"); err != nil {
		t.Fatal(err)
	}
	checkConfigErr(t, c.ValidateDynamic("log.cleaner.threads", "1"), ErrInvalidConfig, "log.cleaner.threads", "less than half the current value 4")
	checkConfigErr(t, c.ValidateDynamic("log.cleaner.dedupe.buffer.size", "4194304"), ErrInvalidConfig, "log.cleaner.dedupe.buffer.size", "at least 1MB per cleaner thread")
	if err := c.SetDynamicDefault("log.cleaner.io.max.bytes.per.second", "1000"); err != nil {
		t.Fatal(err)
	}
	if got := c.Current().LogCleanerIOMaxBytesPerSecond; got != 1000 {
		t.Errorf("log.cleaner.io.max.bytes.per.second = %v after the dynamic default, want 1000", got)
	}
}
