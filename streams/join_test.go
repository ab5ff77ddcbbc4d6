package streams_test

import (
	"testing"

	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
	"github.com/gregor-project/gregor/streams/streamstest"
)

// Audit events enriched with a user table: the inner join drops events of unknown users,
// the left join keeps them; each event sees the table as it is when the event arrives.
func TestStreamTableJoin(t *testing.T) {
	b := streams.NewBuilder()
	users := streams.Table(b, "users", serde.String, serde.String, streams.Named("users"))
	events := streams.Stream(b, "events", serde.String, serde.String)
	streams.To(streams.Join(events, users, func(e, u string) string { return u + " " + e }), "inner", serde.String, serde.String)
	streams.To(streams.LeftJoin(events, users, func(e, u string, found bool) string {
		if !found {
			return "? " + e
		}
		return u + " " + e
	}), "left", serde.String, serde.String)
	// A key change before the join repartitions the stream by the new key.
	rekeyed := streams.SelectKey(streams.Stream(b, "by-name", serde.String, serde.String), func(_, v string) string { return v })
	streams.To(streams.Join(rekeyed, users, func(v, u string) string { return u + "<-" + v }, streams.Named("rekey")), "rekeyed", serde.String, serde.String)

	d := streamstest.New(t, b)
	u := streamstest.Input(d, "users", serde.String, serde.String)
	e := streamstest.Input(d, "events", serde.String, serde.String)
	u.Pipe("1", "ann", at(0))
	e.Pipe("1", "login", at(1))
	e.Pipe("2", "login", at(2))
	u.Pipe("2", "bob", at(3))
	e.Pipe("2", "logout", at(4))
	u.Pipe("1", "anne", at(5))
	e.Pipe("1", "logout", at(6))
	streamstest.Input(d, "by-name", serde.String, serde.String).Pipe("x", "2", at(7))

	out := func(topic string) []kv {
		return streamstest.Output(d, topic, serde.String, serde.String).ReadKeyValues()
	}
	equal(t, "inner", out("inner"), []kv{{"1", "ann login"}, {"2", "bob logout"}, {"1", "anne logout"}})
	equal(t, "left", out("left"), []kv{{"1", "ann login"}, {"2", "? login"}, {"2", "bob logout"}, {"1", "anne logout"}})
	equal(t, "rekeyed", out("rekeyed"), []kv{{"2", "bob<-2"}})
	if n := len(out("rekey-repartition")); n != 1 {
		t.Fatalf("%d records through rekey-repartition, want 1", n)
	}
}
