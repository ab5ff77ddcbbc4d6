package api_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// One fetch answer mixing record ranges the connection reads into its write buffer (small)
// and ranges it sends by sendfile (over 64 KiB): every record arrives intact and in order.
func TestFetchMixesGatheredAndSentfileParts(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "mix", 3, nil)
	cl := newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	want := map[int32][][]byte{}
	var rs []*kgo.Record
	add := func(p int32, n, size int) {
		for i := range n {
			v := bytes.Repeat([]byte(fmt.Sprintf("%d-%d|", p, i)), size)[:size]
			want[p] = append(want[p], v)
			rs = append(rs, &kgo.Record{Topic: "mix", Partition: p, Value: v})
		}
	}
	add(0, 3, 100)    // small: gathered
	add(1, 400, 1000) // ~400 KB: sendfile
	add(2, 5, 300)    // small again, after the sendfile part
	produceSync(t, cl, rs...)
	got := map[int32][][]byte{}
	for _, r := range consumeN(t, b.Addr(), "mix", len(rs), kgo.FetchMaxPartitionBytes(1<<20)) {
		got[r.Partition] = append(got[r.Partition], r.Value)
	}
	for p, vs := range want {
		if len(got[p]) != len(vs) {
			t.Fatalf("partition %d: %d records, want %d", p, len(got[p]), len(vs))
		}
		for i := range vs {
			if !bytes.Equal(got[p][i], vs[i]) {
				t.Fatalf("partition %d record %d differs", p, i)
			}
		}
	}
}
