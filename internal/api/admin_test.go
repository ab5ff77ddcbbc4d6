package api_test

import (
	"crypto/rand"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

func sp(s string) *string { return &s }

func TestCreateTopicsErrors(t *testing.T) {
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b.Addr())
	ctx := ctxT(t)
	createTopic(t, b.Addr(), "exists", 1, nil)
	cases := []struct {
		name       string
		topic      string
		partitions int32
		rf         int16
		configs    map[string]*string
		want       error
	}{
		{"already exists", "exists", 1, 1, nil, kerr.TopicAlreadyExists},
		{"bad name", "bad/name", 1, 1, nil, kerr.InvalidTopicException},
		{"dot name", "..", 1, 1, nil, kerr.InvalidTopicException},
		{"too long", string(make([]byte, 250)), 1, 1, nil, kerr.InvalidTopicException},
		{"zero partitions", "zp", 0, 1, nil, kerr.InvalidPartitions},
		{"rf above brokers", "rf", 1, 3, nil, kerr.InvalidReplicationFactor},
		{"unknown config", "uc", 1, 1, map[string]*string{"no.such.config": sp("1")}, kerr.InvalidConfig},
		{"invalid config value", "ic", 1, 1, map[string]*string{"retention.ms": sp("soon")}, kerr.InvalidConfig},
	}
	for _, c := range cases {
		_, err := adm.CreateTopic(ctx, c.partitions, c.rf, c.configs, c.topic)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	td, err := adm.ListTopics(ctx)
	if err != nil || len(td) != 1 {
		t.Fatalf("only the first topic should exist: %v %v", td.Names(), err)
	}
}

func TestCreateTopicValidateOnlyAndConfigs(t *testing.T) {
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b.Addr())
	ctx := ctxT(t)
	resp, err := adm.ValidateCreateTopics(ctx, 3, 1, map[string]*string{"retention.ms": sp("1000")}, "v")
	if err != nil || resp.Error() != nil {
		t.Fatalf("validate: %v %v", err, resp.Error())
	}
	if td, _ := adm.ListTopics(ctx, "v"); td.Has("v") && td["v"].Err == nil {
		t.Fatal("validate_only created the topic")
	}
	createTopic(t, b.Addr(), "cfg", 3, map[string]*string{"retention.ms": sp("12345"), "cleanup.policy": sp("delete")})
	rc, err := adm.DescribeTopicConfigs(ctx, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	c, err := rc.On("cfg", nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range c.Configs {
		if e.Key == "retention.ms" {
			found = true
			if e.MaybeValue() != "12345" || e.Source != kmsg.ConfigSourceDynamicTopicConfig {
				t.Fatalf("retention.ms = %q source %v", e.MaybeValue(), e.Source)
			}
		}
	}
	if !found {
		t.Fatal("retention.ms not described")
	}
}

func TestAlterConfigs(t *testing.T) {
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b.Addr())
	ctx := ctxT(t)
	createTopic(t, b.Addr(), "alt", 1, nil)
	value := func() string {
		rc, err := adm.DescribeTopicConfigs(ctx, "alt")
		if err != nil {
			t.Fatal(err)
		}
		c, _ := rc.On("alt", nil)
		for _, e := range c.Configs {
			if e.Key == "retention.ms" {
				return e.MaybeValue()
			}
		}
		return ""
	}
	r, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: sp("5000")}}, "alt")
	if err != nil || r[0].Err != nil {
		t.Fatalf("incremental set: %v %v", err, r)
	}
	if v := value(); v != "5000" {
		t.Fatalf("after set: %s", v)
	}
	r, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: sp("never")}}, "alt")
	if r[0].Err != kerr.InvalidConfig {
		t.Fatalf("invalid value: %v", r[0].Err)
	}
	r, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "retention.ms"}}, "alt")
	if r[0].Err != nil || value() != "604800000" {
		t.Fatalf("after delete: %v %s", r[0].Err, value())
	}
	// Legacy AlterConfigs replaces the whole set.
	lr, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: sp("777")}}, "alt")
	if err != nil || lr[0].Err != nil || value() != "777" {
		t.Fatalf("legacy alter: %v %v %s", err, lr, value())
	}
	// Broker resource.
	br, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: sp("999")}})
	if err != nil || br[0].Err != nil {
		t.Fatalf("broker alter: %v %v", err, br)
	}
	bc, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, e := range bc[0].Configs {
		if e.Key == "log.retention.ms" {
			got = e.MaybeValue()
		}
	}
	if got != "999" {
		t.Fatalf("log.retention.ms after dynamic set: %q", got)
	}
	b = b.Restart()
	adm = newAdmin(t, b.Addr())
	bc, _ = adm.DescribeBrokerConfigs(ctx)
	for _, e := range bc[0].Configs {
		if e.Key == "log.retention.ms" && e.MaybeValue() != "999" {
			t.Fatalf("dynamic broker config lost on restart: %q", e.MaybeValue())
		}
	}
}

func TestCreatePartitionsAndDelete(t *testing.T) {
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b.Addr())
	ctx := ctxT(t)
	createTopic(t, b.Addr(), "grow", 2, nil)
	r, err := adm.CreatePartitions(ctx, 3, "grow")
	if err != nil || r["grow"].Err != nil {
		t.Fatalf("create partitions: %v %v", err, r)
	}
	td, _ := adm.ListTopics(ctx, "grow")
	if len(td["grow"].Partitions) != 5 {
		t.Fatalf("partitions after grow: %d", len(td["grow"].Partitions))
	}
	r, _ = adm.UpdatePartitions(ctx, 4, "grow")
	if r["grow"].Err != kerr.InvalidPartitions {
		t.Fatalf("shrink: %v", r["grow"].Err)
	}
	produceSync(t, newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner())), &kgo.Record{Topic: "grow", Partition: 4, Value: []byte("x")})
	dr, err := adm.DeleteTopics(ctx, "grow")
	if err != nil || dr["grow"].Err != nil {
		t.Fatalf("delete: %v %v", err, dr)
	}
	dr, _ = adm.DeleteTopics(ctx, "grow")
	if dr["grow"].Err != kerr.UnknownTopicOrPartition {
		t.Fatalf("delete again: %v", dr["grow"].Err)
	}
	// A topic of the same name starts empty.
	createTopic(t, b.Addr(), "grow", 1, nil)
	end, _ := adm.ListEndOffsets(ctx, "grow")
	if o, _ := end.Lookup("grow", 0); o.Offset != 0 {
		t.Fatalf("recreated topic end offset %d", o.Offset)
	}
}

func TestDeleteTopicDisabled(t *testing.T) {
	b := testutil.StartBroker(t, "delete.topic.enable=false")
	createTopic(t, b.Addr(), "keep", 1, nil)
	dr, _ := newAdmin(t, b.Addr()).DeleteTopics(ctxT(t), "keep")
	if dr["keep"].Err != kerr.TopicDeletionDisabled {
		t.Fatalf("got %v", dr["keep"].Err)
	}
}

func TestDeleteRecords(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "dr", 1, nil)
	cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic("dr"))
	for i := 0; i < 10; i++ {
		produceSync(t, cl, &kgo.Record{Value: []byte{byte(i)}})
	}
	adm := newAdmin(t, b.Addr())
	ctx := ctxT(t)
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 4})
	res, err := adm.DeleteRecords(ctx, os)
	if err != nil || res.Error() != nil {
		t.Fatalf("delete records: %v %v", err, res.Error())
	}
	start, _ := adm.ListStartOffsets(ctx, "dr")
	if o, _ := start.Lookup("dr", 0); o.Offset != 4 {
		t.Fatalf("log start offset %d, want 4", o.Offset)
	}
	got := consumeN(t, b.Addr(), "dr", 6)
	if got[0].Offset != 4 {
		t.Fatalf("first record after delete: offset %d", got[0].Offset)
	}
	os = kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 50})
	res, _ = adm.DeleteRecords(ctx, os)
	if res.Error() == nil {
		t.Fatal("delete records past the high watermark succeeded")
	}
}

func TestDescribeClusterAndLogDirs(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "ld", 2, nil)
	value := make([]byte, 100)
	rand.Read(value)
	produceSync(t, newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner())), &kgo.Record{Topic: "ld", Partition: 1, Value: value})
	adm := newAdmin(t, b.Addr())
	ctx := ctxT(t)
	m, err := adm.BrokerMetadata(ctx)
	if err != nil || len(m.Brokers) != 1 || m.Controller != 1 || m.Cluster == "" {
		t.Fatalf("cluster: %+v %v", m, err)
	}
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var size int64 = -1
	dirs.Each(func(d kadm.DescribedLogDir) {
		if p, ok := d.Topics["ld"][1]; ok {
			size = p.Size
		}
	})
	if size <= 100 {
		t.Fatalf("log dir size of ld-1: %d", size)
	}
}
