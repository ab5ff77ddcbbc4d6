// Package streamscluster runs Gregor Streams applications against a three-node cluster of
// `gregor server` processes with every topic replicated three times, the way they run in
// production: instances that are separate processes and are killed with SIGKILL, and
// instances that join and leave. The application is the word count (text-lines ->
// word-counts, counts as decimal text) and every check is against counts computed here
// from the input.
//
// The test binary doubles as an application instance: with STREAMS_INSTANCE set it runs
// the word count until SIGTERM (a clean exit) or until it is killed.
package streamscluster

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
)

const (
	inTopic    = "text-lines"
	outTopic   = "word-counts"
	partitions = 6
)

func TestMain(m *testing.M) {
	if spec := os.Getenv("STREAMS_INSTANCE"); spec != "" {
		os.Exit(runInstance(spec))
	}
	os.Exit(m.Run())
}

// instanceSpec is what an instance process is told: brokers (comma separated),
// application id and guarantee, separated by '|'.
func instanceSpec(brokers []string, appID string, g streams.Guarantee) string {
	return strings.Join(brokers, ",") + "|" + appID + "|" + string(g)
}

func runInstance(spec string) int {
	parts := strings.Split(spec, "|")
	app, err := newApp(strings.Split(parts[0], ","), parts[1], streams.Guarantee(parts[2]), "")
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		err = app.Run(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "instance:", err)
		return 1
	}
	return 0
}

// newApp is the word count with the cluster's replication for its internal topics and
// timeouts short enough that a killed instance's tasks move within seconds.
// newApp makes an instance keeping its state in stateDir ("": the default under the temp
// directory).
func newApp(brokers []string, appID string, g streams.Guarantee, stateDir string) (*streams.App, error) {
	b := streams.NewBuilder()
	lines := streams.Stream(b, inTopic, serde.String, serde.String)
	words := streams.FlatMapValues(lines, func(l string) []string { return strings.Fields(strings.ToLower(l)) })
	counts := streams.Count(streams.GroupBy(words, func(_, w string) string { return w }, serde.String), streams.Named("counts"))
	streams.To(streams.ToStream(counts), outTopic, serde.String, serde.Int64Text)
	return streams.New(b, streams.Config{ApplicationID: appID, Brokers: brokers, Guarantee: g,
		ReplicationFactor: 3, CommitInterval: 50 * time.Millisecond,
		SessionTimeout: 6 * time.Second, TransactionTimeout: 3 * time.Second, StateDir: stateDir})
}

// startCluster starts three nodes, waits for all of them to be unfenced, and creates the
// input and output topics, replicated three times with min.insync.replicas 2.
func startCluster(t *testing.T) (*testutil.Cluster, *kgo.Client) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3})
	c.WaitBrokersReady(t, time.Minute)
	cl := c.Client(t, kgo.ProducerBatchMaxBytes(1<<20))
	minISR := "2"
	resp, err := kadm.NewClient(cl).CreateTopics(context.Background(), partitions, 3,
		map[string]*string{"min.insync.replicas": &minISR}, inTopic, outTopic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	return c, cl
}

// input produces lines [from, to) of the test's input: each a few words out of 40, so every
// partition of the repartition topic gets some; it adds each word's count to want.
func input(t *testing.T, cl *kgo.Client, from, to int, want map[string]int64) {
	t.Helper()
	var rs []*kgo.Record
	for i := from; i < to; i++ {
		ws := []string{"w" + strconv.Itoa(i%40), "W" + strconv.Itoa((i*7)%40), "w" + strconv.Itoa((i*13+5)%40)}
		for _, w := range ws {
			want[strings.ToLower(w)]++
		}
		rs = append(rs, &kgo.Record{Topic: inTopic, Key: []byte(strconv.Itoa(i)), Value: []byte(strings.Join(ws, " "))})
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// checker reads word-counts with read_committed from the start and keeps each word's
// latest count and every count it saw, in order.
type checker struct {
	t   *testing.T
	cl  *kgo.Client
	got map[string]int64
	seq map[string][]int64
}

func newChecker(t *testing.T, c *testutil.Cluster) *checker {
	return &checker{t: t, cl: c.Client(t, kgo.ConsumeTopics(outTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted())), got: map[string]int64{}, seq: map[string][]int64{}}
}

// read polls once (up to a second) and returns how many counts it read.
func (k *checker) read() int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n := 0
	k.cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
		c, err := strconv.ParseInt(string(r.Value), 10, 64)
		if err != nil {
			k.t.Errorf("count %q of %q is not decimal", r.Value, r.Key)
		}
		k.got[string(r.Key)] = c
		k.seq[string(r.Key)] = append(k.seq[string(r.Key)], c)
		n++
	})
	return n
}

// await reads until every word's latest count is want's (exactly once) or at least want's
// (at least once), failing after timeout with what is missing.
func (k *checker) await(want map[string]int64, exact bool, timeout time.Duration) {
	k.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		missing := 0
		for w, c := range want {
			if g := k.got[w]; g < c || (exact && g != c) {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			k.t.Fatalf("after %v, %d of %d words not at their count: got %v, want %v", timeout, missing, len(want), k.got, want)
		}
		k.read()
	}
}

// exactSequences fails unless every word's committed counts are 1, 2, ..., n: nothing
// counted twice, nothing skipped, and state carried across every move of a task (a task
// whose store were not restored would start again at 1).
func (k *checker) exactSequences() {
	k.t.Helper()
	for w, cs := range k.seq {
		for i, c := range cs {
			if c != int64(i+1) {
				k.t.Fatalf("committed counts of %q: %v", w, cs)
			}
		}
	}
}
