package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Topic is the effective configuration of one topic: the broker's defaults
// (through each key's broker synonym, or the key's own default for the keys
// without one) with the topic's overrides applied. Durations are
// milliseconds. Kafka's names are in the field comments.
type Topic struct {
	RetentionMs                     int64    // retention.ms; -1 = unlimited
	RetentionBytes                  int64    // retention.bytes; -1 = unlimited
	SegmentBytes                    int32    // segment.bytes
	SegmentMs                       int64    // segment.ms
	SegmentJitterMs                 int64    // segment.jitter.ms
	SegmentIndexBytes               int32    // segment.index.bytes
	IndexIntervalBytes              int32    // index.interval.bytes
	FlushMessages                   int64    // flush.messages
	FlushMs                         int64    // flush.ms
	MaxMessageBytes                 int32    // max.message.bytes
	MessageTimestampType            string   // message.timestamp.type: CreateTime or LogAppendTime
	MessageTimestampDifferenceMaxMs int64    // message.timestamp.difference.max.ms
	MessageTimestampBeforeMaxMs     int64    // message.timestamp.before.max.ms
	MessageTimestampAfterMaxMs      int64    // message.timestamp.after.max.ms
	CompressionType                 string   // compression.type: producer, uncompressed, gzip, snappy, lz4, zstd
	CompressionGzipLevel            int32    // compression.gzip.level
	CompressionLz4Level             int32    // compression.lz4.level
	CompressionZstdLevel            int32    // compression.zstd.level
	CleanupPolicy                   []string // cleanup.policy: subset of compact, delete
	MinInsyncReplicas               int32    // min.insync.replicas
	FileDeleteDelayMs               int64    // file.delete.delay.ms
	UncleanLeaderElectionEnable     bool     // unclean.leader.election.enable
	Preallocate                     bool     // preallocate
	DeleteRetentionMs               int64    // delete.retention.ms
	MinCompactionLagMs              int64    // min.compaction.lag.ms
	MaxCompactionLagMs              int64    // max.compaction.lag.ms
	MinCleanableDirtyRatio          float64  // min.cleanable.dirty.ratio

	// The replicas throttled by the broker's leader/follower
	// .replication.throttled.rate, as normalized text: "" (none), "*" (all)
	// or "partition:brokerId" pairs joined by ","; read them with
	// ParseThrottledReplicas. No broker synonym: the default is "".
	LeaderReplicationThrottledReplicas   string // leader.replication.throttled.replicas
	FollowerReplicationThrottledReplicas string // follower.replication.throttled.replicas
}

// Compact reports whether cleanup.policy includes compact.
func (t *Topic) Compact() bool { return contains(t.CleanupPolicy, "compact") }

// Delete reports whether cleanup.policy includes delete (time/size retention).
func (t *Topic) Delete() bool { return contains(t.CleanupPolicy, "delete") }

// LogAppendTime reports whether message.timestamp.type is LogAppendTime.
func (t *Topic) LogAppendTime() bool { return t.MessageTimestampType == "LogAppendTime" }

// topicDef describes one topic key.
type topicDef struct {
	name     string
	synonyms []string // broker keys supplying the default, highest priority first (Kafka's ServerTopicConfigSynonyms); empty for a topic-only key
	dflt     string   // default of a topic-only key (no synonyms); unused otherwise
	vt       valueType
	field    func(t *Topic) any
	doc      string
}

func syn(key string) []string { return brokerSynonyms(key) }

var topicDefList = []*topicDef{
	{name: "cleanup.policy", synonyms: syn("log.cleanup.policy"), vt: vtCleanup, field: func(t *Topic) any { return &t.CleanupPolicy }, doc: "delete removes old segments by retention; compact keeps the last record per key; both may be given."},
	{name: "compression.type", synonyms: syn("compression.type"), vt: vtCompression, field: func(t *Topic) any { return &t.CompressionType }, doc: "Final compression of the topic's data; producer keeps the producer's codec."},
	{name: "compression.gzip.level", synonyms: syn("compression.gzip.level"), vt: vtGzipLevel, field: func(t *Topic) any { return &t.CompressionGzipLevel }, doc: "gzip level when compression.type is gzip."},
	{name: "compression.lz4.level", synonyms: syn("compression.lz4.level"), vt: vtLz4Level, field: func(t *Topic) any { return &t.CompressionLz4Level }, doc: "lz4 level when compression.type is lz4."},
	{name: "compression.zstd.level", synonyms: syn("compression.zstd.level"), vt: vtZstdLevel, field: func(t *Topic) any { return &t.CompressionZstdLevel }, doc: "zstd level when compression.type is zstd."},
	{name: "delete.retention.ms", synonyms: syn("log.cleaner.delete.retention.ms"), vt: vtNonNegLong, field: func(t *Topic) any { return &t.DeleteRetentionMs }, doc: "Milliseconds tombstones are kept in a compacted topic."},
	{name: "file.delete.delay.ms", synonyms: syn("log.segment.delete.delay.ms"), vt: vtNonNegLong, field: func(t *Topic) any { return &t.FileDeleteDelayMs }, doc: "Milliseconds a deleted segment's files linger before removal."},
	{name: "flush.messages", synonyms: syn("log.flush.interval.messages"), vt: vtPositiveLong, field: func(t *Topic) any { return &t.FlushMessages }, doc: "Messages appended before the log is fsynced."},
	{name: "flush.ms", synonyms: syn("log.flush.interval.ms"), vt: vtNonNegLong, field: func(t *Topic) any { return &t.FlushMs }, doc: "Most milliseconds data stays unflushed."},
	{name: "follower.replication.throttled.replicas", vt: vtThrottledReplicas, field: func(t *Topic) any { return &t.FollowerReplicationThrottledReplicas }, doc: "Replicas whose log replication is throttled on the follower side (by follower.replication.throttled.rate): partitionId:brokerId pairs separated by commas, or * for every replica of the topic."},
	{name: "index.interval.bytes", synonyms: syn("log.index.interval.bytes"), vt: vtNonNegInt, field: func(t *Topic) any { return &t.IndexIntervalBytes }, doc: "Bytes of log between offset index entries."},
	{name: "leader.replication.throttled.replicas", vt: vtThrottledReplicas, field: func(t *Topic) any { return &t.LeaderReplicationThrottledReplicas }, doc: "Replicas whose log replication is throttled on the leader side (by leader.replication.throttled.rate): partitionId:brokerId pairs separated by commas, or * for every replica of the topic."},
	{name: "max.compaction.lag.ms", synonyms: syn("log.cleaner.max.compaction.lag.ms"), vt: vtPositiveLong, field: func(t *Topic) any { return &t.MaxCompactionLagMs }, doc: "Greatest age of a message before it must be compacted."},
	{name: "max.message.bytes", synonyms: syn("message.max.bytes"), vt: vtNonNegInt, field: func(t *Topic) any { return &t.MaxMessageBytes }, doc: "Largest record batch accepted, in bytes."},
	{name: "message.timestamp.after.max.ms", synonyms: syn("log.message.timestamp.after.max.ms"), vt: vtNonNegLong, field: func(t *Topic) any { return &t.MessageTimestampAfterMaxMs }, doc: "How far a CreateTime timestamp may lie after the broker's clock."},
	{name: "message.timestamp.before.max.ms", synonyms: syn("log.message.timestamp.before.max.ms"), vt: vtNonNegLong, field: func(t *Topic) any { return &t.MessageTimestampBeforeMaxMs }, doc: "How far a CreateTime timestamp may lie before the broker's clock."},
	{name: "message.timestamp.difference.max.ms", synonyms: syn("log.message.timestamp.difference.max.ms"), vt: vtNonNegLong, field: func(t *Topic) any { return &t.MessageTimestampDifferenceMaxMs }, doc: "Largest allowed difference between a CreateTime timestamp and the broker's clock."},
	{name: "message.timestamp.type", synonyms: syn("log.message.timestamp.type"), vt: vtTimestampType, field: func(t *Topic) any { return &t.MessageTimestampType }, doc: "CreateTime keeps the producer's timestamps; LogAppendTime stamps batches with the broker's clock."},
	{name: "min.cleanable.dirty.ratio", synonyms: syn("log.cleaner.min.cleanable.ratio"), vt: vtRatio, field: func(t *Topic) any { return &t.MinCleanableDirtyRatio }, doc: "Least ratio of dirty log to total log for compaction to run."},
	{name: "min.compaction.lag.ms", synonyms: syn("log.cleaner.min.compaction.lag.ms"), vt: vtNonNegLong, field: func(t *Topic) any { return &t.MinCompactionLagMs }, doc: "Least age of a message before it may be compacted."},
	{name: "min.insync.replicas", synonyms: syn("min.insync.replicas"), vt: vtPositiveInt, field: func(t *Topic) any { return &t.MinInsyncReplicas }, doc: "Replicas that must have a write before an acks=all produce succeeds."},
	{name: "preallocate", synonyms: syn("log.preallocate"), vt: vtBool, field: func(t *Topic) any { return &t.Preallocate }, doc: "Preallocate segment files at creation."},
	{name: "retention.bytes", synonyms: syn("log.retention.bytes"), vt: vtAnyLong, field: func(t *Topic) any { return &t.RetentionBytes }, doc: "Largest size of a partition's log before old segments are deleted; -1 is unlimited."},
	{name: "retention.ms", synonyms: syn("log.retention.ms"), vt: longType(-1, noMax), field: func(t *Topic) any { return &t.RetentionMs }, doc: "Milliseconds a segment is kept before deletion; -1 keeps it forever."},
	{name: "segment.bytes", synonyms: syn("log.segment.bytes"), vt: vtSegmentBytes, field: func(t *Topic) any { return &t.SegmentBytes }, doc: "Largest size of one log segment file."},
	{name: "segment.index.bytes", synonyms: syn("log.index.size.max.bytes"), vt: vtIndexBytes, field: func(t *Topic) any { return &t.SegmentIndexBytes }, doc: "Largest size of a segment's offset index."},
	{name: "segment.jitter.ms", synonyms: syn("log.roll.jitter.ms"), vt: vtNonNegLong, field: func(t *Topic) any { return &t.SegmentJitterMs }, doc: "Most milliseconds subtracted at random from segment.ms."},
	{name: "segment.ms", synonyms: syn("log.roll.ms"), vt: vtRollMs, field: func(t *Topic) any { return &t.SegmentMs }, doc: "Milliseconds after which a segment is rolled even if not full."},
	{name: "unclean.leader.election.enable", synonyms: syn("unclean.leader.election.enable"), vt: vtBool, field: func(t *Topic) any { return &t.UncleanLeaderElectionEnable }, doc: "Allow a replica outside the ISR to become leader, losing data."},
}

var topicDefs = map[string]*topicDef{}

func init() {
	for _, d := range topicDefList {
		if topicDefs[d.name] != nil {
			panic("config: duplicate topic key " + d.name)
		}
		topicDefs[d.name] = d
		if len(d.synonyms) == 0 {
			if _, _, reason := d.vt.parse(d.dflt); reason != "" {
				panic("config: bad default for topic key " + d.name + ": " + reason)
			}
		}
	}
}

// TopicConfigNames returns every topic-level key, sorted.
func TopicConfigNames() []string {
	names := make([]string, 0, len(topicDefList))
	for _, d := range topicDefList {
		names = append(names, d.name)
	}
	sort.Strings(names)
	return names
}

// BrokerSynonym returns the broker key that supplies the default of topic key
// (retention.ms -> log.retention.ms, max.message.bytes -> message.max.bytes),
// or "" if key is not a topic config or is a topic-only key without broker
// synonym (leader.replication.throttled.replicas).
func BrokerSynonym(key string) string {
	if d := topicDefs[key]; d != nil && len(d.synonyms) > 0 {
		return d.synonyms[0]
	}
	return ""
}

// ValidateTopicConfig checks one topic-level key and value (as given in
// CreateTopics or AlterConfigs). It returns an *Error wrapping
// ErrUnknownConfig for a key that is not a topic config, or ErrInvalidConfig
// naming the key and value.
func ValidateTopicConfig(key, value string) error {
	_, err := parseTopicValue(key, value)
	return err
}

func parseTopicValue(key, value string) (any, error) {
	d := topicDefs[key]
	if d == nil {
		return nil, unknown(key, "topic configuration")
	}
	v, _, reason := d.vt.parse(strings.TrimSpace(value))
	if reason != "" {
		return nil, invalid(key, value, reason)
	}
	return v, nil
}

// TopicDefaults returns the configuration of a topic with no overrides: the
// effective broker values of each key's broker synonym, and the own default
// of each key without one.
func (b *Broker) TopicDefaults() Topic {
	c := b.Current()
	t := Topic{
		RetentionMs:                     c.LogRetentionMs,
		RetentionBytes:                  c.LogRetentionBytes,
		SegmentBytes:                    c.LogSegmentBytes,
		SegmentMs:                       c.LogRollMs,
		SegmentJitterMs:                 c.LogRollJitterMs,
		SegmentIndexBytes:               c.LogIndexSizeMaxBytes,
		IndexIntervalBytes:              c.LogIndexIntervalBytes,
		FlushMessages:                   c.LogFlushIntervalMessages,
		FlushMs:                         c.LogFlushIntervalMs,
		MaxMessageBytes:                 c.MessageMaxBytes,
		MessageTimestampType:            c.LogMessageTimestampType,
		MessageTimestampDifferenceMaxMs: c.LogMessageTimestampDifferenceMaxMs,
		MessageTimestampBeforeMaxMs:     c.LogMessageTimestampBeforeMaxMs,
		MessageTimestampAfterMaxMs:      c.LogMessageTimestampAfterMaxMs,
		CompressionType:                 c.CompressionType,
		CompressionGzipLevel:            c.CompressionGzipLevel,
		CompressionLz4Level:             c.CompressionLz4Level,
		CompressionZstdLevel:            c.CompressionZstdLevel,
		CleanupPolicy:                   append([]string(nil), c.LogCleanupPolicy...),
		MinInsyncReplicas:               c.MinInsyncReplicas,
		FileDeleteDelayMs:               c.LogSegmentDeleteDelayMs,
		UncleanLeaderElectionEnable:     c.UncleanLeaderElectionEnable,
		Preallocate:                     c.LogPreallocate,
		DeleteRetentionMs:               c.LogCleanerDeleteRetentionMs,
		MinCompactionLagMs:              c.LogCleanerMinCompactionLagMs,
		MaxCompactionLagMs:              c.LogCleanerMaxCompactionLagMs,
		MinCleanableDirtyRatio:          c.LogCleanerMinCleanableRatio,
	}
	for _, d := range topicDefList {
		if len(d.synonyms) == 0 {
			v, _, _ := d.vt.parse(d.dflt) // validated by init
			assign(d.field(&t), v)
		}
	}
	return t
}

// ResolveTopic applies a topic's overrides to the broker defaults. Every
// override is validated (keys in sorted order), then the cross-key rule
// min.compaction.lag.ms <= max.compaction.lag.ms is checked. Errors are as
// for ValidateTopicConfig.
func (b *Broker) ResolveTopic(overrides map[string]string) (Topic, error) {
	t := b.TopicDefaults()
	keys := make([]string, 0, len(overrides))
	for k := range overrides {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, err := parseTopicValue(k, overrides[k])
		if err != nil {
			return Topic{}, err
		}
		assign(topicDefs[k].field(&t), v)
	}
	if t.MinCompactionLagMs > t.MaxCompactionLagMs {
		key := "min.compaction.lag.ms"
		if _, ok := overrides[key]; !ok {
			key = "max.compaction.lag.ms"
		}
		return Topic{}, invalid(key, overrides[key], fmt.Sprintf("min.compaction.lag.ms (%d) must not exceed max.compaction.lag.ms (%d)", t.MinCompactionLagMs, t.MaxCompactionLagMs))
	}
	return t, nil
}

// vtThrottledReplicas is Kafka's LIST with ThrottledReplicaListValidator:
// "" (no replica), "*" (every replica) or comma-separated
// partitionId:brokerId pairs; blanks around entries are ignored. The parsed
// value is the normalized text (a string). Deviations: Kafka also accepts
// empty entries ("0:1,,1:1") and ids beyond 32 bits; Gregor refuses both.
var vtThrottledReplicas = valueType{TypeList, func(s string) (any, string, string) {
	_, _, norm, reason := parseThrottled(s)
	return norm, norm, reason
}}

// ParseThrottledReplicas parses the value of leader.replication.throttled.replicas
// or follower.replication.throttled.replicas (as in Topic). all is true for
// "*": every replica of the topic is throttled. Otherwise pairs maps each
// listed partition to its throttled broker ids, in the order given and
// without repeats; it is nil for "" (nothing throttled). A malformed value
// is an error wrapping ErrInvalidConfig.
func ParseThrottledReplicas(s string) (all bool, pairs map[int32][]int32, err error) {
	all, pairs, _, reason := parseThrottled(s)
	if reason != "" {
		return false, nil, fmt.Errorf("config: %s: %w", reason, ErrInvalidConfig)
	}
	return all, pairs, nil
}

func parseThrottled(s string) (all bool, pairs map[int32][]int32, norm, reason string) {
	s = strings.TrimSpace(s)
	switch s {
	case "":
		return false, nil, "", ""
	case "*":
		return true, nil, "*", ""
	}
	bad := func(why string) (bool, map[int32][]int32, string, string) {
		return false, nil, "", fmt.Sprintf("%q must be the literal '*' or a list of replicas in the format [partitionId]:[brokerId],[partitionId]:[brokerId],... (%s)", s, why)
	}
	parts := strings.Split(s, ",")
	pairs = make(map[int32][]int32, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return bad("empty entry")
		}
		ps, bs, ok := strings.Cut(p, ":")
		if !ok {
			return bad(fmt.Sprintf("%q is not partitionId:brokerId", p))
		}
		part, pr := parseReplicaID(ps)
		broker, br := parseReplicaID(bs)
		if pr == "" {
			pr = br
		}
		if pr != "" {
			return bad(fmt.Sprintf("%q: %s", p, pr))
		}
		parts[i] = p
		if !containsID(pairs[part], broker) {
			pairs[part] = append(pairs[part], broker)
		}
	}
	return false, pairs, strings.Join(parts, ","), ""
}

// parseReplicaID parses a partition or broker id of a throttled replica
// list: ASCII digits only (no sign), fitting in an int32.
func parseReplicaID(s string) (int32, string) {
	if s == "" {
		return 0, "missing id"
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Sprintf("%q is not a non-negative integer", s)
		}
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, fmt.Sprintf("%q does not fit in a 32-bit integer", s)
	}
	return int32(n), ""
}

func containsID(l []int32, id int32) bool {
	for _, e := range l {
		if e == id {
			return true
		}
	}
	return false
}
