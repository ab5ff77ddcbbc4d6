package streams_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
	"github.com/gregor-project/gregor/streams"
)

// The test binary doubles as an application instance a test can kill -9: with
// STREAMS_TEST_INSTANCE=brokers/app-id/guarantee[/standbys/application.server] set it runs
// word count until killed, its state in STREAMS_TEST_STATE_DIR.
func TestMain(m *testing.M) {
	if spec := os.Getenv("STREAMS_TEST_INSTANCE"); spec != "" {
		os.Exit(runInstance(spec))
	}
	os.Exit(m.Run())
}

func runInstance(spec string) int {
	parts := strings.Split(spec, "/")
	b := streams.NewBuilder()
	wordCount(b)
	cfg := streams.Config{ApplicationID: parts[1], Brokers: []string{parts[0]},
		Guarantee: streams.Guarantee(parts[2]), CommitInterval: 20 * time.Millisecond,
		SessionTimeout: 6 * time.Second, TransactionTimeout: 3 * time.Second,
		StateDir: os.Getenv("STREAMS_TEST_STATE_DIR")}
	if len(parts) > 4 { // .../standbys/application.server
		cfg.NumStandbyReplicas, _ = strconv.Atoi(parts[3])
		cfg.ApplicationServer = parts[4]
	}
	app, err := streams.New(b, cfg)
	if err == nil {
		err = app.Run(context.Background())
	}
	fmt.Fprintln(os.Stderr, "instance:", err)
	return 1
}

func startInstance(t *testing.T, addr, appID string, g streams.Guarantee, stateDir string, extra ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "STREAMS_TEST_INSTANCE="+strings.Join(append([]string{addr, appID, string(g)}, extra...), "/"),
		"STREAMS_TEST_STATE_DIR="+stateDir)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			if err := cmd.Process.Kill(); err != nil {
				t.Errorf("kill instance: %v", err)
			}
			if err := cmd.Wait(); err == nil {
				t.Errorf("a killed instance exited cleanly")
			}
		}
	})
	return cmd
}

// An instance is killed (SIGKILL) mid-stream and another takes over its tasks: with
// exactly_once_v2 every committed count is exact (each word's counts are 1..n, none
// repeated), with at-least-once no count is missing.
func TestCrashMidStream(t *testing.T) {
	for _, g := range []streams.Guarantee{streams.AtLeastOnce, streams.ExactlyOnceV2} {
		t.Run(string(g), func(t *testing.T) { testCrash(t, g) })
	}
}

func testCrash(t *testing.T, g streams.Guarantee) {
	n := embedtest.Start(t, embed.Options{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	for _, topic := range []string{"text-lines", "word-counts"} {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int64{}
	var lines []string
	for i := range 3000 {
		l := fmt.Sprintf("w%d w%d W%d", i%17, i%5, i%11)
		lines = append(lines, l)
	}
	countWords(want, lines)
	produceLines(t, cl, "text-lines", lines)

	out, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ConsumeTopics("word-counts"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	got := map[string]int64{}
	seq := map[string][]int64{}
	read := func() int {
		fs := out.PollFetches(wctx)
		if wctx.Err() != nil {
			t.Fatalf("counts %v, want %v", got, want)
		}
		nr := 0
		fs.EachRecord(func(r *kgo.Record) {
			c, err := strconv.ParseInt(string(r.Value), 10, 64)
			if err != nil {
				t.Errorf("value %q: %v", r.Value, err)
			}
			got[string(r.Key)] = c
			seq[string(r.Key)] = append(seq[string(r.Key)], c)
			nr++
		})
		return nr
	}

	// Both instances share one state directory, as a restarted instance on the same
	// machine: the second finds the first's stores (at-least-once: resumed from their
	// checkpoint; exactly_once_v2: without one, so wiped and restored).
	stateDir := t.TempDir()
	first := startInstance(t, n.Addr(), "crash", g, stateDir)
	for read() == 0 {
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(); err == nil {
		t.Fatal("the killed instance exited cleanly")
	}
	total := int64(0)
	for _, c := range got {
		total += c
	}
	t.Logf("killed after committed counts summing to %d of %d words", total, 3*len(lines))
	startInstance(t, n.Addr(), "crash", g, stateDir)

	done := func() bool {
		for w, c := range want {
			if got[w] < c || (g == streams.ExactlyOnceV2 && got[w] != c) {
				return false
			}
		}
		return true
	}
	for !done() {
		read()
	}
	if len(got) != len(want) {
		t.Fatalf("words %v, want %v", got, want)
	}
	if g != streams.ExactlyOnceV2 {
		return
	}
	for w, cs := range seq {
		for i, c := range cs {
			if c != int64(i+1) {
				t.Fatalf("committed counts of %q after the crash: %v", w, cs)
			}
		}
	}
}
