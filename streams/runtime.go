package streams

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Guarantee is a processing guarantee, by Kafka Streams' processing.guarantee names.
type Guarantee string

const (
	// AtLeastOnce commits input offsets only after the records their processing produced
	// are acknowledged: after a crash some input is processed again, none is lost.
	AtLeastOnce Guarantee = "at_least_once"
	// ExactlyOnceV2 (KIP-447) produces and commits input offsets in one transaction per
	// commit interval, so read_committed consumers see each input's effect exactly once.
	ExactlyOnceV2 Guarantee = "exactly_once_v2"
)

// DeserializationHandler is what to do with a record that does not deserialize, by Kafka
// Streams' handler names.
type DeserializationHandler int

const (
	// LogAndFail stops processing (Run returns the error).
	LogAndFail DeserializationHandler = iota
	// LogAndContinue logs the error and skips the record (App.SkippedRecords counts it).
	LogAndContinue
)

// Config configures an application instance.
type Config struct {
	// ApplicationID is application.id: the consumer group, the transactional id prefix
	// and the prefix of internal topics.
	ApplicationID string
	// Brokers are the bootstrap servers, host:port.
	Brokers []string
	// Guarantee is at-least-once when empty.
	Guarantee Guarantee
	// CommitInterval is commit.interval.ms: how often processed offsets are committed
	// (30s at-least-once and 100ms exactly-once when zero, Kafka Streams' defaults).
	CommitInterval time.Duration
	// TransactionTimeout is transaction.timeout.ms under exactly_once_v2 (10s when zero, as
	// Kafka Streams): how long the cluster keeps a crashed instance's open transaction before
	// aborting it, and so how long its tasks' new owner waits for their committed state.
	TransactionTimeout time.Duration
	// SessionTimeout is the group's session.timeout.ms (45s when zero, Kafka's default): how
	// long a crashed instance keeps its tasks.
	SessionTimeout time.Duration
	// ReplicationFactor of the internal topics; 0 is -1, the broker's default.
	ReplicationFactor int16
	// DeserializationExceptionHandler decides about a source record whose key or value does
	// not deserialize (default.deserialization.exception.handler): LogAndFail (the default)
	// stops Run with the error, LogAndContinue logs it and skips the record.
	DeserializationExceptionHandler DeserializationHandler
	// StateDir is state.dir: persistent stores live in <StateDir>/<ApplicationID>/<task>/
	// (filepath.Join(os.TempDir(), "gregor-streams") when empty, as Kafka Streams'
	// /tmp/kafka-streams). Give every instance sharing a machine its own, or let them
	// share: a task directory is locked while an instance uses it.
	StateDir string
	// DefaultDSLStore is default.dsl.store: the type of the stores whose operator does not
	// choose one (WithStoreType). Persistent when empty.
	DefaultDSLStore StoreType
	// ProductionExceptionHandler decides about a record the producer failed to send
	// (default.production.exception.handler); nil fails.
	ProductionExceptionHandler ProductionExceptionHandler
	// UncaughtExceptionHandler decides what follows an error that ended the stream thread:
	// replace the thread, shut this instance down (nil: the default) or the application.
	UncaughtExceptionHandler UncaughtExceptionHandler
	// ApplicationServer is application.server, host:port: where this instance serves
	// interactive queries. Every instance learns the others' through the group assignment
	// (AllMetadata, MetadataForKey). Empty: this instance is not listed.
	ApplicationServer string
	// NumStandbyReplicas is num.standby.replicas (0 by default): how many other instances
	// keep a warm copy of each stateful task's stores by reading its changelog, so the task
	// moves there with only the changelog's tail to restore.
	NumStandbyReplicas int
	// StateRestoreListener, when set, hears of every changelog restore (Kafka Streams'
	// global state restore listener). It is called on the stream thread.
	StateRestoreListener StateRestoreListener
	// Logger logs rebalances and restores; nil discards.
	Logger *slog.Logger
	// ClientOpts are added to every client the application makes (TLS, SASL, ...).
	ClientOpts []kgo.Opt
}

// App is one instance of a streams application: a member of the application.id's consumer
// group, running the tasks of the partitions assigned to it on one stream thread.
//
// Lock rules: mu guards the tasks and is held while records are processed and while the
// group's assignment callbacks change the tasks, so a task never changes hands mid-batch.
type App struct {
	topo   *topology
	cfg    Config
	log    *slog.Logger
	full   map[string]string // full topic name -> logical name, for the topology's sources
	topics []string          // full names of every source topic

	mu struct {
		sync.Mutex
		tasks map[TaskID]*task
		err   error // the first error of a callback, ends Run
		// assigned is the group's current assignment to this member.
		assigned map[string]map[int32]bool
		// rebuild asks the exactly-once loop to abort the open transaction and remake every
		// task from the committed changelogs before processing again: the assignment
		// changed, or a transaction aborted and the stores hold its effects.
		rebuild bool
		// dropped and skipped count the late and the undeserializable records of tasks
		// already closed.
		dropped, skipped int64
	}
	partitions sync.Map // full topic name -> partition count (int)
	// acked is the last acknowledged offset this App wrote to each changelog partition
	// (topicPartition -> *atomic.Int64), for checkpoints.
	acked sync.Map

	client  *kgo.Client
	admin   *kadm.Client
	produce struct {
		sync.Mutex
		err     error // the first failed produce since the last commit
		skipped int64 // failed produces the ProductionExceptionHandler dropped
	}

	query   queryState  // tasks open to interactive queries
	group   groupState  // what the last assignment said
	standby *standbys   // warm copies of standby tasks
	running atomic.Bool // Run is between its start and its return
	// shutdownRequested is set when this instance asks the application to shut down;
	// shutdownApplication when an assignment carried such a request.
	shutdownRequested, shutdownApplication atomic.Bool
	replaced                               atomic.Int64 // stream threads replaced

	runMu  sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	closed bool // Close was called: a Run not yet started returns at once
}

// New checks the topology and the configuration; Run starts processing.
func New(b *Builder, cfg Config) (*App, error) {
	t, err := b.build()
	if err != nil {
		return nil, err
	}
	if cfg.ApplicationID == "" {
		return nil, errors.New("streams: Config.ApplicationID is required")
	}
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("streams: Config.Brokers is required")
	}
	switch cfg.Guarantee {
	case "":
		cfg.Guarantee = AtLeastOnce
	case AtLeastOnce, ExactlyOnceV2:
	default:
		return nil, fmt.Errorf("streams: unknown processing guarantee %q", cfg.Guarantee)
	}
	if cfg.CommitInterval <= 0 {
		cfg.CommitInterval = 30 * time.Second
		if cfg.Guarantee == ExactlyOnceV2 {
			cfg.CommitInterval = 100 * time.Millisecond
		}
	}
	if cfg.TransactionTimeout <= 0 {
		cfg.TransactionTimeout = 10 * time.Second
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 45 * time.Second
	}
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(os.TempDir(), "gregor-streams")
	}
	if cfg.DefaultDSLStore == "" {
		cfg.DefaultDSLStore = Persistent
	}
	if err := cfg.DefaultDSLStore.check(); err != nil {
		return nil, err
	}
	for _, d := range b.stores {
		if d.storeType != "" {
			if err := d.storeType.check(); err != nil {
				return nil, fmt.Errorf("streams: store %q: %w", d.name, err)
			}
		}
	}
	if cfg.ReplicationFactor == 0 {
		cfg.ReplicationFactor = -1
	}
	if cfg.ApplicationServer != "" {
		if _, err := parseHostInfo(cfg.ApplicationServer); err != nil {
			return nil, err
		}
	}
	if cfg.NumStandbyReplicas < 0 {
		return nil, fmt.Errorf("streams: Config.NumStandbyReplicas %d is negative", cfg.NumStandbyReplicas)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &App{topo: t, cfg: cfg, log: log, full: map[string]string{}}
	t.state = &stateDirectory{root: filepath.Join(cfg.StateDir, cfg.ApplicationID), defaultStore: cfg.DefaultDSLStore,
		eos: cfg.Guarantee == ExactlyOnceV2, log: log}
	for logical := range t.byTopic {
		f := t.topicName(cfg.ApplicationID, logical)
		a.full[f] = logical
		a.topics = append(a.topics, f)
	}
	a.mu.tasks = map[TaskID]*task{}
	a.mu.assigned = map[string]map[int32]bool{}
	a.query.tasks = map[TaskID]*task{}
	a.query.restoring = map[TaskID]bool{}
	a.standby = newStandbys(a)
	return a, nil
}

// Describe is the topology's description (Builder.Describe).
func (a *App) Describe() string { return a.topo.b.Describe() }

// Run creates the internal topics, joins the group and processes until ctx is done or
// Close is called (then it commits what was processed, leaves the group and returns nil),
// or until an error stops processing (returned).
func (a *App) Run(ctx context.Context) error {
	a.runMu.Lock()
	if a.done != nil {
		a.runMu.Unlock()
		return errors.New("streams: Run called twice")
	}
	if a.closed {
		a.runMu.Unlock()
		return nil
	}
	ctx, a.cancel = context.WithCancel(ctx)
	a.done = make(chan struct{})
	a.runMu.Unlock()
	defer close(a.done)
	defer a.cancel()

	admCl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.cfg.Brokers...)}, a.cfg.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("streams: admin client: %w", err)
	}
	defer admCl.Close()
	a.admin = kadm.NewClient(admCl)
	if err := a.createInternalTopics(ctx); err != nil {
		return err
	}
	stopGlobal, err := a.startGlobal(ctx)
	if err != nil {
		return err
	}
	defer stopGlobal()
	a.running.Store(true)
	defer a.running.Store(false)
	sctx, stopStandby := context.WithCancel(ctx)
	standbyDone := make(chan struct{})
	go func() {
		defer close(standbyDone)
		a.standby.run(sctx)
	}()
	defer func() {
		stopStandby()
		<-standbyDone
	}()
	return a.threads(ctx)
}

// Close stops Run and waits for it to return; a Run that has not started yet returns nil
// at once when it does, so `go app.Run(ctx)` followed by Close never leaves it running.
func (a *App) Close() error {
	a.runMu.Lock()
	a.closed = true
	cancel, done := a.cancel, a.done
	a.runMu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	<-done
	return nil
}

// clientOpts are the consumer-group client's options, the same for both guarantees.
func (a *App) clientOpts() []kgo.Opt {
	o := []kgo.Opt{
		kgo.SeedBrokers(a.cfg.Brokers...),
		kgo.ConsumerGroup(a.cfg.ApplicationID),
		kgo.ConsumeTopics(a.topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// The streams assignor gives a task's partitions to one member (assignor.go).
		kgo.Balancers(taskAssignor{a}),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(a.assigned),
		kgo.OnPartitionsRevoked(a.revoked),
		kgo.OnPartitionsLost(a.lost),
		kgo.RecordPartitioner(partitioner{}),
		kgo.ProducerLinger(5 * time.Millisecond),
		kgo.SessionTimeout(a.cfg.SessionTimeout),
	}
	return append(o, a.cfg.ClientOpts...)
}

// loop is the stream thread: poll, process every polled record in its task, fire
// wall-clock punctuators, commit when the interval has passed, allow a rebalance. before,
// when not nil, runs after each poll and may ask for the polled records to be dropped (they
// are fetched again from the committed offsets).
func (a *App) loop(ctx context.Context, poll func(context.Context, int) kgo.Fetches, allow func(),
	before func(context.Context) (skip bool, err error), commit func(context.Context) error) error {
	lastCommit := time.Now()
	for ctx.Err() == nil {
		if a.shutdownApplication.Load() {
			return ErrApplicationShutdown
		}
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		fs := poll(pctx, 1000)
		cancel()
		if fs.IsClientClosed() {
			return nil
		}
		var ferr error
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && ferr == nil {
				ferr = fmt.Errorf("streams: fetch %s[%d]: %w", topic, p, err)
			}
		})
		if ferr != nil {
			a.log.Warn("streams: fetch error", "err", ferr)
		}
		if before != nil {
			skip, err := before(ctx)
			if err != nil {
				return stopping(ctx, err)
			}
			if skip {
				allow()
				continue
			}
		}
		if err := a.processFetches(fs); err != nil {
			return err
		}
		if time.Since(lastCommit) >= a.cfg.CommitInterval {
			if err := commit(ctx); err != nil {
				return stopping(ctx, err)
			}
			lastCommit = time.Now()
		}
		allow()
	}
	return nil
}

// errStopping is an operation cut short because Run is stopping.
var errStopping = errors.New("streams: stopping")

// stopping is errStopping when ctx is done (err is the cut-short operation's), else err.
func stopping(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return errStopping
	}
	return err
}

// processFetches runs every polled record through its task and fires the wall-clock
// punctuators, holding mu throughout.
func (a *App) processFetches(fs kgo.Fetches) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.err != nil {
		return a.mu.err
	}
	a.query.Lock() // stores change: queries wait
	defer a.query.Unlock()
	// A task's records are taken in timestamp order across its source partitions, the
	// lowest first, as Kafka Streams' PartitionGroup chooses among the records it has
	// buffered; each partition's records stay in offset order.
	batches := map[*task][][]*kgo.Record{}
	var order []*task
	var err error
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if err != nil || len(p.Records) == 0 {
			return
		}
		logical := a.full[p.Topic]
		tk := a.mu.tasks[TaskID{Subtopology: a.topo.byTopic[logical].id, Partition: p.Partition}]
		if tk == nil {
			err = fmt.Errorf("streams: record of %s[%d] with no task", p.Topic, p.Partition)
			return
		}
		if batches[tk] == nil {
			order = append(order, tk)
		}
		batches[tk] = append(batches[tk], p.Records)
	})
	if err != nil {
		return err
	}
	for _, tk := range order {
		err := byTimestamp(batches[tk], func(r *kgo.Record) error {
			hs := make([]Header, len(r.Headers))
			for i, h := range r.Headers {
				hs[i] = Header{Key: h.Key, Value: h.Value}
			}
			return tk.process(a.full[r.Topic], r.Offset, r.Key, r.Value, r.Timestamp.UnixMilli(), hs)
		})
		if err != nil {
			return err
		}
	}
	now := time.Now().UnixMilli()
	for _, tk := range a.mu.tasks {
		if err := tk.punctuate(WallClockTime, now); err != nil {
			return err
		}
	}
	return nil
}

// byTimestamp calls f on every record of parts (each in offset order), always taking next the
// partition head with the lowest timestamp (the earlier partition on a tie), so that one
// partition's records keep their order.
func byTimestamp(parts [][]*kgo.Record, f func(*kgo.Record) error) error {
	for {
		next := -1
		for i, p := range parts {
			if len(p) > 0 && (next < 0 || p[0].Timestamp.Before(parts[next][0].Timestamp)) {
				next = i
			}
		}
		if next < 0 {
			return nil
		}
		r := parts[next][0]
		parts[next] = parts[next][1:]
		if err := f(r); err != nil {
			return err
		}
	}
}

// commitAtLeastOnce waits for every produced record (output, repartition and changelog) to
// be acknowledged, then commits the offsets of every record polled (all of them processed:
// the caller holds mu across a whole batch).
func (a *App) commitAtLeastOnce(ctx context.Context) error {
	if err := a.client.Flush(ctx); err != nil {
		return fmt.Errorf("streams: flush: %w", err)
	}
	a.produce.Lock()
	err := a.produce.err
	a.produce.err = nil
	a.produce.Unlock()
	if err != nil {
		return fmt.Errorf("streams: produce: %w", err)
	}
	if err := a.client.CommitUncommittedOffsets(ctx); err != nil {
		return fmt.Errorf("streams: commit: %w", err)
	}
	return nil
}

// finish commits what was processed when Run ends cleanly, and closes the tasks: with a
// checkpoint when what they hold is committed (at-least-once: the commit here succeeded;
// exactly_once_v2: committed, the caller's last transaction committed).
func (a *App) finish(cl *kgo.Client, committed bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	if a.mu.err == nil && a.cfg.Guarantee == AtLeastOnce {
		err := a.commitAtLeastOnce(ctx)
		errs = append(errs, err)
		committed = err == nil
	}
	for id, tk := range a.mu.tasks {
		a.queryUnpublish(id)
		a.mu.dropped += tk.dropped
		a.mu.skipped += tk.skipped
		if committed {
			errs = append(errs, a.checkpointTask(tk, true))
		}
		errs = append(errs, tk.close())
		delete(a.mu.tasks, id)
	}
	return errors.Join(errs...)
}

// emit produces one record of a task; a failure is kept for the next commit, which fails.
func (a *App) emit(cl *kgo.Client) emitFunc {
	return func(topic string, partition int32, key, value []byte, ts int64, headers []Header) error {
		r := &kgo.Record{Topic: topic, Key: key, Value: value, Timestamp: time.UnixMilli(ts)}
		if partition >= 0 {
			r.Partition = partition
			r.Context = manualPartition
		}
		for _, h := range headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			if err == nil && r.Topic != "" {
				a.ack(r)
			}
			if err != nil && !a.production(r, err) {
				a.produce.Lock()
				if a.produce.err == nil {
					a.produce.err = err
				}
				a.produce.Unlock()
			}
		})
		return nil
	}
}

// partitionCount is a topic's number of partitions, asked once and remembered.
func (a *App) partitionCount(topic string) (int, error) {
	if n, ok := a.partitions.Load(topic); ok {
		return n.(int), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	td, err := a.admin.ListTopics(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("streams: partitions of %s: %w", topic, err)
	}
	d, ok := td[topic]
	if !ok || d.Err != nil {
		return 0, fmt.Errorf("streams: partitions of %s: %v", topic, d.Err)
	}
	a.partitions.Store(topic, len(d.Partitions))
	return len(d.Partitions), nil
}

// DroppedRecords is the number of records this instance's windowed operators dropped as
// late (past every window's grace period), and its stream-stream joins dropped (a null key
// or value, or older than a join window store's retention), since Run started.
func (a *App) DroppedRecords() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.mu.dropped
	for _, tk := range a.mu.tasks {
		n += tk.dropped
	}
	return n
}

// Tasks are the tasks this instance runs now, ordered by sub-topology and partition.
func (a *App) Tasks() []TaskID {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := make([]TaskID, 0, len(a.mu.tasks))
	for id := range a.mu.tasks {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(x, y TaskID) int {
		if x.Subtopology != y.Subtopology {
			return x.Subtopology - y.Subtopology
		}
		return int(x.Partition - y.Partition)
	})
	return ids
}

// SkippedRecords is the number of records this instance skipped because they did not
// deserialize (with LogAndContinue) since Run started.
func (a *App) SkippedRecords() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.mu.skipped
	for _, tk := range a.mu.tasks {
		n += tk.skipped
	}
	return n
}

// badRecord is the tasks' deserialization handler, from the configuration.
func (a *App) badRecord(err error) error {
	if a.cfg.DeserializationExceptionHandler != LogAndContinue {
		return err
	}
	a.log.Warn("streams: skipping a record that does not deserialize", "err", err)
	return nil
}
