package broker_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// A partition directory that no topic assigns to this broker (its topic deleted while the
// broker was down) is deleted at start-up, once the broker is unfenced, and the partitions it
// does hold are kept, with their data.
func TestStrayPartitionDirectoriesRemovedAtStart(t *testing.T) {
	b := testutil.StartBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "kept"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "kept", Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(b.Dir, "ghost-0")
	if err := os.MkdirAll(stray, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stray, "00000000000000000000.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	b = testutil.StartBrokerIn(t, b.Dir, nil)
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatalf("stray directory still there after start: %v", err)
	}
	for _, d := range []string{"kept-0", "kept-1"} {
		if _, err := os.Stat(filepath.Join(b.Dir, d)); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
	}
	cl2, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	ends, err := kadm.NewClient(cl2).ListEndOffsets(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("kept", 0); o.Offset != 1 {
		t.Fatalf("kept-0 end offset %d after restart, want 1", o.Offset)
	}
}
