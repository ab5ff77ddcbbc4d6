package streams_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
)

// runApp runs the topology build makes as application appID until the test ends (or stop),
// at least once unless g says otherwise.
func runApp(t *testing.T, addr, appID string, build func(*streams.Builder), g ...streams.Guarantee) *running {
	t.Helper()
	b := streams.NewBuilder()
	build(b)
	cfg := streams.Config{ApplicationID: appID, Brokers: []string{addr}, CommitInterval: 50 * time.Millisecond, StateDir: t.TempDir()}
	if len(g) > 0 {
		cfg.Guarantee = g[0]
	}
	app, err := streams.New(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &running{app: app, done: make(chan error, 1)}
	go func() { r.done <- app.Run(context.Background()) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func createTopics(t *testing.T, adm *kadm.Client, partitions int32, topics ...string) {
	t.Helper()
	for _, topic := range topics {
		if _, err := adm.CreateTopic(context.Background(), partitions, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
}

// produceAt writes keyed records with explicit timestamps (ms since the epoch).
func produceAt(t *testing.T, cl *kgo.Client, topic string, recs ...[3]any) {
	t.Helper()
	var rs []*kgo.Record
	for _, r := range recs {
		rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(r[0].(string)), Value: []byte(r[1].(string)),
			Timestamp: time.UnixMilli(r[2].(int64))})
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// readUntil consumes topic from the start until the key/value pairs read (counted) equal
// want, or fails at the deadline.
func readUntil(t *testing.T, addr, topic string, want map[string]int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := map[string]int{}
	for !maps.Equal(got, want) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: got %v, want %v", topic, got, want)
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Key)+"="+string(r.Value)]++ })
	}
}

// A stream-stream join on a real node: two partitions per input (two tasks), the join's
// window stores' changelogs created (compact,delete), and a restarted application restores
// the left records from the changelog, so right records written while it was down still
// join them; under exactly_once_v2 as well (the stores restored from committed changelogs).
func TestStreamStreamJoinAgainstBroker(t *testing.T) {
	for _, g := range []streams.Guarantee{streams.AtLeastOnce, streams.ExactlyOnceV2} {
		t.Run(string(g), func(t *testing.T) { testStreamStreamJoinAgainstBroker(t, g) })
	}
}

func testStreamStreamJoinAgainstBroker(t *testing.T, g streams.Guarantee) {
	n := embedtest.Start(t, embed.Options{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	createTopics(t, adm, 2, "clicks", "views", "click-views")
	build := func(b *streams.Builder) {
		clicks := streams.Stream(b, "clicks", serde.String, serde.String)
		views := streams.Stream(b, "views", serde.String, serde.String)
		streams.To(streams.JoinStreams(clicks, views, func(c, v string) string { return c + "/" + v },
			streams.JoinTimeDifferenceAndGrace(10*time.Second, time.Hour)), "click-views", serde.String, serde.String)
	}
	const base = int64(1_700_000_000_000)
	var clicks, views [][3]any
	for i := range 20 {
		clicks = append(clicks, [3]any{fmt.Sprint("u", i%5), fmt.Sprint("c", i), base + int64(i)*1000})
	}
	for i := range 10 {
		views = append(views, [3]any{fmt.Sprint("u", i%5), fmt.Sprint("v", i), base + int64(i)*3000})
	}
	// The expectation, by the join's definition: every click and view of a user at most 10s apart.
	want := map[string]int{}
	expect := func(views [][3]any) {
		for _, c := range clicks {
			for _, v := range views {
				d := c[2].(int64) - v[2].(int64)
				if c[0] == v[0] && d >= -10_000 && d <= 10_000 {
					want[c[0].(string)+"="+c[1].(string)+"/"+v[1].(string)]++
				}
			}
		}
	}
	produceAt(t, cl, "clicks", clicks...)
	produceAt(t, cl, "views", views[:5]...)
	expect(views[:5])
	app := runApp(t, n.Addr(), "ssj", build, g)
	readUntil(t, n.Addr(), "click-views", want)

	changelog := "ssj-KSTREAM-JOINTHIS-0000000004-store-changelog"
	cfgs, err := adm.DescribeTopicConfigs(context.Background(), changelog)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cfgs.On(changelog, nil)
	if err != nil {
		t.Fatal(err)
	}
	policy := ""
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" {
			policy = c.MaybeValue()
		}
	}
	if policy != "compact,delete" {
		t.Fatalf("%s cleanup.policy %q, want compact,delete", changelog, policy)
	}

	app.stop(t)
	produceAt(t, cl, "views", views[5:]...)
	expect(views[5:])
	runApp(t, n.Addr(), "ssj", build, g)
	readUntil(t, n.Addr(), "click-views", want)
}

// A global table on a real node: two instances of one application each hold every
// partition of the products topic, restored from the topic at start and kept up to date
// while running, so each joins the orders of its own partitions with any product.
func TestGlobalTableAgainstBroker(t *testing.T) {
	n := embedtest.Start(t, embed.Options{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	createTopics(t, adm, 3, "products")
	createTopics(t, adm, 2, "orders", "enriched")
	build := func(b *streams.Builder) {
		products := streams.GlobalTable(b, "products", serde.String, serde.String, streams.Named("products"))
		orders := streams.Stream(b, "orders", serde.String, serde.String)
		streams.To(streams.JoinGlobal(orders, products, func(_, p string) string { return p },
			func(p, name string) string { return p + ":" + name }), "enriched", serde.String, serde.String)
	}
	var products [][3]any
	for i := range 12 {
		products = append(products, [3]any{fmt.Sprint("p", i), fmt.Sprint("name", i), int64(1)})
	}
	produceAt(t, cl, "products", products...)
	a1 := runApp(t, n.Addr(), "gt", build)
	a2 := runApp(t, n.Addr(), "gt", build)
	// Wait until the two instances share the order partitions.
	deadline := time.Now().Add(time.Minute)
	for len(a1.app.Tasks()) != 1 || len(a2.app.Tasks()) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("tasks %v and %v", a1.app.Tasks(), a2.app.Tasks())
		}
		time.Sleep(20 * time.Millisecond)
	}
	want := map[string]int{}
	var orders [][3]any
	for i := range 40 {
		p := fmt.Sprint("p", i%12)
		orders = append(orders, [3]any{fmt.Sprint("o", i), p, int64(2)})
		want[fmt.Sprint("o", i)+"="+p+":name"+strings.TrimPrefix(p, "p")]++
	}
	produceAt(t, cl, "orders", orders...)
	readUntil(t, n.Addr(), "enriched", want)

	// A product written while both run reaches both instances' global stores.
	produceAt(t, cl, "products", [3]any{"p99", "new", int64(3)})
	for i := range 8 {
		o := fmt.Sprint("late", i)
		produceAt(t, cl, "orders", [3]any{o, "p99", int64(4)})
		want[o+"=p99:new"]++
	}
	readUntil(t, n.Addr(), "enriched", want)

	// The global store has no changelog: its topic is one.
	td, err := adm.ListTopics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for topic := range td {
		if strings.HasSuffix(topic, "-changelog") {
			t.Fatalf("internal topic %s for a topology whose only store is global", topic)
		}
	}
}

// Joining streams whose topics have different partition counts fails at start with a
// clear error, as Kafka Streams' co-partitioning check.
func TestJoinNotCopartitioned(t *testing.T) {
	n := embedtest.Start(t, embed.Options{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	createTopics(t, adm, 2, "l2")
	createTopics(t, adm, 3, "r3")
	for name, build := range map[string]func(*streams.Builder){
		"stream-stream": func(b *streams.Builder) {
			streams.JoinStreams(streams.Stream(b, "l2", serde.String, serde.String), streams.Stream(b, "r3", serde.String, serde.String),
				func(a, c string) string { return a + c }, streams.JoinTimeDifferenceWithNoGrace(time.Second))
		},
		"stream-table": func(b *streams.Builder) {
			streams.Join(streams.Stream(b, "l2", serde.String, serde.String), streams.Table(b, "r3", serde.String, serde.String),
				func(a, c string) string { return a + c })
		},
		"table-table": func(b *streams.Builder) {
			streams.JoinTables(streams.Table(b, "l2", serde.String, serde.String), streams.Table(b, "r3", serde.String, serde.String),
				func(a, c string) string { return a + c })
		},
	} {
		b := streams.NewBuilder()
		build(b)
		app, err := streams.New(b, streams.Config{ApplicationID: "cp-" + name, Brokers: []string{n.Addr()}, StateDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = app.Run(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "not co-partitioned: [l2 (2 partitions), r3 (3 partitions)]") {
			t.Fatalf("%s: Run: %v", name, err)
		}
	}
}

// A foreign-key join on a real node between tables of different partition counts (orders
// 2, customers 3): the subscription topic is partitioned as the customers, the response
// topic as the orders, and the result is the join by definition.
func TestForeignKeyJoinAgainstBroker(t *testing.T) {
	n := embedtest.Start(t, embed.Options{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	createTopics(t, adm, 2, "fk-orders", "fk-out")
	createTopics(t, adm, 3, "fk-customers")
	build := func(b *streams.Builder) {
		orders := streams.Table(b, "fk-orders", serde.String, serde.String, streams.Named("orders"))
		customers := streams.Table(b, "fk-customers", serde.String, serde.String, streams.Named("customers"))
		streams.To(streams.ToStream(streams.LeftJoinForeignKey(orders, customers, orderFK, func(o, c string, found bool) string {
			if !found {
				c = "?"
			}
			return o + "@" + c
		})), "fk-out", serde.String, serde.String)
	}
	var customers, orders [][3]any
	for i := range 6 {
		customers = append(customers, [3]any{fmt.Sprint("c", i), fmt.Sprint("name", i), int64(1)})
	}
	want := map[string]int{}
	for i := range 30 {
		c := fmt.Sprint("c", i%8) // c6 and c7 do not exist
		o := fmt.Sprintf("%s|%d", c, i)
		orders = append(orders, [3]any{fmt.Sprint("o", i), o, int64(2)})
		name := "?"
		if i%8 < 6 {
			name = fmt.Sprint("name", i%8)
		}
		want[fmt.Sprint("o", i)+"="+o+"@"+name]++
	}
	produceAt(t, cl, "fk-customers", customers...)
	runApp(t, n.Addr(), "fk", build)
	produceAt(t, cl, "fk-orders", orders...)
	// Every order gets its final result; some may first have had "?" (the order arrived
	// before its customer was read), so read until the final ones are there.
	readLatest(t, n.Addr(), "fk-out", want)
	for topic, parts := range map[string]int{
		"fk-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000004-topic": 3,
		"fk-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000012-topic":     2,
	} {
		td, err := adm.ListTopics(context.Background(), topic)
		if err != nil || td[topic].Err != nil || len(td[topic].Partitions) != parts {
			t.Fatalf("%s: %v %+v, want %d partitions", topic, err, td[topic], parts)
		}
	}
}

// readLatest consumes topic from the start until the latest value of every key, as
// "key=value", equals want, or fails at the deadline.
func readLatest(t *testing.T, addr, topic string, want map[string]int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	latest := map[string]string{}
	got := map[string]int{}
	for !maps.Equal(got, want) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: got %v, want %v", topic, got, want)
		}
		fs.EachRecord(func(r *kgo.Record) { latest[string(r.Key)] = string(r.Value) })
		got = map[string]int{}
		for k, v := range latest {
			got[k+"="+v]++
		}
	}
}

// A left join's records waiting for their window to close survive a restart: the new
// instance restores the shared outer store from its changelog and emits their null-joined
// results once stream time passes their windows.
func TestStreamStreamLeftJoinRestoresWaitingRecords(t *testing.T) {
	n := embedtest.Start(t, embed.Options{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	createTopics(t, adm, 1, "ll", "lr", "lout")
	build := func(b *streams.Builder) {
		l := streams.Stream(b, "ll", serde.String, serde.String)
		r := streams.Stream(b, "lr", serde.String, serde.String)
		streams.To(streams.LeftJoinStreams(l, r, func(a, c string, found bool) string {
			if !found {
				c = "null"
			}
			return a + "+" + c
		}, streams.JoinTimeDifferenceAndGrace(time.Second, 0)), "lout", serde.String, serde.String)
	}
	const base = int64(1_700_000_000_000)
	produceAt(t, cl, "ll", [3]any{"a", "A", base}, [3]any{"b", "B", base + 100})
	app := runApp(t, n.Addr(), "lj", build)
	// Both wait in the outer store: wait until its changelog has them.
	changelog := "lj-KSTREAM-OUTERSHARED-0000000004-store-changelog"
	readCount(t, n.Addr(), changelog, 2)
	app.stop(t)

	// After the restart, a record at base+5000 closes both windows (base+100+1000 < base+5000).
	produceAt(t, cl, "ll", [3]any{"c", "C", base + 5000})
	runApp(t, n.Addr(), "lj", build)
	readUntil(t, n.Addr(), "lout", map[string]int{"a=A+null": 1, "b=B+null": 1})
}

// readCount consumes topic from the start until it has read n records.
func readCount(t *testing.T, addr, topic string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: %d records, want %d", topic, got, n)
		}
		got += fs.NumRecords()
	}
}
