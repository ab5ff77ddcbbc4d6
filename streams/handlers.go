package streams

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ProductionResponse is what a ProductionExceptionHandler decides, Kafka Streams'
// ProductionExceptionHandlerResponse.
type ProductionResponse int

const (
	// ProductionFail stops processing: the next commit fails and Run's stream thread ends
	// with the error (then the UncaughtExceptionHandler decides).
	ProductionFail ProductionResponse = iota
	// ProductionContinue drops the record and goes on; App.SkippedProductions counts it.
	ProductionContinue
)

// ProducedRecord is a record the producer failed to send, as a ProductionExceptionHandler
// sees it.
type ProducedRecord struct {
	Topic      string
	Partition  int32
	Key, Value []byte
	Timestamp  time.Time
}

// ProductionExceptionHandler decides about a record whose send failed after the producer's
// retries (default.production.exception.handler); nil fails, as Kafka Streams'
// DefaultProductionExceptionHandler. It runs on the producer's goroutine and must not block.
//
// Under exactly_once_v2 it is not consulted: a failed send fails the open transaction, which
// cannot be committed without the record, so the error stops the stream thread.
type ProductionExceptionHandler func(r ProducedRecord, err error) ProductionResponse

// StreamThreadExceptionResponse is what an UncaughtExceptionHandler decides, Kafka
// Streams' StreamThreadExceptionResponse (KIP-671).
type StreamThreadExceptionResponse int

const (
	// ReplaceThread closes the failed stream thread without committing (its tasks are
	// closed dirty, their uncommitted work is redone) and starts a new one: a new group
	// member with a new client, to which the group assigns tasks again.
	ReplaceThread StreamThreadExceptionResponse = iota
	// ShutdownClient stops this instance: Run returns the error. The default.
	ShutdownClient
	// ShutdownApplication stops every instance of the application.id: this instance rejoins
	// the group asking for shutdown, the assignment tells every member, and each one's Run
	// returns (this one's with the error, the others' with ErrApplicationShutdown).
	ShutdownApplication
)

// UncaughtExceptionHandler decides what follows an error that ended the stream thread
// (Kafka Streams' StreamsUncaughtExceptionHandler); nil is ShutdownClient.
type UncaughtExceptionHandler func(err error) StreamThreadExceptionResponse

// ErrApplicationShutdown is what Run returns when another instance of the application
// asked every instance to shut down (ShutdownApplication).
var ErrApplicationShutdown = errors.New("streams: an instance requested the shutdown of the application")

// shutdownWait bounds how long a ShutdownApplication request waits for the group to carry
// it: the rebalance it starts takes at most the group's rebalance timeout (60s by default).
const shutdownWait = time.Minute

// production is the emit callback's handling of a failed send: true when the record is
// dropped (the handler said continue), false when the failure stands.
func (a *App) production(r *kgo.Record, err error) bool {
	h := a.cfg.ProductionExceptionHandler
	if h == nil || a.cfg.Guarantee == ExactlyOnceV2 {
		return false
	}
	if h(ProducedRecord{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}, err) != ProductionContinue {
		return false
	}
	a.log.Warn("streams: dropping a record the producer could not send", "topic", r.Topic, "err", err)
	a.produce.Lock()
	a.produce.skipped++
	a.produce.Unlock()
	return true
}

// SkippedProductions is the number of records this instance dropped because their send
// failed and the ProductionExceptionHandler said to continue, since Run started.
func (a *App) SkippedProductions() int64 {
	a.produce.Lock()
	defer a.produce.Unlock()
	return a.produce.skipped
}

// ThreadsReplaced is how many times the UncaughtExceptionHandler's ReplaceThread replaced
// the stream thread since Run started.
func (a *App) ThreadsReplaced() int64 { return a.replaced.Load() }

// threads runs stream threads one after the other, as the UncaughtExceptionHandler decides
// after each failure, until one ends cleanly or Run should return.
func (a *App) threads(ctx context.Context) error {
	for {
		err := a.runThread(ctx)
		a.resetThread()
		if err == nil || ctx.Err() != nil || errors.Is(err, ErrApplicationShutdown) {
			return err
		}
		resp := ShutdownClient
		if h := a.cfg.UncaughtExceptionHandler; h != nil {
			resp = h(err)
		}
		switch resp {
		case ReplaceThread:
			a.log.Warn("streams: replacing the stream thread", "err", err)
			a.replaced.Add(1)
		case ShutdownApplication:
			a.log.Error("streams: requesting the application's shutdown", "err", err)
			if rerr := a.requestShutdown(ctx); rerr != nil {
				return errors.Join(err, rerr)
			}
			return err
		default:
			return err
		}
	}
}

// runThread is one stream thread, from its client's creation to its close. An error other
// than a clean stop leaves the tasks closed without a commit.
func (a *App) runThread(ctx context.Context) error {
	if a.cfg.Guarantee == ExactlyOnceV2 {
		return a.runExactlyOnce(ctx)
	}
	cl, err := kgo.NewClient(a.clientOpts()...)
	if err != nil {
		return fmt.Errorf("streams: client: %w", err)
	}
	a.client = cl
	err = a.loop(ctx, cl.PollRecords, cl.AllowRebalance, nil, a.commitAndCheckpoint)
	if errors.Is(err, errStopping) {
		err = nil // every polled record was processed: finish commits them
	}
	a.dirtyUnless(err)
	ferr := a.finish(cl, false)
	cl.CloseAllowingRebalance()
	return errors.Join(err, ferr)
}

// dirtyUnless marks the thread failed when err is a failure (not a clean stop nor the
// application's shutdown), so neither finish nor a revocation commits.
func (a *App) dirtyUnless(err error) {
	if err == nil || errors.Is(err, ErrApplicationShutdown) {
		return
	}
	a.mu.Lock()
	if a.mu.err == nil {
		a.mu.err = err
	}
	a.mu.Unlock()
}

// resetThread forgets what a finished stream thread held, for the next one.
func (a *App) resetThread() {
	a.mu.Lock()
	a.mu.err = nil
	a.mu.rebuild = false
	clear(a.mu.assigned)
	a.mu.Unlock()
	a.produce.Lock()
	a.produce.err = nil
	a.produce.Unlock()
	a.client = nil
	a.group.Lock()
	a.group.assigned = false
	a.group.Unlock()
	a.standby.stop()
}

// requestShutdown joins the group with a member whose subscription asks for the
// application's shutdown, and waits until the assignment carries the request back (every
// member has then been told), or shutdownWait passes.
func (a *App) requestShutdown(ctx context.Context) error {
	a.shutdownRequested.Store(true)
	opts := append(a.clientOpts(), kgo.OnPartitionsAssigned(noCallback), kgo.OnPartitionsRevoked(noCallback), kgo.OnPartitionsLost(noCallback))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("streams: shutdown client: %w", err)
	}
	defer cl.CloseAllowingRebalance()
	wctx, cancel := context.WithTimeout(ctx, shutdownWait)
	defer cancel()
	for !a.shutdownApplication.Load() {
		pctx, pcancel := context.WithTimeout(wctx, 100*time.Millisecond)
		cl.PollRecords(pctx, 1) // records are not processed: the member only carries the request
		pcancel()
		cl.AllowRebalance()
		if wctx.Err() != nil {
			return fmt.Errorf("streams: the shutdown request was not carried by the group: %w", wctx.Err())
		}
	}
	return nil
}

func noCallback(context.Context, *kgo.Client, map[string][]int32) {}
