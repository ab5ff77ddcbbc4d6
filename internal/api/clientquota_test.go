package api_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Client quotas over TCP with franz-go against a one-node cluster: kadm's AlterClientQuotas
// and DescribeClientQuotas, and a producer held to its producer_byte_rate by the broker's
// throttle (KIP-219) while another client on the same broker is not.

func clientID(name string) kadm.ClientQuotaEntity {
	return kadm.ClientQuotaEntity{{Type: "client-id", Name: &name}}
}

func TestClientQuotasAlterDescribe(t *testing.T) {
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b.Addr())
	ctx := ctxT(t)
	alice := "alice"
	entries := []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &alice}}, Ops: []kadm.AlterClientQuotaOp{
			{Key: "producer_byte_rate", Value: 1024}, {Key: "request_percentage", Value: 25.5},
		}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &alice}, {Type: "client-id"}}, Ops: []kadm.AlterClientQuotaOp{
			{Key: "consumer_byte_rate", Value: 4096},
		}},
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id"}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 100}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: &[]string{"10.1.2.3"}[0]}}, Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 5}}},
	}

	// validate_only answers and changes nothing.
	res, err := adm.ValidateAlterClientQuotas(ctx, entries)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("validate %v: %v %s", r.Entity, r.Err, r.ErrMessage)
		}
	}
	if d, err := adm.DescribeClientQuotas(ctx, false, nil); err != nil || len(d) != 0 {
		t.Fatalf("after validate_only: %v %v", d, err)
	}
	// No quota matching is an empty array, not null: Kafka's Java client (Admin
	// describeClientQuotas) fails on a null one without an error code.
	none, err := kmsg.NewPtrDescribeClientQuotasRequest().RequestWith(ctx, newClient(t, b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	if none.ErrorCode != 0 || none.Entries == nil {
		t.Fatalf("describe with no quota set: code %d, entries %v (want an empty array)", none.ErrorCode, none.Entries)
	}

	res, err = adm.AlterClientQuotas(ctx, entries)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("alter %v: %v %s", r.Entity, r.Err, r.ErrMessage)
		}
	}
	// Visible at once on the broker that answered.
	describe := func(strict bool, cs ...kadm.DescribeClientQuotaComponent) []string {
		t.Helper()
		d, err := adm.DescribeClientQuotas(ctx, strict, cs)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, q := range d {
			out = append(out, q.Entity.String()+" "+valuesString(q.Values))
		}
		return out
	}
	all := describe(false)
	want := []string{
		"{client-id=<default>} producer_byte_rate=100",
		"{ip=10.1.2.3} connection_creation_rate=5",
		"{user=alice} producer_byte_rate=1024 request_percentage=25.5",
		"{user=alice, client-id=<default>} consumer_byte_rate=4096",
	}
	if !sameStrings(all, want) {
		t.Fatalf("describe all:\n got %q\nwant %q", all, want)
	}
	exact := kadm.DescribeClientQuotaComponent{Type: "user", MatchName: &alice, MatchType: 0}
	if got := describe(false, exact); !sameStrings(got, want[2:]) {
		t.Fatalf("user=alice: %q", got)
	}
	if got := describe(true, exact); !sameStrings(got, want[2:3]) {
		t.Fatalf("strict user=alice: %q", got)
	}
	if got := describe(false, kadm.DescribeClientQuotaComponent{Type: "client-id", MatchType: 1}); !sameStrings(got, []string{want[0], want[3]}) {
		t.Fatalf("client-id default: %q", got)
	}
	if got := describe(true, kadm.DescribeClientQuotaComponent{Type: "client-id", MatchType: 2}); !sameStrings(got, want[:1]) {
		t.Fatalf("strict any client-id: %q", got)
	}

	// Kafka's errors: per entity on alter, for the whole request on describe.
	bad := "x"
	res, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: clientID("c"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1.5}}},
		{Entity: clientID("c2"), Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 1}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "group", Name: &bad}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &alice}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantErrs := []string{
		"producer_byte_rate cannot be a fractional value.",
		"Invalid configuration key connection_creation_rate",
		"Unhandled client quota entity type: group",
		"",
	}
	for i, r := range res {
		if wantErrs[i] == "" {
			if r.Err != nil {
				t.Errorf("entry %d: %v", i, r.Err)
			}
			continue
		}
		if !errors.Is(r.Err, kerr.InvalidRequest) || r.ErrMessage != wantErrs[i] {
			t.Errorf("entry %d: %v %q, want INVALID_REQUEST %q", i, r.Err, r.ErrMessage, wantErrs[i])
		}
	}
	if got := describe(true, exact); !sameStrings(got, []string{"{user=alice} request_percentage=25.5"}) {
		t.Fatalf("after removing a key: %q", got)
	}
	_, err = adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 0}})
	var em *kadm.ErrAndMessage
	if !errors.As(err, &em) || !errors.Is(em.Err, kerr.InvalidRequest) || em.ErrMessage != "Request specified MATCH_TYPE_EXACT, but set match string to null." {
		t.Fatalf("exact match without a name: %v", err)
	}
	_, err = adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "ip", MatchType: 2}, {Type: "user", MatchType: 2}})
	if !errors.As(err, &em) || !errors.Is(em.Err, kerr.InvalidRequest) {
		t.Fatalf("ip with user: %v", err)
	}
}

func valuesString(vs kadm.ClientQuotaValues) string {
	s := ""
	for i, v := range vs {
		if i > 0 {
			s += " "
		}
		s += v.Key + "=" + strconv.FormatFloat(v.Value, 'f', -1, 64)
	}
	return s
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// throttleHook counts the throttles a client is told of.
type throttleHook struct {
	n   atomic.Int64
	max atomic.Int64
}

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	h.n.Add(1)
	if ms := d.Milliseconds(); ms > h.max.Load() {
		h.max.Store(ms)
	}
}

// A producer whose client id has producer_byte_rate X produces flat out; after two seconds
// the bytes the broker takes from it over 30 s (the span) come within 10% of X a second, and it is told
// throttle_time_ms > 0. A second producer on the same broker, without a quota, is never
// throttled.
//
// The broker samples rates over quota.window.num=2 windows of a second. With Kafka's 11, a
// client held at its quota sends in bursts: when its oldest sample (the one holding the last
// burst) expires, its rate falls and it may send up to ten seconds' worth at once, so over
// any 10-15 s the rate swings far around X and only the long run (internal/quota's closed-
// loop test) settles at it. Two windows make that swing one second's worth.
func TestProducerByteRateQuota(t *testing.T) {
	const rate = 256 << 10 // bytes a second
	b := testutil.StartBroker(t, "quota.window.num=2", "quota.window.size.seconds=1")
	adm := newAdmin(t, b.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createTopic(t, b.Addr(), "quota-slow", 1, nil)
	createTopic(t, b.Addr(), "quota-free", 1, nil)
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: clientID("slow-producer"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: rate}}},
	})
	if err != nil || res[0].Err != nil {
		t.Fatalf("set quota: %v %v", err, res)
	}

	var slowHook, freeHook throttleHook
	opts := func(id string, hook *throttleHook) []kgo.Opt {
		return []kgo.Opt{
			kgo.ClientID(id), kgo.WithHooks(hook),
			kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.MaxBufferedRecords(2), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
			kgo.MaxProduceRequestsInflightPerBroker(1),
		}
	}
	slow := newClient(t, b.Addr(), opts("slow-producer", &slowHook)...)
	free := newClient(t, b.Addr(), opts("free-producer", &freeHook)...)
	// Connect both first, so the measured span holds produce requests only.
	for _, cl := range []*kgo.Client{slow, free} {
		if err := cl.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	}

	value := make([]byte, 8<<10)
	run := func(cl *kgo.Client, topic string, d time.Duration, acked *atomic.Int64) {
		pctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		var wg sync.WaitGroup
		for pctx.Err() == nil {
			wg.Add(1)
			cl.Produce(pctx, &kgo.Record{Topic: topic, Value: value}, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err == nil {
					acked.Add(int64(len(r.Value)))
				}
			})
		}
		wg.Wait()
	}
	var warm atomic.Int64
	run(slow, "quota-slow", 2*time.Second, &warm)
	var slowBytes, freeBytes atomic.Int64
	const span = 30 * time.Second // the measurement span
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); run(slow, "quota-slow", span, &slowBytes) }()
	go func() { defer wg.Done(); run(free, "quota-free", 3*time.Second, &freeBytes) }()
	wg.Wait()

	got := float64(slowBytes.Load()) / span.Seconds()
	t.Logf("throttled producer: %.0f B/s against a quota of %d B/s (%.1f%%) over %v; %d throttles, longest %d ms",
		got, rate, 100*got/rate, span, slowHook.n.Load(), slowHook.max.Load())
	t.Logf("unlimited producer: %.0f B/s over 3 s, %d throttles", float64(freeBytes.Load())/3, freeHook.n.Load())
	if math.Abs(got-rate)/rate > 0.10 {
		t.Errorf("throttled producer rate %.0f B/s is not within 10%% of %d", got, rate)
	}
	if slowHook.n.Load() == 0 || slowHook.max.Load() <= 0 {
		t.Error("the throttled producer was never told throttle_time_ms > 0")
	}
	if freeHook.n.Load() != 0 {
		t.Errorf("the producer without a quota was throttled %d times", freeHook.n.Load())
	}
}

// A consumer whose client id has a consumer_byte_rate is told throttle_time_ms > 0 once it
// reads faster, and still reads every record.
func TestConsumerByteRateQuota(t *testing.T) {
	b := testutil.StartBroker(t, "quota.window.num=2")
	adm := newAdmin(t, b.Addr())
	ctx := ctxT(t)
	createTopic(t, b.Addr(), "quota-read", 1, nil)
	value := make([]byte, 16<<10)
	var rs []*kgo.Record
	for range 64 { // 1 MiB
		rs = append(rs, &kgo.Record{Topic: "quota-read", Value: value})
	}
	produceSync(t, newClient(t, b.Addr(), kgo.ProducerBatchCompression(kgo.NoCompression())), rs...)
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: clientID("slow-consumer"), Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 512 << 10}}},
	})
	if err != nil || res[0].Err != nil {
		t.Fatalf("set quota: %v %v", err, res)
	}
	var hook throttleHook
	got := consumeN(t, b.Addr(), "quota-read", len(rs), kgo.ClientID("slow-consumer"), kgo.WithHooks(&hook))
	if len(got) != len(rs) {
		t.Fatalf("consumed %d of %d records", len(got), len(rs))
	}
	if hook.n.Load() == 0 {
		t.Fatal("the consumer over its quota was never told throttle_time_ms > 0")
	}
	t.Logf("%d throttles, longest %d ms", hook.n.Load(), hook.max.Load())
}

// A consumer over its consumer_byte_rate is answered, as Kafka answers it
// (getThrottledResponse), with throttle_time_ms and no partitions at all, and the bytes it
// was not sent do not count against it: fetching on from where it is, it reads every record.
func TestThrottledFetchCarriesNoRecords(t *testing.T) {
	b := testutil.StartBroker(t, "quota.window.num=2", "quota.window.size.seconds=1")
	adm := newAdmin(t, b.Addr())
	ctx := ctxT(t)
	createTopic(t, b.Addr(), "quota-empty", 1, nil)
	const records = 32
	value := make([]byte, 16<<10)
	var rs []*kgo.Record
	for range records { // 512 KiB
		rs = append(rs, &kgo.Record{Topic: "quota-empty", Value: value})
	}
	produceSync(t, newClient(t, b.Addr(), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(20<<10)), rs...)
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: clientID("capped"), Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 128 << 10}}},
	})
	if err != nil || res[0].Err != nil {
		t.Fatalf("set quota: %v %v", err, res)
	}
	td, err := adm.ListTopics(ctx, "quota-empty")
	if err != nil {
		t.Fatal(err)
	}
	topicID := td["quota-empty"].ID

	cl := newClient(t, b.Addr(), kgo.ClientID("capped"))
	next, throttled := int64(0), 0
	for next < records {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.SessionEpoch, req.MaxBytes, req.MaxWaitMillis = -1, -1, 1<<20, 100
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "quota-empty", topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = next, 1<<20, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := request[*kmsg.FetchResponse](t, cl, req)
		if resp.ErrorCode != 0 {
			t.Fatalf("fetch at %d: %v", next, kerr.ErrorForCode(resp.ErrorCode))
		}
		if resp.ThrottleMillis > 0 {
			throttled++
			if len(resp.Topics) != 0 {
				t.Fatalf("a fetch throttled for %d ms answers %d topics, want none", resp.ThrottleMillis, len(resp.Topics))
			}
			continue
		}
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				if p.ErrorCode != 0 {
					t.Fatalf("fetch at %d: %v", next, kerr.ErrorForCode(p.ErrorCode))
				}
				next = nextOffset(t, p.RecordBatches, next)
			}
		}
	}
	if throttled == 0 {
		t.Fatal("512 KiB read under a 128 KiB/s quota without a throttled answer")
	}
	t.Logf("%d records read; %d answers throttled", next, throttled)
}

// nextOffset is the offset after the last whole batch of a fetched partition's record
// batches (v2: base offset at 0, length at 8, last offset delta at 23), from if it holds none.
func nextOffset(t *testing.T, b []byte, from int64) int64 {
	t.Helper()
	for len(b) >= 27 {
		n := 12 + int(binary.BigEndian.Uint32(b[8:12]))
		if n > len(b) {
			break
		}
		from = int64(binary.BigEndian.Uint64(b[0:8])) + int64(binary.BigEndian.Uint32(b[23:27])) + 1
		b = b[n:]
	}
	return from
}
