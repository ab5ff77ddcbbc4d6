package config

import (
	"errors"
	"reflect"
	"testing"
)

// Every topic key's default is the effective value of its broker synonym.
func TestTopicDefaultsFollowBrokerSynonyms(t *testing.T) {
	for _, props := range []map[string]string{
		nil,
		{"log.retention.minutes": "5", "log.roll.hours": "2", "log.flush.scheduler.interval.ms": "100",
			"message.max.bytes": "5000", "log.cleanup.policy": "compact", "compression.type": "lz4",
			"log.segment.delete.delay.ms": "1", "unclean.leader.election.enable": "true", "log.preallocate": "true"},
	} {
		b, err := Parse(props)
		if err != nil {
			t.Fatal(err)
		}
		td := b.TopicDefaults()
		vals := b.Values()
		for _, d := range topicDefList {
			if len(d.synonyms) == 0 {
				if got := format(d.field(&td)); got != d.dflt {
					t.Errorf("%v: %s = %q, want its own default %q", props, d.name, got, d.dflt)
				}
				continue
			}
			if got, want := format(d.field(&td)), vals[d.synonyms[0]]; got != want {
				t.Errorf("%v: %s = %q, want %s's %q", props, d.name, got, d.synonyms[0], want)
			}
		}
	}
}

func TestTopicDefaults(t *testing.T) {
	td := Default().TopicDefaults()
	want := Topic{
		RetentionMs:                     604800000,
		RetentionBytes:                  -1,
		SegmentBytes:                    1073741824,
		SegmentMs:                       604800000,
		SegmentJitterMs:                 0,
		SegmentIndexBytes:               10485760,
		IndexIntervalBytes:              4096,
		FlushMessages:                   9223372036854775807,
		FlushMs:                         9223372036854775807,
		MaxMessageBytes:                 1048588,
		MessageTimestampType:            "CreateTime",
		MessageTimestampDifferenceMaxMs: 9223372036854775807,
		MessageTimestampBeforeMaxMs:     9223372036854775807,
		MessageTimestampAfterMaxMs:      9223372036854775807,
		CompressionType:                 "producer",
		CompressionGzipLevel:            -1,
		CompressionLz4Level:             9,
		CompressionZstdLevel:            3,
		CleanupPolicy:                   []string{"delete"},
		MinInsyncReplicas:               1,
		FileDeleteDelayMs:               60000,
		UncleanLeaderElectionEnable:     false,
		Preallocate:                     false,
		DeleteRetentionMs:               86400000,
		MinCompactionLagMs:              0,
		MaxCompactionLagMs:              9223372036854775807,
		MinCleanableDirtyRatio:          0.5,

		LeaderReplicationThrottledReplicas:   "",
		FollowerReplicationThrottledReplicas: "",
	}
	if !reflect.DeepEqual(td, want) {
		t.Errorf("TopicDefaults =\n%+v\nwant\n%+v", td, want)
	}
	if !td.Delete() || td.Compact() || td.LogAppendTime() {
		t.Error("helper methods")
	}
}

func TestResolveTopic(t *testing.T) {
	b, err := Parse(map[string]string{"log.retention.hours": "1", "message.max.bytes": "2000"})
	if err != nil {
		t.Fatal(err)
	}
	topic, err := b.ResolveTopic(map[string]string{
		"retention.ms":              " 5000 ",
		"cleanup.policy":            "compact,delete",
		"message.timestamp.type":    "LogAppendTime",
		"segment.bytes":             "14",
		"preallocate":               "TRUE",
		"min.cleanable.dirty.ratio": "0.1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if topic.RetentionMs != 5000 || !topic.Compact() || !topic.Delete() || !topic.LogAppendTime() ||
		topic.SegmentBytes != 14 || !topic.Preallocate || topic.MinCleanableDirtyRatio != 0.1 {
		t.Errorf("overrides not applied: %+v", topic)
	}
	if topic.MaxMessageBytes != 2000 || topic.SegmentMs != 604800000 {
		t.Errorf("broker defaults not applied: %+v", topic)
	}
	noOverride, err := b.ResolveTopic(nil)
	if err != nil || noOverride.RetentionMs != 3600000 {
		t.Errorf("ResolveTopic(nil) = %+v, %v", noOverride, err)
	}

	_, err = b.ResolveTopic(map[string]string{"retention.ms": "1", "bogus": "x"})
	checkConfigErr(t, err, ErrUnknownConfig, "bogus", "unknown topic configuration")
	_, err = b.ResolveTopic(map[string]string{"retention.ms": "-2"})
	checkConfigErr(t, err, ErrInvalidConfig, "retention.ms", "minimum -1")
	_, err = b.ResolveTopic(map[string]string{"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
	checkConfigErr(t, err, ErrInvalidConfig, "min.compaction.lag.ms", "must not exceed")
	_, err = b.ResolveTopic(map[string]string{"max.compaction.lag.ms": "5", "min.compaction.lag.ms": "5"})
	if err != nil {
		t.Error(err)
	}
	c, err := Parse(map[string]string{"log.cleaner.min.compaction.lag.ms": "100"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ResolveTopic(map[string]string{"max.compaction.lag.ms": "50"})
	checkConfigErr(t, err, ErrInvalidConfig, "max.compaction.lag.ms", "must not exceed")
}

func TestValidateTopicConfig(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		ok         bool
		reason     string
	}{
		{"retention.ms", "-1", true, ""},
		{"retention.ms", "0", true, ""},
		{"retention.ms", "-2", false, "minimum -1"},
		{"retention.ms", "1h", false, "not an integer"},
		{"retention.bytes", "-7", true, ""},
		{"segment.bytes", "13", false, "minimum 14"},
		{"segment.bytes", "1048576", true, ""},
		{"segment.ms", "0", false, "minimum 1"},
		{"segment.index.bytes", "3", false, "minimum 4"},
		{"index.interval.bytes", "-1", false, "minimum 0"},
		{"flush.messages", "0", false, "minimum 1"},
		{"flush.ms", "0", true, ""},
		{"max.message.bytes", "-1", false, "minimum 0"},
		{"message.timestamp.type", "LogAppendTime", true, ""},
		{"message.timestamp.type", "AppendTime", false, "not one of"},
		{"message.timestamp.difference.max.ms", "-1", false, "minimum 0"},
		{"compression.type", "uncompressed", true, ""},
		{"compression.type", "none", false, "not one of"},
		{"compression.type", "GZIP", false, "not one of"},
		{"cleanup.policy", "compact,delete", true, ""},
		{"cleanup.policy", "delete , compact", true, ""},
		{"cleanup.policy", "compact,compact", false, "twice"},
		{"cleanup.policy", "remove", false, "not one of"},
		{"min.insync.replicas", "0", false, "minimum 1"},
		{"file.delete.delay.ms", "-1", false, "minimum 0"},
		{"unclean.leader.election.enable", "maybe", false, "not a boolean"},
		{"preallocate", "false", true, ""},
		{"min.cleanable.dirty.ratio", "1.01", false, "between"},
		{"compression.zstd.level", "-131072", true, ""},
		{"compression.gzip.level", "-1", true, ""},
		{"compression.gzip.level", "10", false, "between 1 and 9"},
		{"leader.replication.throttled.replicas", "", true, ""},
		{"leader.replication.throttled.replicas", "*", true, ""},
		{"leader.replication.throttled.replicas", " * ", true, ""},
		{"leader.replication.throttled.replicas", "0:1", true, ""},
		{"leader.replication.throttled.replicas", "0:1,0:2, 1:2 ,10:101", true, ""},
		{"leader.replication.throttled.replicas", "0:1,0:1", true, ""}, // Kafka accepts repeats
		{"leader.replication.throttled.replicas", "*,0:1", false, "literal '*'"},
		{"leader.replication.throttled.replicas", "**", false, "literal '*'"},
		{"leader.replication.throttled.replicas", "0", false, "not partitionId:brokerId"},
		{"leader.replication.throttled.replicas", "0:", false, "missing id"},
		{"leader.replication.throttled.replicas", ":1", false, "missing id"},
		{"leader.replication.throttled.replicas", "0:1:2", false, "not a non-negative integer"},
		{"leader.replication.throttled.replicas", "-1:1", false, "not a non-negative integer"},
		{"leader.replication.throttled.replicas", "0:+1", false, "not a non-negative integer"},
		{"leader.replication.throttled.replicas", "0 : 1", false, "not a non-negative integer"},
		{"leader.replication.throttled.replicas", "0:1,,1:1", false, "empty entry"},
		{"leader.replication.throttled.replicas", "0:1,", false, "empty entry"},
		{"leader.replication.throttled.replicas", "2147483648:1", false, "32-bit"},
		{"leader.replication.throttled.replicas", "all", false, "literal '*'"},
		{"follower.replication.throttled.replicas", "", true, ""},
		{"follower.replication.throttled.replicas", "*", true, ""},
		{"follower.replication.throttled.replicas", "3:0,3:2147483647", true, ""},
		{"follower.replication.throttled.replicas", "a:b", false, "not a non-negative integer"},
		{"follower.replication.throttled.replicas", "1-2", false, "not partitionId:brokerId"},
	} {
		err := ValidateTopicConfig(tc.key, tc.value)
		if tc.ok {
			if err != nil {
				t.Errorf("%s=%s: %v", tc.key, tc.value, err)
			}
			continue
		}
		checkConfigErr(t, err, ErrInvalidConfig, tc.key, tc.reason)
		if ce := err.(*Error); ce.Value != tc.value {
			t.Errorf("error Value = %q, want %q", ce.Value, tc.value)
		}
	}
	for _, k := range []string{"log.retention.ms", "retention.hours", "message.max.bytes", "bogus"} {
		checkConfigErr(t, ValidateTopicConfig(k, "1"), ErrUnknownConfig, k, "unknown topic configuration")
	}
}

func TestTopicConfigNamesAndSynonyms(t *testing.T) {
	names := TopicConfigNames()
	for _, k := range []string{"retention.ms", "retention.bytes", "segment.bytes", "segment.ms", "segment.index.bytes",
		"index.interval.bytes", "flush.messages", "flush.ms", "max.message.bytes", "message.timestamp.type",
		"compression.type", "cleanup.policy", "min.insync.replicas", "file.delete.delay.ms",
		"unclean.leader.election.enable", "message.timestamp.difference.max.ms", "preallocate",
		"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"} {
		found := false
		for _, n := range names {
			found = found || n == k
		}
		if !found {
			t.Errorf("%s is not a topic config", k)
		}
	}
	for topic, broker := range map[string]string{
		"retention.ms":         "log.retention.ms",
		"segment.ms":           "log.roll.ms",
		"max.message.bytes":    "message.max.bytes",
		"segment.index.bytes":  "log.index.size.max.bytes",
		"flush.messages":       "log.flush.interval.messages",
		"flush.ms":             "log.flush.interval.ms",
		"file.delete.delay.ms": "log.segment.delete.delay.ms",
		"min.insync.replicas":  "min.insync.replicas",
		"bogus":                "",

		"leader.replication.throttled.replicas":   "",
		"follower.replication.throttled.replicas": "",
	} {
		if got := BrokerSynonym(topic); got != broker {
			t.Errorf("BrokerSynonym(%s) = %q, want %q", topic, got, broker)
		}
	}
}

func TestResolveTopicThrottledReplicas(t *testing.T) {
	b := Default()
	topic, err := b.ResolveTopic(map[string]string{
		"leader.replication.throttled.replicas":   " 0:1 , 1:2 ",
		"follower.replication.throttled.replicas": "*",
	})
	if err != nil {
		t.Fatal(err)
	}
	if topic.LeaderReplicationThrottledReplicas != "0:1,1:2" || topic.FollowerReplicationThrottledReplicas != "*" {
		t.Errorf("leader %q follower %q", topic.LeaderReplicationThrottledReplicas, topic.FollowerReplicationThrottledReplicas)
	}
	_, err = b.ResolveTopic(map[string]string{"follower.replication.throttled.replicas": "0:x"})
	checkConfigErr(t, err, ErrInvalidConfig, "follower.replication.throttled.replicas", "not a non-negative integer")
}

func TestParseThrottledReplicas(t *testing.T) {
	for _, tc := range []struct {
		in    string
		all   bool
		pairs map[int32][]int32
	}{
		{"", false, nil},
		{"  ", false, nil},
		{"*", true, nil},
		{" * ", true, nil},
		{"0:1", false, map[int32][]int32{0: {1}}},
		{"0:1, 0:2 ,1:2,0:1,12:0", false, map[int32][]int32{0: {1, 2}, 1: {2}, 12: {0}}},
	} {
		all, pairs, err := ParseThrottledReplicas(tc.in)
		if err != nil || all != tc.all || !reflect.DeepEqual(pairs, tc.pairs) {
			t.Errorf("ParseThrottledReplicas(%q) = %v, %v, %v; want %v, %v", tc.in, all, pairs, err, tc.all, tc.pairs)
		}
	}
	for _, bad := range []string{"*,1:1", "1", "1:", ":1", "1:a", "-1:0", "0:-1", "1:2,", "1:2,,3:4", "1:2:3", "4294967296:1"} {
		all, pairs, err := ParseThrottledReplicas(bad)
		if !errors.Is(err, ErrInvalidConfig) || all || pairs != nil {
			t.Errorf("ParseThrottledReplicas(%q) = %v, %v, %v; want ErrInvalidConfig", bad, all, pairs, err)
		}
	}
}
