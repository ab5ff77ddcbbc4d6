package config

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Group configs: the overrides one consumer or share group may have (config resource type
// GROUP, 32; Kafka's GroupConfig, KIP-848 and KIP-932), set with IncrementalAlterConfigs or
// AlterConfigs and kept in the metadata log like topic overrides. A key not overridden takes
// the broker's value of its group.* synonym. Only keys Gregor's coordinators act on are
// defined; Kafka's others (streams.*, the dead-letter queue keys, and share keys of newer
// Kafka versions such as share.delivery.count.limit) are refused as unknown rather than
// accepted and ignored.

// SourceGroup is GROUP_CONFIG (8, DYNAMIC_GROUP_CONFIG in the Admin client): a group override.
const SourceGroup int8 = 8

// Group config keys.
const (
	GroupConsumerSessionTimeoutMs    = "consumer.session.timeout.ms"
	GroupConsumerHeartbeatIntervalMs = "consumer.heartbeat.interval.ms"
	GroupShareSessionTimeoutMs       = "share.session.timeout.ms"
	GroupShareHeartbeatIntervalMs    = "share.heartbeat.interval.ms"
	GroupShareRecordLockDurationMs   = "share.record.lock.duration.ms"
	GroupShareAutoOffsetReset        = "share.auto.offset.reset"
	GroupShareIsolationLevel         = "share.isolation.level"
)

// groupDef describes one group key: its broker synonym (the default; "" for none), the
// least value its type allows (Kafka's ConfigDef atLeast) and the broker's bounds of
// overrides (group.*.min/max.*), read from the broker's current configuration.
type groupDef struct {
	name    string
	synonym string
	typ     int8
	least   int64
	bounds  func(b *Broker) (lo, hi int32)
	value   func(b *Broker) string // the broker's value (the default of an unset key)
	doc     string
}

var groupDefList = []*groupDef{
	{name: GroupConsumerSessionTimeoutMs, synonym: "group.consumer.session.timeout.ms", typ: TypeInt, least: 1,
		bounds: func(b *Broker) (int32, int32) {
			return b.GroupConsumerMinSessionTimeoutMs, b.GroupConsumerMaxSessionTimeoutMs
		},
		value: func(b *Broker) string { return itoa(b.GroupConsumerSessionTimeoutMs) },
		doc:   "Session timeout of the group's consumer-protocol (KIP-848) members."},
	{name: GroupConsumerHeartbeatIntervalMs, synonym: "group.consumer.heartbeat.interval.ms", typ: TypeInt, least: 1,
		bounds: func(b *Broker) (int32, int32) {
			return b.GroupConsumerMinHeartbeatIntervalMs, b.GroupConsumerMaxHeartbeatIntervalMs
		},
		value: func(b *Broker) string { return itoa(b.GroupConsumerHeartbeatIntervalMs) },
		doc:   "Heartbeat interval told to the group's consumer-protocol members."},
	{name: GroupShareSessionTimeoutMs, synonym: "group.share.session.timeout.ms", typ: TypeInt, least: 1,
		bounds: func(b *Broker) (int32, int32) {
			return b.GroupShareMinSessionTimeoutMs, b.GroupShareMaxSessionTimeoutMs
		},
		value: func(b *Broker) string { return itoa(b.GroupShareSessionTimeoutMs) },
		doc:   "Session timeout of the share group's members."},
	{name: GroupShareHeartbeatIntervalMs, synonym: "group.share.heartbeat.interval.ms", typ: TypeInt, least: 1,
		bounds: func(b *Broker) (int32, int32) {
			return b.GroupShareMinHeartbeatIntervalMs, b.GroupShareMaxHeartbeatIntervalMs
		},
		value: func(b *Broker) string { return itoa(b.GroupShareHeartbeatIntervalMs) },
		doc:   "Heartbeat interval told to the share group's members."},
	{name: GroupShareRecordLockDurationMs, synonym: "group.share.record.lock.duration.ms", typ: TypeInt, least: 1000,
		bounds: func(b *Broker) (int32, int32) {
			return b.GroupShareMinRecordLockDurationMs, b.GroupShareMaxRecordLockDurationMs
		},
		value: func(b *Broker) string { return itoa(b.GroupShareRecordLockDurationMs) },
		doc:   "How long a member of the share group holds the records it acquired."},
	{name: GroupShareAutoOffsetReset, typ: TypeString,
		value: func(*Broker) string { return "latest" },
		doc: "Where a share-partition of the group starts when it is first read: latest (the log end), " +
			"earliest (the log start) or by_duration:<ISO-8601 duration> (the first record at most that long ago)."},
	{name: GroupShareIsolationLevel, typ: TypeString,
		value: func(*Broker) string { return "read_uncommitted" },
		doc: "read_committed: the share group is delivered records up to the last stable offset only, and never " +
			"those of aborted transactions (they are archived); read_uncommitted: every record up to the high watermark."},
}

var groupDefs = func() map[string]*groupDef {
	m := map[string]*groupDef{}
	for _, d := range groupDefList {
		m[d.name] = d
	}
	return m
}()

func itoa(n int32) string { return strconv.FormatInt(int64(n), 10) }

// GroupConfigNames returns the group config keys, sorted.
func GroupConfigNames() []string {
	out := make([]string, 0, len(groupDefList))
	for _, d := range groupDefList {
		out = append(out, d.name)
	}
	sort.Strings(out)
	return out
}

// ValidateGroupConfigs checks a group's whole set of overrides m, as Kafka's GroupConfig
// validates them against the broker's group coordinator settings: every key known, every
// value of its type, each integer within the broker's group.*.min/max bounds, and a session
// timeout greater than its heartbeat interval (an unset one of the pair taking the broker's
// value). The error is an *Error (INVALID_CONFIG), worded as Kafka words it.
func (b *Broker) ValidateGroupConfigs(m map[string]string) error {
	c := b.Current()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the first bad key in name order is reported
	for _, k := range keys {
		d := groupDefs[k]
		if d == nil {
			return &Error{Key: k, Value: m[k], Reason: "Unknown group config name: " + k, Err: ErrInvalidConfig}
		}
		if _, err := c.groupValue(d, m[k]); err != nil {
			return err
		}
	}
	for _, pair := range [][2]string{
		{GroupConsumerSessionTimeoutMs, GroupConsumerHeartbeatIntervalMs},
		{GroupShareSessionTimeoutMs, GroupShareHeartbeatIntervalMs},
	} {
		_, hasS := m[pair[0]]
		_, hasH := m[pair[1]]
		if !hasS && !hasH {
			continue
		}
		s, _ := strconv.ParseInt(c.GroupValue(m, pair[0]), 10, 64)
		h, _ := strconv.ParseInt(c.GroupValue(m, pair[1]), 10, 64)
		if s <= h {
			return &Error{Key: pair[0], Value: m[pair[0]], Reason: pair[0] + " must be greater than " + pair[1], Err: ErrInvalidConfig}
		}
	}
	return nil
}

// groupValue parses value of key d and checks it; it returns the normalized text.
func (b *Broker) groupValue(d *groupDef, value string) (string, error) {
	value = strings.TrimSpace(value)
	bad := func(reason string) error {
		return &Error{Key: d.name, Value: value, Reason: reason, Err: ErrInvalidConfig}
	}
	switch d.typ {
	case TypeInt:
		n, err := strconv.ParseInt(value, 10, 32)
		if err != nil {
			return "", bad(fmt.Sprintf("Invalid value %s for configuration %s: Not a number of type INT", value, d.name))
		}
		if n < d.least {
			return "", bad(fmt.Sprintf("Invalid value %d for configuration %s: Value must be at least %d", n, d.name, d.least))
		}
		if d.bounds != nil {
			lo, hi := d.bounds(b)
			if n < int64(lo) || n > int64(hi) {
				return "", bad(fmt.Sprintf("%s must be in the range %d to %d inclusive.", d.name, lo, hi))
			}
		}
		return strconv.FormatInt(n, 10), nil
	}
	switch d.name {
	case GroupShareAutoOffsetReset:
		if _, err := ParseShareAutoOffsetReset(value); err != nil {
			return "", bad(fmt.Sprintf("Invalid value `%s` for configuration %s. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'.", value, d.name))
		}
	case GroupShareIsolationLevel:
		if value != "read_committed" && value != "read_uncommitted" {
			return "", bad(fmt.Sprintf("Invalid value %s for configuration %s: String must be one of: read_committed, read_uncommitted", value, d.name))
		}
	}
	return value, nil
}

// GroupValue is the effective value of group key for a group with overrides m ("" for an
// unknown key): its override, else the broker's value of its synonym. An integer override
// the broker's bounds have since moved past (a changed group.*.min/max) is clamped into
// them, as Kafka's GroupConfig evaluates it; an unreadable override counts as unset.
func (b *Broker) GroupValue(m map[string]string, key string) string {
	d := groupDefs[key]
	if d == nil {
		return ""
	}
	c := b.Current()
	if raw, ok := m[key]; ok {
		if d.typ == TypeInt {
			if n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 32); err == nil {
				if d.bounds != nil {
					lo, hi := d.bounds(c)
					n = min(max(n, int64(lo)), int64(hi))
				}
				return strconv.FormatInt(max(n, d.least), 10)
			}
		} else if v, err := c.groupValue(d, raw); err == nil {
			return v
		}
	}
	return d.value(c)
}

// GroupInt is GroupValue of an integer key, as an int32.
func (b *Broker) GroupInt(m map[string]string, key string) int32 {
	n, _ := strconv.ParseInt(b.GroupValue(m, key), 10, 32)
	return int32(n)
}

// DescribeGroup describes every group key for a group with overrides m, sorted by name: an
// overridden key with Source GROUP_CONFIG, the others with the broker's value of their
// synonym and its source (DEFAULT_CONFIG when the broker does not set it, or for a key
// without synonym). Synonyms: the override, then the broker synonym's configured values.
func (b *Broker) DescribeGroup(m map[string]string) []Entry {
	c := b.Current()
	out := make([]Entry, 0, len(groupDefList))
	for _, d := range groupDefList {
		e := Entry{Name: d.name, Type: d.typ, Doc: d.doc, Source: SourceDefault, Value: c.GroupValue(m, d.name)}
		var syns []Synonym
		if d.synonym != "" {
			syns = c.synonymChain([]string{d.synonym})
		}
		if raw, ok := m[d.name]; ok {
			syns = append([]Synonym{{Name: d.name, Value: raw, Source: SourceGroup}}, syns...)
			e.Value = raw
		}
		if len(syns) > 0 {
			e.Source = syns[0].Source
		}
		e.Synonyms = syns
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ShareAutoOffsetReset is a parsed share.auto.offset.reset.
type ShareAutoOffsetReset struct {
	Earliest bool
	// Duration, when positive or ByDuration: start at the first record whose timestamp is
	// at least now - Duration.
	ByDuration bool
	Duration   time.Duration
}

// ParseShareAutoOffsetReset parses "latest", "earliest" or "by_duration:<ISO-8601 duration>"
// (Java's Duration syntax, PnDTnHnMn.nS, not negative), case as Kafka spells them.
func ParseShareAutoOffsetReset(s string) (ShareAutoOffsetReset, error) {
	switch s {
	case "latest":
		return ShareAutoOffsetReset{}, nil
	case "earliest":
		return ShareAutoOffsetReset{Earliest: true}, nil
	}
	rest, ok := strings.CutPrefix(s, "by_duration:")
	if !ok {
		return ShareAutoOffsetReset{}, fmt.Errorf("unknown auto offset reset strategy %q", s)
	}
	d, err := ParseISODuration(rest)
	if err != nil {
		return ShareAutoOffsetReset{}, err
	}
	if d < 0 {
		return ShareAutoOffsetReset{}, fmt.Errorf("negative duration %q", rest)
	}
	return ShareAutoOffsetReset{ByDuration: true, Duration: d}, nil
}

// isoDuration is Java's Duration.parse syntax: an optional sign, P, days, then T with hours,
// minutes and seconds (with up to nine fraction digits), each signed; at least one part.
var isoDuration = regexp.MustCompile(`(?i)^([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?$`)

// ParseISODuration parses an ISO-8601 duration as Java's Duration.parse does (PT1H, P2D,
// PT0.5S, -PT10M).
func ParseISODuration(s string) (time.Duration, error) {
	g := isoDuration.FindStringSubmatch(s)
	if g == nil || (g[2] == "" && g[3] == "") || strings.EqualFold(g[3], "T") {
		return 0, fmt.Errorf("%q is not an ISO-8601 duration", s)
	}
	var total time.Duration
	add := func(num string, unit time.Duration) error {
		if num == "" {
			return nil
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > int64(1<<63-1)/int64(unit) || n < -int64(1<<63-1)/int64(unit) {
			return fmt.Errorf("%q is out of range", s)
		}
		total += time.Duration(n) * unit
		return nil
	}
	for _, p := range []struct {
		num  string
		unit time.Duration
	}{{g[2], 24 * time.Hour}, {g[4], time.Hour}, {g[5], time.Minute}, {g[6], time.Second}} {
		if err := add(p.num, p.unit); err != nil {
			return 0, err
		}
	}
	if frac := g[7]; frac != "" {
		ns, _ := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
		if strings.HasPrefix(g[6], "-") {
			ns = -ns
		}
		total += time.Duration(ns)
	}
	if g[1] == "-" {
		total = -total
	}
	return total, nil
}
