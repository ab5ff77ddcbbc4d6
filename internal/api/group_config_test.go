package api_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Group configs (config resource type GROUP, 32) over TCP with raw requests: set, refused,
// described and deleted as Kafka's GroupConfig does, and acted on by the coordinators.

// groupConfigBroker lowers the share and consumer session bounds so a session timeout can
// expire within a test, and sets one group.* key statically to see its source.
var groupConfigBroker = append(slices.Clone(shareBroker),
	"group.share.min.session.timeout.ms=1000", "group.share.min.heartbeat.interval.ms=500",
	"group.consumer.min.session.timeout.ms=1000", "group.consumer.min.heartbeat.interval.ms=500",
	"group.share.max.record.lock.duration.ms=60000",
)

// incAlterGroup sets (value non-nil) or deletes (nil) group keys with IncrementalAlterConfigs
// and returns the resource's error code and message.
func incAlterGroup(t *testing.T, cl *kgo.Client, group string, kv map[string]*string) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for k, v := range kv {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = k, v, kmsg.IncrementalAlterConfigOpSet
		if v == nil {
			c.Op = kmsg.IncrementalAlterConfigOpDelete
		}
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp := request[*kmsg.IncrementalAlterConfigsResponse](t, cl, req)
	r := resp.Resources[0]
	msg := ""
	if r.ErrorMessage != nil {
		msg = *r.ErrorMessage
	}
	return r.ErrorCode, msg
}

// describeGroupConfigs describes group's configs, with synonyms, by name.
func describeGroupConfigs(t *testing.T, cl *kgo.Client, group string) (int16, map[string]kmsg.DescribeConfigsResponseResourceConfig) {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	req.Resources, req.IncludeSynonyms = append(req.Resources, res), true
	resp := request[*kmsg.DescribeConfigsResponse](t, cl, req)
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = c
	}
	return resp.Resources[0].ErrorCode, out
}

func TestGroupConfigsAlterDescribeValidate(t *testing.T) {
	b := testutil.StartBroker(t, groupConfigBroker...)
	cl := newClient(t, b.Addr())

	// Refusals, each with Kafka's code; nothing of a refused change is stored.
	for _, tc := range []struct {
		group, key, value string
		code              int16
		msg               string
	}{
		{"g", "no.such.key", "1", kerr.InvalidConfig.Code, "Unknown group config name: no.such.key"},
		{"g", "streams.session.timeout.ms", "50000", kerr.InvalidConfig.Code, "Unknown group config name"},
		{"g", "share.delivery.count.limit", "3", kerr.InvalidConfig.Code, "Unknown group config name"},
		{"g", "share.isolation.level", "READ_COMMITTED", kerr.InvalidConfig.Code, "String must be one of: read_committed, read_uncommitted"},
		{"g", "share.record.lock.duration.ms", "90000", kerr.InvalidConfig.Code, "share.record.lock.duration.ms must be in the range 1000 to 60000 inclusive."},
		{"g", "share.session.timeout.ms", "999999", kerr.InvalidConfig.Code, "must be in the range 1000 to 60000 inclusive."},
		{"g", "consumer.heartbeat.interval.ms", "100", kerr.InvalidConfig.Code, "must be in the range 500 to 15000 inclusive."},
		{"g", "share.session.timeout.ms", "ten", kerr.InvalidConfig.Code, "Not a number of type INT"},
		{"g", "share.record.lock.duration.ms", "500", kerr.InvalidConfig.Code, "Value must be at least 1000"},
		{"g", "share.auto.offset.reset", "oldest", kerr.InvalidConfig.Code, "The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'."},
		{"g", "share.auto.offset.reset", "by_duration:1h", kerr.InvalidConfig.Code, "by_duration"},
		{"g", "share.auto.offset.reset", "by_duration:-PT1H", kerr.InvalidConfig.Code, "by_duration"},
		{"g", "share.auto.offset.reset", "by_duration", kerr.InvalidConfig.Code, "by_duration"},
		{"g", "share.auto.offset.reset", "EARLIEST", kerr.InvalidConfig.Code, "earliest"},
		{"g", "share.session.timeout.ms", "1000", kerr.InvalidConfig.Code, "share.session.timeout.ms must be greater than share.heartbeat.interval.ms"},
		{"", "share.auto.offset.reset", "earliest", kerr.InvalidRequest.Code, "Default group resources are not allowed."},
	} {
		code, msg := incAlterGroup(t, cl, tc.group, map[string]*string{tc.key: &tc.value})
		if code != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s=%s on %q: %v %q, want %v containing %q", tc.key, tc.value, tc.group, kerr.ErrorForCode(code), msg, kerr.ErrorForCode(tc.code), tc.msg)
		}
	}
	// APPEND and SUBTRACT: no group key is a list.
	app := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ar := kmsg.NewIncrementalAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
	ar.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "share.auto.offset.reset", Op: kmsg.IncrementalAlterConfigOpAppend, Value: sp("earliest")}}
	app.Resources = append(app.Resources, ar)
	if r := request[*kmsg.IncrementalAlterConfigsResponse](t, cl, app).Resources[0]; r.ErrorCode != kerr.InvalidConfig.Code ||
		r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "Can't APPEND to key share.auto.offset.reset because its type is not LIST.") {
		t.Errorf("APPEND to a group key: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	code, cfgs := describeGroupConfigs(t, cl, "g")
	if code != 0 {
		t.Fatalf("describe: %v", kerr.ErrorForCode(code))
	}
	want := map[string]string{
		"consumer.session.timeout.ms": "45000", "consumer.heartbeat.interval.ms": "5000",
		"share.session.timeout.ms": "45000", "share.heartbeat.interval.ms": "5000",
		"share.record.lock.duration.ms": "1000", "share.auto.offset.reset": "latest",
		"share.isolation.level": "read_uncommitted",
	}
	if len(cfgs) != len(want) {
		t.Fatalf("described %d keys, want %d: %v", len(cfgs), len(want), cfgs)
	}
	for k, v := range want {
		c := cfgs[k]
		if c.Value == nil || *c.Value != v || c.Source == kmsg.ConfigSourceGroupConfig {
			t.Errorf("%s before any change: %v source %v, want the broker's %s", k, c.Value, c.Source, v)
		}
	}
	// share.record.lock.duration.ms comes from the broker's static group.share.record.lock.duration.ms.
	if c := cfgs["share.record.lock.duration.ms"]; c.Source != kmsg.ConfigSourceStaticBrokerConfig ||
		len(c.ConfigSynonyms) == 0 || c.ConfigSynonyms[0].Name != "group.share.record.lock.duration.ms" {
		t.Errorf("share.record.lock.duration.ms: source %v synonyms %+v, want the static group.share.record.lock.duration.ms", c.Source, c.ConfigSynonyms)
	}
	if c := cfgs["share.auto.offset.reset"]; c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("share.auto.offset.reset: source %v, want DEFAULT_CONFIG", c.Source)
	}

	// Set two keys (the group need not exist), then see them as GROUP_CONFIG.
	if code, msg := incAlterGroup(t, cl, "g", map[string]*string{
		"share.auto.offset.reset": sp("by_duration:P1DT2H30M"), "share.record.lock.duration.ms": sp("20000"),
	}); code != 0 {
		t.Fatalf("set: %v %s", kerr.ErrorForCode(code), msg)
	}
	_, cfgs = describeGroupConfigs(t, cl, "g")
	for k, v := range map[string]string{"share.auto.offset.reset": "by_duration:P1DT2H30M", "share.record.lock.duration.ms": "20000"} {
		c := cfgs[k]
		if c.Value == nil || *c.Value != v || c.Source != kmsg.ConfigSourceGroupConfig ||
			len(c.ConfigSynonyms) == 0 || c.ConfigSynonyms[0].Source != kmsg.ConfigSourceGroupConfig {
			t.Errorf("%s after set: %v source %v synonyms %+v, want %s from GROUP_CONFIG", k, c.Value, c.Source, c.ConfigSynonyms, v)
		}
	}
	// Another group is untouched.
	if _, other := describeGroupConfigs(t, cl, "other"); *other["share.auto.offset.reset"].Value != "latest" {
		t.Errorf("another group's share.auto.offset.reset: %s", *other["share.auto.offset.reset"].Value)
	}

	// Legacy AlterConfigs replaces every override of the group (Kafka's forwarding broker
	// accepts GROUP resources there too).
	legacy := kmsg.NewPtrAlterConfigsRequest()
	lr := kmsg.NewAlterConfigsRequestResource()
	lr.ResourceType, lr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
	lr.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "share.auto.offset.reset", Value: sp("earliest")}}
	legacy.Resources = append(legacy.Resources, lr)
	if r := request[*kmsg.AlterConfigsResponse](t, cl, legacy).Resources[0]; r.ErrorCode != 0 {
		t.Fatalf("legacy AlterConfigs: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	_, cfgs = describeGroupConfigs(t, cl, "g")
	if c := cfgs["share.auto.offset.reset"]; *c.Value != "earliest" || c.Source != kmsg.ConfigSourceGroupConfig {
		t.Errorf("after legacy alter, share.auto.offset.reset %s source %v", *c.Value, c.Source)
	}
	if c := cfgs["share.record.lock.duration.ms"]; *c.Value != "1000" || c.Source == kmsg.ConfigSourceGroupConfig {
		t.Errorf("after legacy alter, share.record.lock.duration.ms %s source %v: the override should be gone", *c.Value, c.Source)
	}

	// DELETE returns a key to the broker's value.
	if code, msg := incAlterGroup(t, cl, "g", map[string]*string{"share.auto.offset.reset": nil}); code != 0 {
		t.Fatalf("delete: %v %s", kerr.ErrorForCode(code), msg)
	}
	_, cfgs = describeGroupConfigs(t, cl, "g")
	if c := cfgs["share.auto.offset.reset"]; *c.Value != "latest" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("after delete, share.auto.offset.reset %s source %v", *c.Value, c.Source)
	}
	if code, _ := describeGroupConfigs(t, cl, ""); code != kerr.InvalidRequest.Code {
		t.Errorf("describe of the empty group name: %v, want INVALID_REQUEST", kerr.ErrorForCode(code))
	}
}

// shareJoinFetch joins group as a new member of topic's partition 0 and returns the offsets
// its first fetches acquire (waiting up to waitMs each, until a fetch returns nothing).
func shareJoinFetch(t *testing.T, addr, group, topic string, waitMs int32) []int64 {
	t.Helper()
	c := joinShare(t, addr, group, topic, group+"-m")
	var offs []int64
	for {
		got, _ := c.fetch(nil, 100, waitMs)
		if len(got) == 0 {
			return offs
		}
		for _, r := range got {
			offs = append(offs, r.off)
		}
	}
}

// share.auto.offset.reset decides where a new share group starts on a partition that
// already holds records: latest (the default) skips them, earliest reads them all,
// by_duration only those recent enough.
func TestShareAutoOffsetReset(t *testing.T) {
	b := testutil.StartBroker(t, groupConfigBroker...)
	cl := newClient(t, b.Addr())
	createTopic(t, b.Addr(), "orders", 1, nil)
	p := newClient(t, b.Addr(), kgo.DefaultProduceTopic("orders"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	old := time.Now().Add(-3 * time.Hour)
	for i := range 3 { // offsets 0-2, three hours old
		produceSync(t, p, &kgo.Record{Value: []byte(fmt.Sprint(i)), Timestamp: old})
	}
	for i := 3; i < 5; i++ { // offsets 3-4, new
		produceSync(t, p, kgo.StringRecord(fmt.Sprint(i)))
	}

	if code, msg := incAlterGroup(t, cl, "from-start", map[string]*string{"share.auto.offset.reset": sp("earliest")}); code != 0 {
		t.Fatalf("set earliest: %v %s", kerr.ErrorForCode(code), msg)
	}
	if code, msg := incAlterGroup(t, cl, "last-hour", map[string]*string{"share.auto.offset.reset": sp("by_duration:PT1H")}); code != 0 {
		t.Fatalf("set by_duration: %v %s", kerr.ErrorForCode(code), msg)
	}
	if got := shareJoinFetch(t, b.Addr(), "from-start", "orders", 200); !slices.Equal(got, []int64{0, 1, 2, 3, 4}) {
		t.Errorf("earliest: acquired %v, want 0-4", got)
	}
	if got := shareJoinFetch(t, b.Addr(), "last-hour", "orders", 200); !slices.Equal(got, []int64{3, 4}) {
		t.Errorf("by_duration:PT1H: acquired %v, want 3-4", got)
	}
	if got := shareJoinFetch(t, b.Addr(), "default", "orders", 200); len(got) != 0 {
		t.Errorf("latest (default): acquired %v, want nothing produced before the group started", got)
	}
	// The setting is read when a share-partition is initialized: changing it afterwards
	// does not move the one "default" already has.
	if code, msg := incAlterGroup(t, cl, "default", map[string]*string{"share.auto.offset.reset": sp("earliest")}); code != 0 {
		t.Fatalf("set earliest on default: %v %s", kerr.ErrorForCode(code), msg)
	}
	produceSync(t, p, kgo.StringRecord("5"))
	c := joinShare(t, b.Addr(), "default", "orders", "default-m2")
	got, _ := c.fetch(nil, 100, 2000)
	if len(got) != 1 || got[0].off != 5 {
		t.Errorf("default after the change: acquired %v, want only offset 5", got)
	}
}

// The share and consumer group keys are acted on: the lock duration a share fetch grants,
// the heartbeat intervals the coordinators tell members, and the session timeouts after
// which silent members are removed.
func TestGroupConfigsHonoured(t *testing.T) {
	b := testutil.StartBroker(t, groupConfigBroker...)
	cl := newClient(t, b.Addr())
	createTopic(t, b.Addr(), "jobs", 1, nil)
	if code, msg := incAlterGroup(t, cl, "sg", map[string]*string{
		"share.record.lock.duration.ms": sp("7000"), "share.heartbeat.interval.ms": sp("600"),
		"share.session.timeout.ms": sp("1500"),
	}); code != 0 {
		t.Fatalf("set share keys: %v %s", kerr.ErrorForCode(code), msg)
	}
	if code, msg := incAlterGroup(t, cl, "cg", map[string]*string{
		"consumer.heartbeat.interval.ms": sp("700"), "consumer.session.timeout.ms": sp("1500"),
	}); code != 0 {
		t.Fatalf("set consumer keys: %v %s", kerr.ErrorForCode(code), msg)
	}

	// Share group: heartbeat interval, lock duration, session timeout.
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version, hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = 1, "sg", "sg-member", []string{"jobs"}
	hbResp := request[*kmsg.ShareGroupHeartbeatResponse](t, cl, hb)
	if hbResp.ErrorCode != 0 || hbResp.HeartbeatIntervalMillis != 600 {
		t.Fatalf("share heartbeat: %v interval %d, want 600", kerr.ErrorForCode(hbResp.ErrorCode), hbResp.HeartbeatIntervalMillis)
	}
	c := &shareConsumer{t: t, b: cl.SeedBrokers()[0], group: "sg", id: "sg-member", topicID: hbResp.Assignment.TopicPartitions[0].TopicID}
	f := kmsg.NewPtrShareFetchRequest()
	f.Version, f.GroupID, f.MemberID, f.MaxRecords = 1, &c.group, &c.id, 10
	f.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: c.topicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}}}
	if fr := request[*kmsg.ShareFetchResponse](t, cl, f); fr.ErrorCode != 0 || fr.AcquisitionLockTimeoutMillis != 7000 {
		t.Fatalf("share fetch: %v lock %d ms, want 7000", kerr.ErrorForCode(fr.ErrorCode), fr.AcquisitionLockTimeoutMillis)
	}
	groupWait(t, 20*time.Second, "the silent share member removed after share.session.timeout.ms", func() (bool, string) {
		d := kmsg.NewPtrShareGroupDescribeRequest()
		d.GroupIDs = []string{"sg"}
		r := request[*kmsg.ShareGroupDescribeResponse](t, cl, d)
		return len(r.Groups) == 1 && len(r.Groups[0].Members) == 0, fmt.Sprintf("%+v", r.Groups)
	})

	// Consumer group (KIP-848): heartbeat interval and session timeout.
	chb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	chb.Group, chb.MemberID, chb.RebalanceTimeoutMillis, chb.SubscribedTopicNames = "cg", "cg-member", 5000, []string{"jobs"}
	chb.ServerAssignor, chb.Topics = sp("uniform"), []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	cr := request[*kmsg.ConsumerGroupHeartbeatResponse](t, cl, chb)
	if cr.ErrorCode != 0 || cr.HeartbeatIntervalMillis != 700 {
		t.Fatalf("consumer heartbeat: %v interval %d, want 700", kerr.ErrorForCode(cr.ErrorCode), cr.HeartbeatIntervalMillis)
	}
	groupWait(t, 20*time.Second, "the silent consumer group member removed after consumer.session.timeout.ms", func() (bool, string) {
		d := kmsg.NewPtrConsumerGroupDescribeRequest()
		d.Groups = []string{"cg"}
		r := request[*kmsg.ConsumerGroupDescribeResponse](t, cl, d)
		return len(r.Groups) == 1 && r.Groups[0].ErrorCode == 0 && len(r.Groups[0].Members) == 0, fmt.Sprintf("%+v", r.Groups)
	})
}

// Deleting a group leaves its configs, as in Kafka, where a group's config resource lives in
// the metadata log apart from the group (and may be set before the group exists).
func TestGroupConfigsOutliveTheGroup(t *testing.T) {
	b := testutil.StartBroker(t, groupBroker...)
	cl := newClient(t, b.Addr())
	createTopic(t, b.Addr(), "t", 1, nil)
	adm := newAdmin(t, b.Addr())
	offsets := make(kadm.Offsets)
	offsets.Add(kadm.Offset{Topic: "t", Partition: 0, At: 0, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctxT(t), "kept", offsets); err != nil {
		t.Fatal(err)
	}
	if code, msg := incAlterGroup(t, cl, "kept", map[string]*string{"consumer.session.timeout.ms": sp("50000")}); code != 0 {
		t.Fatalf("set: %v %s", kerr.ErrorForCode(code), msg)
	}
	deleted, err := adm.DeleteGroups(ctxT(t), "kept")
	if err != nil || deleted["kept"].Err != nil {
		t.Fatalf("delete group: %v %v", err, deleted)
	}
	_, cfgs := describeGroupConfigs(t, cl, "kept")
	if c := cfgs["consumer.session.timeout.ms"]; *c.Value != "50000" || c.Source != kmsg.ConfigSourceGroupConfig {
		t.Errorf("after the group was deleted: consumer.session.timeout.ms %s source %v", *c.Value, c.Source)
	}
}

// share.isolation.level=read_committed: a share group is delivered records up to the last
// stable offset only and never those of an aborted transaction (archived), where a
// read_uncommitted group (the default) gets every record up to the high watermark.
func TestShareIsolationLevel(t *testing.T) {
	b := testutil.StartBroker(t, groupConfigBroker...)
	cl := newClient(t, b.Addr())
	createTopic(t, b.Addr(), "txns", 1, nil)
	for _, g := range []string{"committed", "dirty"} {
		kv := map[string]*string{"share.auto.offset.reset": sp("earliest")}
		if g == "committed" {
			kv["share.isolation.level"] = sp("read_committed")
		}
		if code, msg := incAlterGroup(t, cl, g, kv); code != 0 {
			t.Fatalf("configure %s: %v %s", g, kerr.ErrorForCode(code), msg)
		}
	}
	tx := newClient(t, b.Addr(), kgo.DefaultProduceTopic("txns"), kgo.TransactionalID("share-tx"),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	txn := func(end *kgo.TransactionEndTry, values ...string) {
		t.Helper()
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var rs []*kgo.Record
		for _, v := range values {
			rs = append(rs, kgo.StringRecord(v))
		}
		produceSync(t, tx, rs...)
		if end != nil {
			if err := tx.EndTransaction(ctxT(t), *end); err != nil {
				t.Fatal(err)
			}
		}
	}
	abort, commit := kgo.TryAbort, kgo.TryCommit
	txn(&abort, "a0", "a1")                                                                         // 0-1, abort marker 2
	txn(&commit, "c0", "c1")                                                                        // 3-4, commit marker 5
	txn(nil, "o0")                                                                                  // 6, left open
	produceSync(t, newClient(t, b.Addr(), kgo.DefaultProduceTopic("txns")), kgo.StringRecord("p0")) // 7

	acquire := func(c *shareConsumer) map[int64]bool {
		got := map[int64]bool{}
		for {
			rs, _ := c.fetch(nil, 100, 300)
			if len(rs) == 0 {
				return got
			}
			for _, r := range rs {
				got[r.off] = true
			}
		}
	}
	dirty := acquire(joinShare(t, b.Addr(), "dirty", "txns", "dirty-m"))
	for off := int64(0); off < 8; off++ {
		if !dirty[off] {
			t.Fatalf("read_uncommitted acquired %v, want every offset 0-7", dirty)
		}
	}
	cm := joinShare(t, b.Addr(), "committed", "txns", "committed-m")
	got := acquire(cm)
	if got[0] || got[1] || !got[3] || !got[4] || got[6] || got[7] {
		t.Fatalf("read_committed acquired %v, want 3-4 and none of the aborted 0-1 or of 6-7 past the open transaction", got)
	}
	if err := tx.EndTransaction(ctxT(t), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	more := acquire(cm)
	if !more[6] || !more[7] || more[0] || more[1] {
		t.Fatalf("read_committed after the commit acquired %v, want 6-7 and never the aborted 0-1", more)
	}
}
