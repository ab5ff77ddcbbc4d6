package config

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestConstantsMatchKmsg(t *testing.T) {
	for _, tc := range []struct {
		got  int8
		want int8
	}{
		{SourceTopic, int8(kmsg.ConfigSourceDynamicTopicConfig)},
		{SourceDynamicBroker, int8(kmsg.ConfigSourceDynamicBrokerConfig)},
		{SourceDynamicDefaultBroker, int8(kmsg.ConfigSourceDynamicDefaultBrokerConfig)},
		{SourceStaticBroker, int8(kmsg.ConfigSourceStaticBrokerConfig)},
		{SourceDefault, int8(kmsg.ConfigSourceDefaultConfig)},
		{TypeBoolean, int8(kmsg.ConfigTypeBoolean)},
		{TypeString, int8(kmsg.ConfigTypeString)},
		{TypeInt, int8(kmsg.ConfigTypeInt)},
		{TypeShort, int8(kmsg.ConfigTypeShort)},
		{TypeLong, int8(kmsg.ConfigTypeLong)},
		{TypeDouble, int8(kmsg.ConfigTypeDouble)},
		{TypeList, int8(kmsg.ConfigTypeList)},
		{TypeClass, int8(kmsg.ConfigTypeClass)},
		{TypePassword, int8(kmsg.ConfigTypePassword)},
	} {
		if tc.got != tc.want {
			t.Errorf("constant %d, kmsg %d", tc.got, tc.want)
		}
	}
}

func entryByName(es []Entry, name string) Entry {
	for _, e := range es {
		if e.Name == name {
			return e
		}
	}
	return Entry{Name: "<missing " + name + ">"}
}

func TestDescribeTopic(t *testing.T) {
	b, err := Parse(map[string]string{"log.retention.hours": "24", "log.segment.bytes": "1000000"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetDynamic("message.max.bytes", "2000000"); err != nil {
		t.Fatal(err)
	}
	if err := b.SetDynamicDefault("log.roll.ms", "3600000"); err != nil {
		t.Fatal(err)
	}
	es := b.DescribeTopic(map[string]string{"cleanup.policy": "compact , delete", "retention.bytes": "x",
		"leader.replication.throttled.replicas": " 0:1 , 1:2"})
	if len(es) != len(topicDefList) {
		t.Fatalf("%d entries, want %d", len(es), len(topicDefList))
	}
	for i := 1; i < len(es); i++ {
		if es[i-1].Name >= es[i].Name {
			t.Fatalf("entries not sorted: %s before %s", es[i-1].Name, es[i].Name)
		}
	}
	for _, tc := range []struct {
		name   string
		value  string
		source int8
		typ    int8
		syns   []Synonym
	}{
		{"cleanup.policy", "compact,delete", SourceTopic, TypeList, []Synonym{
			{"cleanup.policy", "compact,delete", SourceTopic},
			{"log.cleanup.policy", "delete", SourceDefault},
		}},
		{"retention.bytes", "x", SourceTopic, TypeLong, []Synonym{
			{"retention.bytes", "x", SourceTopic},
			{"log.retention.bytes", "-1", SourceDefault},
		}},
		{"retention.ms", "86400000", SourceStaticBroker, TypeLong, []Synonym{
			{"log.retention.hours", "24", SourceStaticBroker},
			{"log.retention.hours", "168", SourceDefault},
		}},
		{"segment.bytes", "1000000", SourceStaticBroker, TypeInt, []Synonym{
			{"log.segment.bytes", "1000000", SourceStaticBroker},
			{"log.segment.bytes", "1073741824", SourceDefault},
		}},
		{"max.message.bytes", "2000000", SourceDynamicBroker, TypeInt, []Synonym{
			{"message.max.bytes", "2000000", SourceDynamicBroker},
			{"message.max.bytes", "1048588", SourceDefault},
		}},
		{"segment.ms", "3600000", SourceDynamicDefaultBroker, TypeLong, []Synonym{
			{"log.roll.ms", "3600000", SourceDynamicDefaultBroker},
			{"log.roll.hours", "168", SourceDefault},
		}},
		{"flush.ms", "9223372036854775807", SourceDefault, TypeLong, []Synonym{
			{"log.flush.scheduler.interval.ms", "9223372036854775807", SourceDefault},
		}},
		{"min.cleanable.dirty.ratio", "0.5", SourceDefault, TypeDouble, []Synonym{
			{"log.cleaner.min.cleanable.ratio", "0.5", SourceDefault},
		}},
		{"preallocate", "false", SourceDefault, TypeBoolean, []Synonym{
			{"log.preallocate", "false", SourceDefault},
		}},
		{"message.timestamp.type", "CreateTime", SourceDefault, TypeString, []Synonym{
			{"log.message.timestamp.type", "CreateTime", SourceDefault},
		}},
		// Topic-only keys: no broker synonym.
		{"leader.replication.throttled.replicas", "0:1,1:2", SourceTopic, TypeList, []Synonym{
			{"leader.replication.throttled.replicas", "0:1,1:2", SourceTopic},
		}},
		{"follower.replication.throttled.replicas", "", SourceDefault, TypeList, nil},
	} {
		e := entryByName(es, tc.name)
		if e.Value != tc.value || e.Source != tc.source || e.Type != tc.typ || !reflect.DeepEqual(e.Synonyms, tc.syns) {
			t.Errorf("%s: got value %q source %d type %d synonyms %+v\nwant value %q source %d type %d synonyms %+v",
				tc.name, e.Value, e.Source, e.Type, e.Synonyms, tc.value, tc.source, tc.typ, tc.syns)
		}
		if e.ReadOnly || e.Sensitive || e.Null || e.Doc == "" {
			t.Errorf("%s: flags %+v", tc.name, e)
		}
	}
}

func TestDescribeBroker(t *testing.T) {
	b, err := Parse(map[string]string{"log.retention.hours": "24", "num.partitions": "3"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetDynamic("log.retention.ms", "5000"); err != nil {
		t.Fatal(err)
	}
	es := b.DescribeBroker()
	if len(es) != len(brokerDefList) {
		t.Fatalf("%d entries, want %d", len(es), len(brokerDefList))
	}
	for _, tc := range []struct {
		name     string
		value    string
		null     bool
		source   int8
		typ      int8
		readOnly bool
		syns     []Synonym
	}{
		{"num.partitions", "3", false, SourceStaticBroker, TypeInt, true, []Synonym{
			{"num.partitions", "3", SourceStaticBroker},
			{"num.partitions", "1", SourceDefault},
		}},
		{"log.retention.ms", "5000", false, SourceDynamicBroker, TypeLong, false, []Synonym{
			{"log.retention.ms", "5000", SourceDynamicBroker},
			{"log.retention.hours", "24", SourceStaticBroker},
			{"log.retention.hours", "168", SourceDefault},
		}},
		{"log.retention.hours", "24", false, SourceStaticBroker, TypeInt, false, []Synonym{
			{"log.retention.hours", "24", SourceStaticBroker},
			{"log.retention.hours", "168", SourceDefault},
		}},
		{"log.retention.minutes", "", true, SourceDefault, TypeInt, false, nil},
		{"broker.rack", "", true, SourceDefault, TypeString, true, nil},
		{"log.segment.bytes", "1073741824", false, SourceDefault, TypeInt, false, []Synonym{
			{"log.segment.bytes", "1073741824", SourceDefault},
		}},
		{"advertised.listeners", "PLAINTEXT://127.0.0.1:9092", false, SourceDefault, TypeList, true, nil},
		{"offsets.topic.replication.factor", "1", false, SourceDefault, TypeShort, true, []Synonym{
			{"offsets.topic.replication.factor", "1", SourceDefault},
		}},
		{"auto.create.topics.enable", "true", false, SourceDefault, TypeBoolean, true, []Synonym{
			{"auto.create.topics.enable", "true", SourceDefault},
		}},
		{"leader.replication.throttled.rate", "9223372036854775807", false, SourceDefault, TypeLong, false, []Synonym{
			{"leader.replication.throttled.rate", "9223372036854775807", SourceDefault},
		}},
	} {
		e := entryByName(es, tc.name)
		if e.Value != tc.value || e.Null != tc.null || e.Source != tc.source || e.Type != tc.typ ||
			e.ReadOnly != tc.readOnly || !reflect.DeepEqual(e.Synonyms, tc.syns) {
			t.Errorf("%s: got %+v\nwant value %q null %v source %d type %d readOnly %v synonyms %+v",
				tc.name, e, tc.value, tc.null, tc.source, tc.typ, tc.readOnly, tc.syns)
		}
	}
}
