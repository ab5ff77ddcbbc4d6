package streams_test

import (
	"testing"

	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
	"github.com/gregor-project/gregor/streams/streamstest"
)

// Orders joined with a global product table by a key taken from the order's value: no
// repartition, the table's updates and deletions seen by later orders only.
func TestGlobalTableJoin(t *testing.T) {
	b := streams.NewBuilder()
	products := streams.GlobalTable(b, "products", serde.String, serde.String)
	orders := streams.Stream(b, "orders", serde.String, serde.String) // key: order id, value: product id
	product := func(_, v string) string { return v }
	streams.To(streams.JoinGlobal(orders, products, product, func(o, p string) string { return o + "=" + p }), "inner", serde.String, serde.String)
	streams.To(streams.LeftJoinGlobal(orders, products, product, func(o, p string, found bool) string {
		if !found {
			return o + "=?"
		}
		return o + "=" + p
	}), "left", serde.String, serde.String)

	want := `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000003 (topics: [orders])
      --> KSTREAM-JOIN-0000000004, KSTREAM-LEFTJOIN-0000000006
    Processor: KSTREAM-JOIN-0000000004 (stores: [])
      --> KSTREAM-SINK-0000000005
      <-- KSTREAM-SOURCE-0000000003
    Sink: KSTREAM-SINK-0000000005 (topic: inner)
      <-- KSTREAM-JOIN-0000000004
    Processor: KSTREAM-LEFTJOIN-0000000006 (stores: [])
      --> KSTREAM-SINK-0000000007
      <-- KSTREAM-SOURCE-0000000003
    Sink: KSTREAM-SINK-0000000007 (topic: left)
      <-- KSTREAM-LEFTJOIN-0000000006

   Sub-topology: 1 for global store (will not generate tasks)
    Source: KSTREAM-SOURCE-0000000001 (topics: [products])
      --> KTABLE-SOURCE-0000000002
    Processor: KTABLE-SOURCE-0000000002 (stores: [products-STATE-STORE-0000000000])
      --> none
      <-- KSTREAM-SOURCE-0000000001

`
	if got := b.Describe(); got != want {
		t.Fatalf("Describe:\n%s\nwant:\n%s", got, want)
	}

	d := streamstest.New(t, b)
	p := streamstest.Input(d, "products", serde.String, serde.String)
	o := streamstest.Input(d, "orders", serde.String, serde.String)
	p.Pipe("p1", "apple", at(0))
	o.Pipe("o1", "p1", at(1))
	o.Pipe("o2", "p2", at(2))
	p.Pipe("p2", "pear", at(3))
	o.Pipe("o3", "p2", at(4))
	p.PipeBytes([]byte("p1"), nil, at(5))
	o.Pipe("o4", "p1", at(6))
	// A global table's record time does not matter: an update is seen by the next order
	// even if it is older.
	p.Pipe("p1", "apricot", at(0))
	o.Pipe("o5", "p1", at(7))
	equal(t, "inner", readTable(d, "inner"), []out{{"o1", "p1=apple", false}, {"o3", "p2=pear", false}, {"o5", "p1=apricot", false}})
	equal(t, "left", readTable(d, "left"), []out{{"o1", "p1=apple", false}, {"o2", "p2=?", false}, {"o3", "p2=pear", false},
		{"o4", "p1=?", false}, {"o5", "p1=apricot", false}})
	if n := streamstest.KeyValueStore[string, string](d, "products-STATE-STORE-0000000000").Len(); n != 2 {
		t.Fatalf("global store has %d products, want 2", n)
	}
	// The global table has no changelog.
	if rs := d.Raw().ReadOutput(d.Raw().TopicName("products-STATE-STORE-0000000000-changelog")); len(rs) != 0 {
		t.Fatalf("%d changelog records for a global store", len(rs))
	}
}
