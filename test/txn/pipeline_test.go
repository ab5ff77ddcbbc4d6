//go:build linux

package txn

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The pipeline runs as a process of its own: the test binary re-executed with
// envMode set ("txn" or "plain"), so that kill -9 takes it down as it would an
// application.
const (
	envMode  = "GREGOR_TXN_PIPELINE"
	envSeeds = "GREGOR_TXN_SEEDS"
	envIn    = "GREGOR_TXN_IN"
	envOut   = "GREGOR_TXN_OUT"
	envGroup = "GREGOR_TXN_GROUP"
	envID    = "GREGOR_TXN_ID"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(envMode); mode != "" {
		os.Exit(runPipeline(mode))
	}
	os.Exit(m.Run())
}

// pipelineBatch is the most records one transaction copies, so that a burst of input takes
// many transactions and a kill lands inside one.
const pipelineBatch = 50

// runPipeline copies every record of the input topic to the same partition of the output
// topic until SIGTERM: in transactions that commit the group's offsets too ("txn", franz-go's
// GroupTransactSession, read_committed), or at least once ("plain": an idempotent producer
// and the consumer's auto-commit every second). It exits 1 on an error it does not recover
// from; the test restarts it.
func runPipeline(mode string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	seeds := strings.Split(os.Getenv(envSeeds), ",")
	in, out, group := os.Getenv(envIn), os.Getenv(envOut), os.Getenv(envGroup)
	common := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(in), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		// A killed member leaves the group within seconds, not the default 45.
		kgo.SessionTimeout(6 * time.Second), kgo.RebalanceTimeout(6 * time.Second), kgo.HeartbeatInterval(time.Second),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}
	var err error
	switch mode {
	case "producer":
		err = openTxnProducer(ctx, seeds, in, os.Getenv(envID))
	case "txn":
		err = txnPipeline(ctx, append(common, kgo.TransactionalID(os.Getenv(envID)), kgo.TransactionTimeout(10*time.Second),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets()), out)
	default:
		err = plainPipeline(ctx, append(common, kgo.AutoCommitInterval(time.Second)), out)
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "pipeline:", err)
		return 1
	}
	return 0
}

// openTxnProducer begins a transaction of id with a 2 s timeout, writes 5 records to topic
// and waits, the transaction open, to be killed.
func openTxnProducer(ctx context.Context, seeds []string, topic, id string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID(id), kgo.TransactionTimeout(2*time.Second),
		kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	for i := range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "open-%d", i)}).FirstErr(); err != nil {
			return err
		}
	}
	fmt.Fprintln(os.Stderr, "5 records written in an open transaction")
	<-ctx.Done()
	return nil
}

func copies(fs kgo.Fetches, out string) []*kgo.Record {
	var rs []*kgo.Record
	fs.EachRecord(func(r *kgo.Record) {
		rs = append(rs, &kgo.Record{Topic: out, Partition: r.Partition, Key: r.Key, Value: r.Value})
	})
	return rs
}

func txnPipeline(ctx context.Context, opts []kgo.Opt, out string) error {
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return err
	}
	defer sess.Close()
	for ctx.Err() == nil {
		fs := sess.PollRecords(ctx, pipelineBatch)
		if fs.IsClientClosed() {
			return errors.New("client closed")
		}
		fs.EachError(func(t string, p int32, err error) { fmt.Fprintf(os.Stderr, "fetch %s[%d]: %v\n", t, p, err) })
		rs := copies(fs, out)
		if len(rs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		perr := sess.ProduceSync(ctx, rs...).FirstErr()
		if perr != nil {
			fmt.Fprintln(os.Stderr, "produce:", perr)
		}
		committed, err := sess.End(ctx, kgo.TransactionEndTry(perr == nil))
		if err != nil {
			return fmt.Errorf("end: %w", err)
		}
		fmt.Fprintf(os.Stderr, "transaction of %d records: committed %v\n", len(rs), committed)
	}
	return nil
}

func plainPipeline(ctx context.Context, opts []kgo.Opt, out string) error {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, pipelineBatch)
		if fs.IsClientClosed() {
			return errors.New("client closed")
		}
		fs.EachError(func(t string, p int32, err error) { fmt.Fprintf(os.Stderr, "fetch %s[%d]: %v\n", t, p, err) })
		if rs := copies(fs, out); len(rs) > 0 {
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				return fmt.Errorf("produce: %w", err)
			}
		}
	}
	return nil
}

// pipelineProc runs the pipeline process and restarts it when it exits on its own.
type pipelineProc struct {
	t   testing.TB
	env []string
	log string

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	killed   bool // the exit is the test's doing
	restarts int  // exits of its own (an error it did not recover from)
	closed   bool
	once     bool // not restarted after an exit of its own
}

func startPipeline(t testing.TB, mode string, seeds []string, in, out, group, id string) *pipelineProc {
	return startProc(t, false, envMode+"="+mode, envSeeds+"="+strings.Join(seeds, ","), envIn+"="+in, envOut+"="+out,
		envGroup+"="+group, envID+"="+id)
}

// startProducerProc runs openTxnProducer as a process of its own.
func startProducerProc(t testing.TB, seeds []string, topic, id string) *pipelineProc {
	return startProc(t, true, envMode+"=producer", envSeeds+"="+strings.Join(seeds, ","), envIn+"="+topic, envID+"="+id)
}

func startProc(t testing.TB, once bool, env ...string) *pipelineProc {
	p := &pipelineProc{t: t, log: filepath.Join(t.TempDir(), "pipeline.log"), env: env, once: once}
	p.start()
	t.Cleanup(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.kill()
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("pipeline log (tail):\n%s", b)
		}
	})
	return p
}

func (p *pipelineProc) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Errorf("pipeline log: %v", err)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		p.t.Errorf("start pipeline: %v", err)
		return
	}
	done := make(chan struct{})
	p.cmd, p.done, p.killed = cmd, done, false
	go func() {
		err := cmd.Wait()
		f.Close()
		close(done)
		p.mu.Lock()
		again := !p.killed && !p.closed && !p.once
		if again {
			p.restarts++
			appendLog(p.log, fmt.Sprintf("--- pipeline exited (%v); restarting\n", err))
		}
		p.mu.Unlock()
		if again {
			p.start()
		}
	}()
}

func appendLog(path, msg string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprint(f, msg)
}

// kill sends SIGKILL and waits for the process to die.
func (p *pipelineProc) kill() {
	p.mu.Lock()
	p.killed = true
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.t.Logf("kill pipeline: %v", err)
	}
	<-done
}

// stop sends SIGTERM and waits for a clean exit.
func (p *pipelineProc) stop(timeout time.Duration) error {
	p.mu.Lock()
	p.killed = true
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-done:
		if cmd.ProcessState != nil && !cmd.ProcessState.Success() {
			return fmt.Errorf("pipeline exited: %v", cmd.ProcessState)
		}
		return nil
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("pipeline did not stop within %v", timeout)
	}
}

func (p *pipelineProc) ownRestarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}
