package streams_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
	"github.com/gregor-project/gregor/streams/streamstest"
)

// orderFK is the foreign key of an order "customer|item": its customer.
func orderFK(v string) string { return strings.SplitN(v, "|", 2)[0] }

// Random order and customer updates and deletions, including orders moving from one
// customer to another: after every step, the join's output applied to a table equals the
// foreign-key join of the two tables as they are now, computed here by definition (inner:
// orders whose customer exists; left: every order).
func TestForeignKeyJoinRandom(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 3))
		b := streams.NewBuilder()
		orders := streams.Table(b, "orders", serde.String, serde.String, streams.Named("orders"))
		customers := streams.Table(b, "customers", serde.String, serde.String, streams.Named("customers"))
		streams.To(streams.ToStream(streams.JoinForeignKey(orders, customers, orderFK, func(o, c string) string { return o + "@" + c },
			streams.MaterializedWith("inner-store", serde.String))), "inner", serde.String, serde.String)
		streams.To(streams.ToStream(streams.LeftJoinForeignKey(orders, customers, orderFK, func(o, c string, found bool) string {
			if !found {
				c = "?"
			}
			return o + "@" + c
		})), "leftj", serde.String, serde.String)
		d := streamstest.New(t, b)
		oin := streamstest.Input(d, "orders", serde.String, serde.String)
		cin := streamstest.Input(d, "customers", serde.String, serde.String)

		om, cm := map[string]string{}, map[string]string{}
		got := map[string]map[string]string{"inner": {}, "leftj": {}}
		for i := range 300 {
			switch rng.IntN(4) {
			case 0, 1:
				k := fmt.Sprint("o", rng.IntN(6))
				if _, ok := om[k]; ok && rng.IntN(4) == 0 {
					delete(om, k)
					oin.PipeBytes([]byte(k), nil, at(int64(i)))
				} else {
					om[k] = fmt.Sprintf("c%d|%d", rng.IntN(4), i)
					oin.Pipe(k, om[k], at(int64(i)))
				}
			default:
				k := fmt.Sprint("c", rng.IntN(4))
				if _, ok := cm[k]; ok && rng.IntN(3) == 0 {
					delete(cm, k)
					cin.PipeBytes([]byte(k), nil, at(int64(i)))
				} else {
					cm[k] = fmt.Sprint("name", i)
					cin.Pipe(k, cm[k], at(int64(i)))
				}
			}
			want := map[string]map[string]string{"inner": {}, "leftj": {}}
			for k, o := range om {
				c, ok := cm[orderFK(o)]
				if ok {
					want["inner"][k] = o + "@" + c
					want["leftj"][k] = o + "@" + c
				} else {
					want["leftj"][k] = o + "@?"
				}
			}
			for _, kind := range []string{"inner", "leftj"} {
				for _, r := range streamstest.Output(d, kind, serde.String, serde.String).ReadRecords() {
					if r.NullValue {
						delete(got[kind], r.Key)
					} else {
						got[kind][r.Key] = r.Value
					}
				}
				if !maps.Equal(got[kind], want[kind]) {
					t.Fatalf("seed %d step %d %s: result %v, want %v", seed, i, kind, got[kind], want[kind])
				}
			}
		}
		store := map[string]string{}
		for k, v := range streamstest.KeyValueStore[string, string](d, "inner-store").All() {
			store[k] = v
		}
		if !maps.Equal(store, got["inner"]) {
			t.Fatalf("seed %d: inner store %v, want %v", seed, store, got["inner"])
		}
	}
}

// A response to a subscription that the left entry has since replaced is dropped by its
// hash: here one input updates an order twice (to customer a, then b) before either
// subscription is answered, so a's answer arrives for an order that is now b's.
func TestForeignKeyJoinDropsStaleResponses(t *testing.T) {
	b := streams.NewBuilder()
	cmds := streams.Stream(b, "cmds", serde.String, serde.String) // "order=customer|x,customer|y"
	updates := streams.FlatMap(cmds, func(_, v string) []streams.KeyValue[string, string] {
		k, rest, _ := strings.Cut(v, "=")
		var out []streams.KeyValue[string, string]
		for _, u := range strings.Split(rest, ",") {
			out = append(out, streams.KV(k, u))
		}
		return out
	})
	orders := streams.Reduce(streams.GroupByKey(updates, streams.Named("orders")), func(_, v string) string { return v }, streams.Named("orders"))
	customers := streams.Table(b, "customers", serde.String, serde.String, streams.Named("customers"))
	streams.To(streams.ToStream(streams.JoinForeignKey(orders, customers, orderFK, func(o, c string) string { return o + "@" + c })),
		"out", serde.String, serde.String)
	d := streamstest.New(t, b)
	c := streamstest.Input(d, "customers", serde.String, serde.String)
	c.Pipe("a", "Ann", at(0))
	c.Pipe("b", "Bob", at(1))
	streamstest.Input(d, "cmds", serde.String, serde.String).Pipe("", "o1=a|1,b|2", at(2))
	equal(t, "out", readTable(d, "out"), []out{{"o1", "b|2@Bob", false}})
	// Both subscriptions were answered: the first answer was dropped as stale.
	sub := "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000004-topic"
	resp := "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000012-topic"
	if n := len(d.Raw().ReadOutput(d.Raw().TopicName(sub))); n != 3 {
		t.Fatalf("%d subscription records (subscribe a, unsubscribe a, subscribe b), want 3", n)
	}
	if n := len(d.Raw().ReadOutput(d.Raw().TopicName(resp))); n != 2 {
		t.Fatalf("%d responses, want 2", n)
	}
	// Bob renames: only the order now at b hears of it.
	c.Pipe("a", "Anne", at(3))
	c.Pipe("b", "Bobby", at(4))
	equal(t, "out", readTable(d, "out"), []out{{"o1", "b|2@Bobby", false}})
}

// A foreign-key join's result has no store unless Materialized: it can be filtered and
// streamed, but joining it needs a store, which building the topology says.
func TestForeignKeyJoinResultNeedsStoreToJoin(t *testing.T) {
	build := func(o ...streams.Option) *streams.Builder {
		b := streams.NewBuilder()
		orders := streams.Table(b, "orders", serde.String, serde.String, streams.Named("orders"))
		customers := streams.Table(b, "customers", serde.String, serde.String, streams.Named("customers"))
		res := streams.JoinForeignKey(orders, customers, orderFK, func(o, c string) string { return o + "@" + c }, o...)
		streams.To(streams.ToStream(res.Filter(func(_, v string) bool { return v != "" })), "out", serde.String, serde.String)
		streams.Join(streams.Stream(b, "events", serde.String, serde.String), res, func(e, r string) string { return e + r })
		return b
	}
	if _, err := streams.NewTestDriver(build(), "x", streamstest.Start); err == nil || !strings.Contains(err.Error(), "Materialized") {
		t.Fatalf("joining an unmaterialized foreign-key result: %v", err)
	}
	if _, err := streams.NewTestDriver(build(streams.MaterializedWith("res", serde.String)), "x", streamstest.Start); err != nil {
		t.Fatal(err)
	}
}

// The foreign-key join's nodes, stores and topics are named as Kafka Streams names them.
func TestForeignKeyJoinDescribe(t *testing.T) {
	b := streams.NewBuilder()
	orders := streams.Table(b, "orders", serde.String, serde.String)
	customers := streams.Table(b, "customers", serde.String, serde.String)
	streams.ToStream(streams.JoinForeignKey(orders, customers, orderFK, func(o, c string) string { return o + "@" + c }))
	want := `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [orders])
      --> KTABLE-SOURCE-0000000002
    Source: KTABLE-SOURCE-0000000016 (topics: [KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic])
      --> KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017
    Processor: KTABLE-SOURCE-0000000002 (stores: [orders-STATE-STORE-0000000001])
      --> KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007
      <-- KSTREAM-SOURCE-0000000000
    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007 (stores: [])
      --> KTABLE-SINK-0000000008
      <-- KTABLE-SOURCE-0000000002
    Sink: KTABLE-SINK-0000000008 (topic: KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic)
      <-- KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007
    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017 (stores: [orders-STATE-STORE-0000000001])
      --> KTABLE-FK-JOIN-OUTPUT-0000000018
      <-- KTABLE-SOURCE-0000000016
    Processor: KTABLE-FK-JOIN-OUTPUT-0000000018 (stores: [])
      --> KTABLE-TOSTREAM-0000000019
      <-- KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017
    Processor: KTABLE-TOSTREAM-0000000019 (stores: [])
      --> none
      <-- KTABLE-FK-JOIN-OUTPUT-0000000018

   Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000003 (topics: [customers])
      --> KTABLE-SOURCE-0000000005
    Source: KTABLE-SOURCE-0000000009 (topics: [KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic])
      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011
    Processor: KTABLE-SOURCE-0000000005 (stores: [customers-STATE-STORE-0000000004])
      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013
      <-- KSTREAM-SOURCE-0000000003
    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011 (stores: [KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010])
      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012
      <-- KTABLE-SOURCE-0000000009
    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012 (stores: [customers-STATE-STORE-0000000004])
      --> KTABLE-SINK-0000000015
      <-- KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011
    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013 (stores: [KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010])
      --> KTABLE-SINK-0000000015
      <-- KTABLE-SOURCE-0000000005
    Sink: KTABLE-SINK-0000000015 (topic: KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic)
      <-- KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012, KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013

`
	if got := b.Describe(); got != want {
		t.Fatalf("Describe:\n%s\nwant:\n%s", got, want)
	}
}
