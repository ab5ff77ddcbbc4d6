package limits

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// A broker whose log dir fills up stops, with exit status 1 and a line saying its log dirs
// have failed, as Kafka's LogManager halts a broker once all its log dirs have failed. It must
// not run on with the partition's log offline: as a follower it stays out of the ISR, and as a
// leader the partition refuses every write, until someone restarts it. Once the space is
// freed it starts again and serves every record acknowledged before the disk filled.
func TestFullLogDirHaltsBroker(t *testing.T) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{
		Nodes:       1,
		BeforeStart: func(n *testutil.Node) { testutil.MountTmpfs(t, n, 32) },
	})
	n := c.Node(1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := c.Client(t, kgo.DefaultProduceTopic("full"))
	adm := kadm.NewClient(cl)
	if resp, err := adm.CreateTopic(ctx, 1, 1, nil, "full"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	const before = 100
	for i := range before {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "before-%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}

	filler, size, err := testutil.FillDisk(n.Dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("log dir filled with %d MiB", size>>20)
	// Records large enough that the next append needs a page the file system no longer has.
	// Each is produced without waiting for its answer past the broker's exit: a client
	// retries a record to a broker gone for good until it is closed.
	big := make([]byte, 64<<10)
	for i := 0; n.Running(); i++ {
		if i == 20 {
			t.Fatalf("the broker still runs after %d produces to a full log dir", i)
		}
		answered := make(chan error, 1)
		cl.Produce(ctx, &kgo.Record{Value: big}, func(_ *kgo.Record, err error) { answered <- err })
		c.WaitFor(t, 30*time.Second, func() bool {
			select {
			case err := <-answered:
				t.Logf("produce to the full log dir: %v", err)
				return true
			default:
				return !n.Running()
			}
		}, "an answer to the produce, or the broker's exit")
	}
	var exit *exec.ExitError
	if err := n.Stop(); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("the broker exited with %v, want exit status 1", err)
	}
	logged, err := os.ReadFile(n.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logged), "a log dir has failed") {
		t.Errorf("the broker's log does not say its log dir failed")
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	n.Start()
	consumer := c.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"full": {0: kgo.NewOffset().At(0)}}))
	for got := 0; got < before; {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of the %d records acknowledged before the disk filled: %v", got, before, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < before {
				if want := fmt.Sprintf("before-%d", r.Offset); string(r.Value) != want {
					t.Errorf("offset %d holds %q, want %q", r.Offset, r.Value, want)
				}
				got++
			}
		})
	}
}
