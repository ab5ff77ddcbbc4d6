package streams_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
)

// A task reads its source partitions' records lowest timestamp first: a table's records
// written before the stream's (by timestamp) are in the table when the stream's records
// look them up, even though the stream's topic was written first and the two arrive in one
// fetch.
func TestTaskTakesRecordsInTimestampOrder(t *testing.T) {
	n := embedtest.Start(t, embed.Options{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, 1, 1, nil, "ord-events", "ord-users", "ord-out"); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour)
	const users = 50
	var rs []*kgo.Record
	for i := range users { // the stream's records first, each a second after every user's
		rs = append(rs, &kgo.Record{Topic: "ord-events", Key: []byte(fmt.Sprint("u", i)), Value: []byte("e"), Timestamp: base.Add(time.Minute + time.Duration(i)*time.Millisecond)})
	}
	for i := range users {
		rs = append(rs, &kgo.Record{Topic: "ord-users", Key: []byte(fmt.Sprint("u", i)), Value: []byte(fmt.Sprint("name", i)), Timestamp: base.Add(time.Duration(i) * time.Millisecond)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	b := streams.NewBuilder()
	names := streams.Table(b, "ord-users", serde.String, serde.String)
	events := streams.Stream(b, "ord-events", serde.String, serde.String)
	joined := streams.LeftJoin(events, names, func(_ string, name string, found bool) string {
		if !found {
			return "missing"
		}
		return name
	})
	streams.To(joined, "ord-out", serde.String, serde.String)
	startAppWith(t, b, streams.Config{ApplicationID: "ordering", Brokers: []string{n.Addr()}, CommitInterval: 50 * time.Millisecond})

	out, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ConsumeTopics("ord-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for got := 0; got < users; {
		fs := out.PollFetches(wctx)
		if wctx.Err() != nil {
			t.Fatalf("%d of %d joined records", got, users)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if want := "name" + string(r.Key[1:]); string(r.Value) != want {
				t.Errorf("event of %s joined %q, want %q", r.Key, r.Value, want)
			}
			got++
		})
	}
}
