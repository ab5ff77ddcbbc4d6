// Package startup runs the real gregor binary through start-up and shutdown: configuration
// errors stop it at once with a message naming the key, a Kafka-style properties file
// configures it, SIGTERM shuts it down cleanly (the next start skips recovery), and after
// kill -9 the next start recovers and serves every acknowledged record.
package startup

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/storage"
	"github.com/gregor-project/gregor/internal/testutil"
)

// Log lines of the storage package this file relies on.
const (
	logStarted        = "gregor started"
	logSkipRecovery   = "clean shutdown marker found: skipping log recovery"
	logRecoverAll     = "no clean shutdown marker: recovering every log past its recovery point"
	logRecoverOneLog  = "recovering log after an unclean shutdown"
	logShutDownClean  = "shut down cleanly"
	startupDeadline   = 30 * time.Second
	badConfigDeadline = 10 * time.Second
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// proc is one run of `gregor server` with every stderr line kept.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	addr   string
	exited chan struct{} // closed once the process has exited; err is set then
	err    error

	mu    sync.Mutex
	lines []string
	grew  chan struct{} // closed and replaced whenever a line arrives
}

// start runs the binary with args and returns once it is running (not necessarily serving).
func start(t *testing.T, addr string, args ...string) *proc {
	t.Helper()
	return startCmd(t, addr, testutil.Binary(t), args...)
}

// startCmd is start for any command (a shell that sets limits, then execs the binary).
func startCmd(t *testing.T, addr, name string, args ...string) *proc {
	t.Helper()
	return startWith(t, addr, nil, name, args...)
}

// startWith is startCmd with a function called, on the goroutine reading stderr, with each
// line as soon as it is read.
func startWith(t *testing.T, addr string, onLine func(p *proc, line string), name string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, addr: addr, exited: make(chan struct{}), grew: make(chan struct{})}
	if slices.Contains(args, "server") {
		// A port of its own for the http.listener: other tests' brokers share the machine.
		args = append(slices.Clone(args), "--set", "http.listener=127.0.0.1:0")
	}
	p.cmd = exec.Command(name, args...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = p.cmd.Stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if os.Getenv("GREGOR_TEST_LOG") != "" {
				fmt.Fprintln(os.Stderr, "[gregor]", sc.Text())
			}
			if onLine != nil {
				onLine(p, sc.Text())
			}
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.grew)
			p.grew = make(chan struct{})
			p.mu.Unlock()
		}
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Logf("kill: %v", err)
			}
			<-p.exited
		}
	})
	return p
}

// server starts `gregor server` on a free port with data in dir, plus extra arguments, and
// waits until it serves.
func server(t *testing.T, dir string, port int, extra ...string) *proc {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args := append([]string{"server", "--set", "log.dirs=" + dir, "--set", "listeners=PLAINTEXT://" + addr}, extra...)
	p := start(t, addr, args...)
	p.waitLog(logStarted, startupDeadline)
	return p
}

// log returns every stderr line so far.
func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// hasLog reports whether a stderr line contains s.
func (p *proc) hasLog(s string) bool { return strings.Contains(p.log(), s) }

// waitLog waits until a stderr line contains s; it fails if the process exits first.
func (p *proc) waitLog(s string, d time.Duration) {
	p.t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		found := strings.Contains(strings.Join(p.lines, "\n"), s)
		grew := p.grew
		p.mu.Unlock()
		if found {
			return
		}
		select {
		case <-grew:
		case <-p.exited:
			// The last lines may have been read just before the exit.
			if p.hasLog(s) {
				return
			}
			p.t.Fatalf("gregor exited (%v) before logging %q:\n%s", p.err, s, p.log())
		case <-deadline.C:
			p.t.Fatalf("gregor did not log %q within %v:\n%s", s, d, p.log())
		}
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(d):
		p.t.Fatalf("gregor still running after %v:\n%s", d, p.log())
	}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &ee):
		return ee.ExitCode()
	}
	p.t.Fatalf("wait: %v", p.err)
	return -1
}

func TestBadConfigurationStopsStartUp(t *testing.T) {
	dir := t.TempDir()
	props := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	base := []string{"server", "--set", "log.dirs=" + filepath.Join(dir, "data"), "--set", "listeners=PLAINTEXT://127.0.0.1:0"}
	cases := []struct {
		name string
		args []string
		want string // the message must contain it
	}{
		{"unknown key", []string{"--set", "no.such.key=1"}, "no.such.key"},
		{"invalid integer", []string{"--set", "log.segment.bytes=abc"}, "log.segment.bytes"},
		{"out of range", []string{"--set", "num.partitions=0"}, "num.partitions"},
		{"invalid boolean", []string{"--set", "auto.create.topics.enable=perhaps"}, "auto.create.topics.enable"},
		{"malformed --set", []string{"--set", "log.segment.bytes"}, "log.segment.bytes"},
		{"empty key", []string{"--set", "=5"}, "=5"},
		{"missing config file", []string{"--config", filepath.Join(dir, "missing.properties")}, "missing.properties"},
		{"unknown key in the file", []string{"--config", props("unknown.properties", "# Kafka style\nnode.id=1\nlog.retention.hourz=5\n")}, "log.retention.hourz"},
		{"invalid value in the file", []string{"--config", props("invalid.properties", "message.max.bytes = lots\n")}, "message.max.bytes"},
		{"unknown flag", []string{"--sett", "x=1"}, "--sett"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			begin := time.Now()
			p := start(t, "", append(append([]string(nil), base...), c.args...)...)
			code := p.wait(badConfigDeadline)
			took := time.Since(begin)
			out := p.log()
			if code == 0 {
				t.Fatalf("exit code 0, want non-zero:\n%s", out)
			}
			if !strings.Contains(out, c.want) {
				t.Fatalf("message does not name %q:\n%s", c.want, out)
			}
			if strings.Contains(out, logStarted) {
				t.Fatalf("gregor started despite the bad configuration:\n%s", out)
			}
			t.Logf("exit %d after %v: %s", code, took.Round(time.Millisecond), strings.TrimSpace(out))
		})
	}
	// Nothing was formatted: a configuration error stops start-up before the log dir is used.
	if _, err := os.Stat(filepath.Join(dir, "data", "meta.properties")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused start-up formatted the log dir: %v", err)
	}
}

// A Kafka-style server.properties (comments, blanks around separators, a ':' separator, a
// continued line) configures the broker; --set overrides the file.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	port := testutil.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	file := filepath.Join(dir, "server.properties")
	body := fmt.Sprintf(`############################# Server Basics #############################
# The id of the broker.
node.id=7

############################# Socket Server Settings #############################
listeners = PLAINTEXT://%s
! a Java-properties comment too

############################# Log Basics #############################
log.dirs=%s
num.partitions : 3
log.segment.bytes=\
    2097152
auto.create.topics.enable=true
message.max.bytes=500000
`, addr, filepath.Join(dir, "data"))
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, addr, "server", "--config", file, "--set", "message.max.bytes=600000")
	p.waitLog(logStarted, startupDeadline)

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("auto"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxT(t, 30*time.Second)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce with auto-creation: %v", err)
	}
	adm := kadm.NewClient(cl)
	td, err := adm.ListTopics(ctx, "auto")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(td["auto"].Partitions); n != 3 {
		t.Fatalf("auto-created topic has %d partitions, want num.partitions=3 from the file", n)
	}
	if id := td["auto"].Partitions[0].Leader; id != 7 {
		t.Fatalf("leader %d, want node.id=7 from the file", id)
	}
	rc, err := adm.DescribeBrokerConfigs(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"log.segment.bytes": "2097152", "num.partitions": "3", "message.max.bytes": "600000"}
	for _, r := range rc {
		for _, c := range r.Configs {
			if w, ok := want[c.Key]; ok {
				if c.MaybeValue() != w || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
					t.Errorf("%s = %q (source %v), want %q from the file", c.Key, c.MaybeValue(), c.Source, w)
				}
				delete(want, c.Key)
			}
		}
	}
	if len(want) > 0 {
		t.Fatalf("configs not described: %v", want)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(startupDeadline); code != 0 {
		t.Fatalf("exit code %d after SIGTERM:\n%s", code, p.log())
	}
}

// produceAcked produces n records to topic (acks=all) and returns their values.
func produceAcked(t *testing.T, addr, topic string, n int) [][]byte {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxT(t, 30*time.Second)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	var vals [][]byte
	var rs []*kgo.Record
	for i := 0; i < n; i++ {
		v := []byte(fmt.Sprintf("%s-%05d", topic, i))
		vals = append(vals, v)
		rs = append(rs, &kgo.Record{Key: []byte{byte(i)}, Value: v})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return vals
}

// consumeAll reads topic from the start until it has every value in want, and fails on any
// value it does not expect or reads twice.
func consumeAll(t *testing.T, addr, topic string, want [][]byte) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	missing := map[string]bool{}
	for _, v := range want {
		missing[string(v)] = true
	}
	ctx := ctxT(t, 30*time.Second)
	for len(missing) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d of %d acknowledged records missing", len(missing), len(want))
		}
		for _, e := range fs.Errors() {
			t.Fatalf("fetch: %v", e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !missing[string(r.Value)] {
				t.Fatalf("unexpected or duplicated record %q at %d/%d", r.Value, r.Partition, r.Offset)
			}
			delete(missing, string(r.Value))
		})
	}
}

func readCheckpoint(t *testing.T, dir string) map[storage.TopicPartition]int64 {
	t.Helper()
	m, err := storage.ReadCheckpoint(storage.OS, filepath.Join(dir, storage.RecoveryPointCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSigtermShutsDownCleanly(t *testing.T) {
	dir := t.TempDir()
	port := testutil.FreePort(t)
	p := server(t, dir, port)
	if _, err := os.Stat(filepath.Join(dir, storage.CleanShutdownFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("clean-shutdown marker present while running: %v", err)
	}
	vals := produceAcked(t, p.addr, "clean", 500)

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(startupDeadline); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0:\n%s", code, p.log())
	}
	if !p.hasLog(logShutDownClean) {
		t.Fatalf("no %q line:\n%s", logShutDownClean, p.log())
	}
	if _, err := os.Stat(filepath.Join(dir, storage.CleanShutdownFile)); err != nil {
		t.Fatalf("no clean-shutdown marker after SIGTERM: %v", err)
	}
	// Flushed: the recovery points reach the log end of both partitions.
	cp := readCheckpoint(t, dir)
	if total := cp[storage.TopicPartition{Topic: "clean", Partition: 0}] + cp[storage.TopicPartition{Topic: "clean", Partition: 1}]; total != int64(len(vals)) {
		t.Fatalf("recovery points %v sum to %d, want every one of the %d records flushed", cp, total, len(vals))
	}

	p2 := server(t, dir, port)
	if !p2.hasLog(logSkipRecovery) || p2.hasLog(logRecoverAll) || p2.hasLog(logRecoverOneLog) {
		t.Fatalf("start after a clean shutdown must skip recovery:\n%s", p2.log())
	}
	if _, err := os.Stat(filepath.Join(dir, storage.CleanShutdownFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("clean-shutdown marker not removed at start (a crash now would skip recovery): %v", err)
	}
	consumeAll(t, p2.addr, "clean", vals)
	if err := p2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p2.wait(startupDeadline); code != 0 {
		t.Fatalf("second SIGTERM: exit code %d:\n%s", code, p2.log())
	}
}

// A supervisor may stop the broker the moment it reports that it started: that SIGTERM must
// still shut it down cleanly (the handler is installed before the line is logged).
func TestSigtermTheMomentItStarted(t *testing.T) {
	for i := 0; i < 20; i++ {
		dir := t.TempDir()
		addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
		p := startWith(t, addr, func(p *proc, line string) {
			if strings.Contains(line, logStarted) {
				if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Errorf("SIGTERM: %v", err)
				}
			}
		}, testutil.Binary(t), "server", "--set", "log.dirs="+dir, "--set", "listeners=PLAINTEXT://"+addr)
		if code := p.wait(startupDeadline); code != 0 || !p.hasLog(logShutDownClean) {
			t.Fatalf("run %d: SIGTERM right after start: exit code %d:\n%s", i, code, p.log())
		}
		if _, err := os.Stat(filepath.Join(dir, storage.CleanShutdownFile)); err != nil {
			t.Fatalf("run %d: no clean-shutdown marker: %v", i, err)
		}
	}
}

func TestKill9ThenRecovery(t *testing.T) {
	dir := t.TempDir()
	port := testutil.FreePort(t)
	p := server(t, dir, port)
	vals := produceAcked(t, p.addr, "crash", 500)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(startupDeadline)
	if _, err := os.Stat(filepath.Join(dir, storage.CleanShutdownFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("clean-shutdown marker after kill -9: %v", err)
	}

	p2 := server(t, dir, port)
	if !p2.hasLog(logRecoverAll) || !p2.hasLog(logRecoverOneLog) || p2.hasLog(logSkipRecovery) {
		t.Fatalf("start after kill -9 must recover:\n%s", p2.log())
	}
	consumeAll(t, p2.addr, "crash", vals)
	// And the recovered broker goes on taking records.
	more := produceMore(t, p2.addr, "crash")
	consumeAll(t, p2.addr, "crash", append(vals, more))
}

func produceMore(t *testing.T, addr, topic string) []byte {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	v := []byte("after recovery")
	if err := cl.ProduceSync(ctxT(t, 30*time.Second), &kgo.Record{Value: v}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(v)
}
