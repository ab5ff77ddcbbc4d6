package startup

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// envInt is the integer in the environment variable name, or def.
func envInt(t *testing.T, name string, def int) int {
	if s := os.Getenv(name); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a positive integer", name, s)
		}
		return n
	}
	return def
}

// openFDsOf counts the descriptors process pid holds.
func openFDsOf(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents), err
}

// rssOf is process pid's resident set (VmRSS), in bytes.
func rssOf(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	var kb int64
	for _, line := range strings.Split(string(b), "\n") {
		if _, err := fmt.Sscanf(line, "VmRSS: %d kB", &kb); err == nil {
			return kb << 10
		}
	}
	return 0
}

// fdWatch samples a process's descriptor count until stopped, keeping the largest.
type fdWatch struct {
	peak atomic.Int64
	stop chan struct{}
	done chan struct{}
}

func watchFDs(pid int) *fdWatch {
	w := &fdWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if n, err := openFDsOf(pid); err == nil && int64(n) > w.peak.Load() {
				w.peak.Store(int64(n))
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *fdWatch) end() int { close(w.stop); <-w.done; return int(w.peak.Load()) }

// A broker whose process may hold far fewer descriptors than it has partitions creates them,
// takes a record on each, serves them all back, and does so again after a clean restart and
// after kill -9 (recovery opens every log): idle segment files are closed and opened again on
// use, so the descriptor count stays under the limit throughout and the broker never goes
// deaf. Without the bound every partition's active segment held its .log open, and the broker
// ran out at about the limit. GREGOR_MANY_PARTITIONS and GREGOR_MANY_FD_LIMIT scale it (the
// figures in docs/benchmarks.md are from 100,000 partitions under a 20,000 limit).
func TestManyPartitionsUnderDescriptorLimit(t *testing.T) {
	parts := envInt(t, "GREGOR_MANY_PARTITIONS", 1500)
	limit := envInt(t, "GREGOR_MANY_FD_LIMIT", 384)
	deadline := startupDeadline + time.Duration(parts/25)*time.Second
	dir := t.TempDir()
	port := testutil.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	bin := testutil.Binary(t)
	run := func() *proc {
		t.Helper()
		p := startCmd(t, addr, "prlimit", fmt.Sprintf("--nofile=%d:%d", limit, limit), bin, "server",
			"--set", "log.dirs="+dir, "--set", "listeners=PLAINTEXT://"+addr, "--set", "auto.create.topics.enable=false")
		p.waitLog(logStarted, deadline)
		return p
	}
	p := run()
	w := watchFDs(p.cmd.Process.Pid)

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(parts+1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const topic = "many"
	ctx := ctxT(t, deadline)
	start := time.Now()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(deadline / time.Millisecond)) // 10,000 partitions a request on a busy disk
	for first := 0; first < parts; first += 10000 {          // Kafka's limit of partitions per request
		n := min(10000, parts-first)
		var err error
		if first == 0 {
			_, err = adm.CreateTopic(ctx, int32(n), 1, nil, topic)
		} else {
			var r kadm.CreatePartitionsResponses
			if r, err = adm.UpdatePartitions(ctx, first+n, topic); err == nil {
				err = r[topic].Err
			}
		}
		if err != nil {
			t.Fatalf("creating partitions %d..%d: %v", first, first+n, err)
		}
	}
	waitLeaders(t, cl, topic, parts, deadline)
	t.Logf("%d partitions created and led in %v", parts, time.Since(start))

	produce := func(round int) map[int32]string {
		t.Helper()
		want := make(map[int32]string, parts)
		rs := make([]*kgo.Record, 0, parts)
		for i := range parts {
			v := fmt.Sprintf("round %d partition %d", round, i)
			want[int32(i)] = v
			rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i), Value: []byte(v)})
		}
		start := time.Now()
		if err := cl.ProduceSync(ctxT(t, deadline), rs...).FirstErr(); err != nil {
			t.Fatalf("round %d: produce: %v (broker log tail: %s)", round, err, tail(p.log(), 20))
		}
		t.Logf("round %d: a record produced to each of %d partitions in %v", round, parts, time.Since(start))
		return want
	}
	rounds := []map[int32]string{produce(0)}
	check := func(when string) {
		t.Helper()
		start := time.Now()
		consumeEach(t, addr, topic, rounds, deadline)
		t.Logf("%s: every record of %d partitions read back in %v", when, parts, time.Since(start))
	}
	check("first start")
	peak := w.end()
	t.Logf("first start: peak %d descriptors (limit %d), RSS %d MiB", peak, limit, rssOf(p.cmd.Process.Pid)>>20)
	if peak >= limit {
		t.Fatalf("peak %d descriptors, at the limit %d", peak, limit)
	}

	// A clean restart, then kill -9 and recovery: every log is opened again, each time
	// under the limit.
	for _, how := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		start := time.Now()
		if err := p.cmd.Process.Signal(how); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(deadline); how == syscall.SIGTERM && code != 0 {
			t.Fatalf("exit code %d after SIGTERM:\n%s", code, tail(p.log(), 30))
		}
		t.Logf("%v: exited %v after the signal", how, time.Since(start))
		start = time.Now()
		p = run()
		w := watchFDs(p.cmd.Process.Pid)
		waitLeaders(t, cl, topic, parts, deadline)
		t.Logf("after %v: serving %d partitions %v after start", how, parts, time.Since(start))
		check(fmt.Sprintf("after %v", how))
		rounds = append(rounds, produce(len(rounds)))
		check(fmt.Sprintf("after %v and another round", how))
		peak := w.end()
		t.Logf("after %v: peak %d descriptors (limit %d), RSS %d MiB", how, peak, limit, rssOf(p.cmd.Process.Pid)>>20)
		if peak >= limit {
			t.Fatalf("after %v: peak %d descriptors, at the limit %d", how, peak, limit)
		}
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// waitLeaders waits until Metadata shows topic with parts partitions, each with a leader.
func waitLeaders(t *testing.T, cl *kgo.Client, topic string, parts int, d time.Duration) {
	t.Helper()
	adm := kadm.NewClient(cl)
	end := time.Now().Add(d)
	for {
		md, err := adm.Metadata(ctxT(t, 10*time.Second), topic)
		if err == nil {
			td := md.Topics[topic]
			led := 0
			for _, p := range td.Partitions {
				if p.Err == nil && p.Leader >= 0 {
					led++
				}
			}
			if td.Err == nil && led == parts {
				return
			}
			err = fmt.Errorf("%d of %d partitions led (topic error %v)", led, parts, td.Err)
		}
		if time.Now().After(end) {
			t.Fatalf("topic %s: %v", topic, err)
		}
		time.Sleep(50 * time.Millisecond) // polling interval of a condition with a deadline
	}
}

// consumeEach reads every partition of topic from the start and checks that partition p holds
// exactly rounds[0][p], rounds[1][p], ... in order. It reads consumeChunk partitions per
// client, each assigned directly: one client of 100,000 partitions spends its time on
// client-side bookkeeping, not on the broker.
func consumeEach(t *testing.T, addr, topic string, rounds []map[int32]string, d time.Duration) {
	t.Helper()
	const consumeChunk = 5000
	parts := len(rounds[0])
	ctx := ctxT(t, d)
	for first := 0; first < parts; first += consumeChunk {
		assign := map[int32]kgo.Offset{}
		for p := first; p < min(first+consumeChunk, parts); p++ {
			assign[int32(p)] = kgo.NewOffset().AtStart()
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}), kgo.FetchMaxPartitionBytes(1<<10))
		if err != nil {
			t.Fatal(err)
		}
		next := map[int32]int{}
		left := len(rounds) * len(assign)
		for left > 0 {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				cl.Close()
				t.Fatalf("partitions %d..: %d records not read back", first, left)
			}
			for _, e := range fs.Errors() {
				cl.Close()
				t.Fatalf("fetch %s/%d: %v", e.Topic, e.Partition, e.Err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				i := next[r.Partition]
				if i >= len(rounds) || string(r.Value) != rounds[i][r.Partition] {
					t.Errorf("partition %d offset %d: %q, want round %d's record", r.Partition, r.Offset, r.Value, i)
				}
				next[r.Partition] = i + 1
				left--
			})
			if t.Failed() {
				cl.Close()
				t.FailNow()
			}
		}
		cl.Close()
	}
}
