// Package extest runs an example program as its user would, for the examples' tests: it
// builds the program, starts it against a broker with flags, stops it with SIGTERM
// expecting a clean exit, and reads its output topics with a plain Kafka client.
//
// A program still running when its test ends is killed (t.Cleanup). Waits have a deadline
// (a minute) and fail the test with the program's stderr.
package extest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Timeout bounds every wait: for output, for an exit after SIGTERM.
const Timeout = time.Minute

// Build compiles the example in the test's working directory (its package) and returns the
// binary's path.
func Build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "example")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// Program is a running example.
type Program struct {
	cmd    *exec.Cmd
	stderr lockedBuffer
	exited chan struct{} // closed when the program has exited; err is then its status
	err    error
}

// Start runs bin with args; the program is killed when the test ends unless Stop ended it.
func Start(t *testing.T, bin string, args ...string) *Program {
	t.Helper()
	p := &Program{cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	// The program's default state directory (<temp dir>/gregor-streams) is the test's own.
	p.cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			if err := p.cmd.Process.Kill(); err != nil {
				t.Errorf("kill: %v", err)
			}
			<-p.exited
		}
	})
	return p
}

// Stderr is what the program wrote to stderr so far.
func (p *Program) Stderr() string { return p.stderr.String() }

// Stop sends SIGTERM and fails the test unless the program exits with status 0.
func (p *Program) Stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
		if p.err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", p.err, p.Stderr())
		}
	case <-time.After(Timeout):
		t.Fatalf("no exit %v after SIGTERM\n%s", Timeout, p.Stderr())
	}
}

// Client is a client of the broker at addr, closed when the test ends. Keyed records go to
// the partition murmur2 of the key picks, as with Kafka's default partitioner.
func Client(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl := dial(t, addr, opts...)
	t.Cleanup(cl.Close)
	return cl
}

func dial(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// CreateTopics creates topics of partitions partitions (replication factor 1) with configs.
func CreateTopics(t *testing.T, cl *kgo.Client, partitions int32, configs map[string]*string, topics ...string) {
	t.Helper()
	for _, topic := range topics {
		res, err := kadm.NewClient(cl).CreateTopic(context.Background(), partitions, 1, configs, topic)
		if err == nil {
			err = res.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}
}

// Produce writes rs, in order, and fails the test unless every one is acknowledged.
func Produce(t *testing.T, cl *kgo.Client, rs ...*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// Await reads topic from its start (read_committed), passing each record to apply, until done is true; it
// fails the test (with describe's account and p's stderr) if that takes longer than
// Timeout or the program exits first.
func Await(t *testing.T, addr, topic string, p *Program, apply func(*kgo.Record), done func() bool, describe func() string) {
	t.Helper()
	cl := dial(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	go func() {
		select {
		case <-p.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			select {
			case <-p.exited:
				t.Fatalf("%s: program exited (%v) with %s\nprogram stderr:\n%s", topic, p.err, describe(), p.Stderr())
			default:
			}
			t.Fatalf("%s: %s\nprogram stderr:\n%s", topic, describe(), p.Stderr())
		}
		fs.EachRecord(apply)
	}
}

// ReadAll returns every committed record of topic, in offset order per partition, once
// the program writing it has exited: it appends an end mark (a record with header
// extest-end) to every partition and reads up to the marks with read_committed, so records
// written at-least-once and in transactions are read alike.
func ReadAll(t *testing.T, addr, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	cl := dial(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	td, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err == nil {
		err = td.Error()
	}
	if err != nil {
		t.Fatalf("describe %s: %v", topic, err)
	}
	need := map[int32]bool{} // partitions whose end mark is still to read
	var marks []*kgo.Record
	for _, p := range td[topic].Partitions.Numbers() {
		need[p] = true
		marks = append(marks, &kgo.Record{Topic: topic, Partition: p, Headers: []kgo.RecordHeader{{Key: endMark}}})
	}
	if err := cl.ProduceSync(ctx, marks...).FirstErr(); err != nil {
		t.Fatalf("end marks on %s: %v", topic, err)
	}
	rd := dial(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	defer rd.Close()
	var out []*kgo.Record
	for len(need) > 0 {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: end marks of partitions %v not read", topic, need)
		}
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case !need[r.Partition]:
			case len(r.Headers) == 1 && r.Headers[0].Key == endMark:
				delete(need, r.Partition)
			default:
				out = append(out, r)
			}
		})
	}
	return out
}

// endMark is the header of ReadAll's end marks.
const endMark = "extest-end"

// lockedBuffer is a bytes.Buffer safe to read while the program writes to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
