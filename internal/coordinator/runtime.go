package coordinator

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/replica"
)

// SingleNodeEpoch is the leader epoch of every partition on a single node, as the produce
// path appends with.
const SingleNodeEpoch = 0

// Term is one term of leadership of a coordinator topic's partition: the partition, the
// leader epoch this broker was elected in (a shard appends in it, so the partition fences a
// shard whose term is over), and a context cancelled when the term ends (Resign, a newer
// Elect, Close). A term is never reused: a new Elect makes a new Term and a new shard.
type Term struct {
	Index     int32
	Epoch     int32
	Partition *replica.Partition
	Ctx       context.Context
	cancel    context.CancelFunc
}

// Shard is what a coordinator keeps per partition it leads, for one Term: its edge state
// (lock, core, timer, pending appends) is its own; the Runtime only needs its Term.
type Shard interface {
	Term() *Term
}

// Config wires a Runtime into its coordinator.
type Config[S Shard] struct {
	Topic string // the coordinator's internal topic, as __consumer_offsets
	Name  string // the coordinator in logs and errors, as "group coordinator"
	Keys  string // the log attribute counting what a shard loaded, as "groups"

	Replicas *replica.Manager
	Log      *slog.Logger
	Now      func() time.Time // nil: time.Now
	// Manual: the broker reports leadership with Elect and Resign; false: a single node,
	// which elects every partition of the topic open in Replicas once it learns the count.
	Manual bool
	// EnsureTopic returns the topic's partition count, or 0 if it does not exist; with
	// create it first creates the topic if it is missing.
	EnsureTopic func(create bool) (int32, error)
	// PartitionFor is the partition coordinating key, of n.
	PartitionFor func(key string, n int32) int32

	// NewShard makes the shard of a new term. It is called under the Runtime's lock, so it
	// must not block or call back into the Runtime.
	NewShard func(t *Term) S
	// Load replays the shard's partition and publishes its core; it returns how many keys
	// (groups, transactional ids) and records it loaded. A shard whose term ended
	// meanwhile (its Term's Ctx is done) must be left unpublished.
	Load func(sh S) (keys, records int)
	// Unload retires a shard whose term ended, after its Term's Ctx is cancelled: parked
	// requests are answered, later ones get why (NOT_COORDINATOR after Resign or a newer
	// Elect, COORDINATOR_NOT_AVAILABLE after Close). It is called without the Runtime's
	// lock.
	Unload func(sh S, why *kerr.Error)
}

// Runtime is the part of a coordinator's edge that the group and transaction coordinators
// share: its topic's partition count (creating the topic on first use), the map from
// partition to the shard of this broker's current term, the leader epochs that order Elect
// and Resign, and the goroutines that load shards. See the package doc for the lock and
// epoch rules.
type Runtime[S Shard] struct {
	cfg Config[S]

	ctx    context.Context // cancelled by Close: stops loading; the parent of every Term's Ctx
	cancel context.CancelFunc
	wg     sync.WaitGroup // loading goroutines and those started with Go; Add only under mu or a live shard's lock

	createMu sync.Mutex // serialises creating the topic
	mu       struct {
		sync.Mutex
		partitions int32           // the topic's partition count; 0 until known
		shards     map[int32]S     // the partitions this broker leads, loading or loaded
		epochs     map[int32]int32 // per partition, the newest leader epoch Elect or Resign saw
		closed     bool
	}
}

// New makes a Runtime; Start elects (without Config.Manual) and loads.
func New[S Shard](cfg Config[S]) *Runtime[S] {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	r := &Runtime[S]{cfg: cfg}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.mu.shards = map[int32]S{}
	r.mu.epochs = map[int32]int32{}
	return r
}

// Start, without Config.Manual, elects every partition of an existing topic that is open
// locally and loads them in the background. With Config.Manual it does nothing: partitions
// are coordinated from their Elect on.
func (r *Runtime[S]) Start() error {
	if r.cfg.Manual {
		return nil
	}
	n, err := r.cfg.EnsureTopic(false)
	if err != nil || n <= 0 {
		return err
	}
	shards, err := r.Attach(n)
	if err != nil {
		return err
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.LoadAll(shards)
	}()
	return nil
}

// Close stops loading, unloads every shard with COORDINATOR_NOT_AVAILABLE, and waits for the
// goroutines (loading, and those started with Go). Later calls answer
// COORDINATOR_NOT_AVAILABLE.
func (r *Runtime[S]) Close() {
	r.cancel()
	r.mu.Lock()
	r.mu.closed = true
	shards := r.mu.shards
	r.mu.shards = map[int32]S{}
	r.mu.Unlock()
	for _, sh := range shards {
		r.unload(sh, kerr.CoordinatorNotAvailable)
	}
	r.wg.Wait()
}

// Go runs f in a goroutine Close waits for. Call it under the lock of a shard that is not
// unloaded (Unload takes that lock before Close waits), or f may start after Close returned.
func (r *Runtime[S]) Go(f func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f()
	}()
}

// Shard returns the shard coordinating key: NOT_COORDINATOR if its partition is not led
// here, COORDINATOR_NOT_AVAILABLE if the topic cannot be created or the Runtime is closed.
func (r *Runtime[S]) Shard(key string) (S, *kerr.Error) {
	var zero S
	n, err := r.partitionCount()
	if err != nil {
		return zero, err
	}
	r.mu.Lock()
	sh, ok := r.mu.shards[r.cfg.PartitionFor(key, n)]
	closed := r.mu.closed
	r.mu.Unlock()
	switch {
	case closed:
		return zero, kerr.CoordinatorNotAvailable
	case !ok:
		return zero, kerr.NotCoordinator
	}
	return sh, nil
}

// Lookup is Shard without creating the topic: a request that only reads (Kafka's
// DescribeTransactions, a leader's verification) on a cluster whose topic does not exist yet
// is answered NOT_COORDINATOR, as a broker that owns no partition of it answers.
func (r *Runtime[S]) Lookup(key string) (S, *kerr.Error) {
	var zero S
	r.mu.Lock()
	n, closed := r.mu.partitions, r.mu.closed
	r.mu.Unlock()
	if closed {
		return zero, kerr.CoordinatorNotAvailable
	}
	if n <= 0 {
		var err error
		if n, err = r.cfg.EnsureTopic(false); err != nil || n <= 0 {
			return zero, kerr.NotCoordinator
		}
	}
	r.mu.Lock()
	sh, ok := r.mu.shards[r.cfg.PartitionFor(key, n)]
	r.mu.Unlock()
	if !ok {
		return zero, kerr.NotCoordinator
	}
	return sh, nil
}

// ShardAt returns the shard of partition, if this broker leads it.
func (r *Runtime[S]) ShardAt(partition int32) (S, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sh, ok := r.mu.shards[partition]
	return sh, ok
}

// Shards returns every shard, loading or loaded, in partition order;
// COORDINATOR_NOT_AVAILABLE once closed.
func (r *Runtime[S]) Shards() ([]S, *kerr.Error) {
	r.mu.Lock()
	closed := r.mu.closed
	shards := make([]S, 0, len(r.mu.shards))
	for _, sh := range r.mu.shards {
		shards = append(shards, sh)
	}
	r.mu.Unlock()
	if closed {
		return nil, kerr.CoordinatorNotAvailable
	}
	slices.SortFunc(shards, func(a, b S) int { return cmp.Compare(a.Term().Index, b.Term().Index) })
	return shards, nil
}

// PartitionFor is the partition coordinating key, or -1 while the topic does not exist.
func (r *Runtime[S]) PartitionFor(key string) int32 {
	r.mu.Lock()
	n := r.mu.partitions
	r.mu.Unlock()
	if n <= 0 {
		var err error
		if n, err = r.cfg.EnsureTopic(false); err != nil || n <= 0 {
			return -1
		}
	}
	return r.cfg.PartitionFor(key, n)
}

// partitionCount returns the topic's partition count, creating the topic on first use.
func (r *Runtime[S]) partitionCount() (int32, *kerr.Error) {
	r.mu.Lock()
	n, closed := r.mu.partitions, r.mu.closed
	r.mu.Unlock()
	switch {
	case closed:
		return 0, kerr.CoordinatorNotAvailable
	case n > 0:
		return n, nil
	}
	n, err := r.create()
	if err != nil {
		r.cfg.Log.Error("creating the "+r.cfg.Name+"'s topic failed", "topic", r.cfg.Topic, "err", err)
		return 0, kerr.CoordinatorNotAvailable
	}
	return n, nil
}

// create makes the topic (or finds it made), learns its partition count and, without
// Config.Manual, elects and loads its local partitions.
func (r *Runtime[S]) create() (int32, error) {
	r.createMu.Lock()
	defer r.createMu.Unlock()
	r.mu.Lock()
	n := r.mu.partitions
	r.mu.Unlock()
	if n > 0 {
		return n, nil
	}
	n, err := r.cfg.EnsureTopic(true)
	if err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, fmt.Errorf("%s: %s has no partitions", r.cfg.Name, r.cfg.Topic)
	}
	shards, err := r.Attach(n)
	if err != nil {
		return 0, err
	}
	r.LoadAll(shards) // a new topic is empty, unless it was created through the admin API
	return n, nil
}

// LoadAll loads the shards in order, stopping if the Runtime closes; a shard whose term
// ended meanwhile is passed over.
func (r *Runtime[S]) LoadAll(shards []S) {
	start := time.Now()
	keys, records := 0, 0
	for _, sh := range shards {
		if r.ctx.Err() != nil {
			return
		}
		if sh.Term().Ctx.Err() != nil {
			continue // resigned meanwhile
		}
		k, n := r.cfg.Load(sh)
		keys += k
		records += n
	}
	if records > 0 {
		r.cfg.Log.Info(r.cfg.Name+" loaded", "topic", r.cfg.Topic, "partitions", len(shards), r.cfg.Keys, keys, "records", records, "duration", time.Since(start))
	}
}

// Elect makes this broker the coordinator of partition from leaderEpoch on, and starts
// loading it. The partition must be open in Replicas as the leader. Idempotent for the same
// or an older epoch.
func (r *Runtime[S]) Elect(partition, leaderEpoch int32) {
	r.mu.Lock()
	sh, ok, old, replaced := r.electLocked(partition, leaderEpoch)
	if ok {
		r.wg.Add(1) // under mu, which Close takes before it waits: never after Wait began
	}
	r.mu.Unlock()
	if replaced {
		r.unload(old, kerr.NotCoordinator)
	}
	if !ok {
		return
	}
	go func() {
		defer r.wg.Done()
		start := r.cfg.Now()
		keys, records := r.cfg.Load(sh)
		r.cfg.Log.Info(r.cfg.Name+" elected", "partition", partition, "leader_epoch", leaderEpoch, r.cfg.Keys, keys, "records", records, "duration", r.cfg.Now().Sub(start))
	}()
}

// Install is Elect without the loading: the new term's shard is registered (answering
// COORDINATOR_LOAD_IN_PROGRESS) and returned, and the caller loads it (Config.Load). ok is
// false if the election is ignored or the partition is not open here. For tests that need
// a shard caught loading.
func (r *Runtime[S]) Install(partition, leaderEpoch int32) (sh S, ok bool) {
	r.mu.Lock()
	sh, ok, old, replaced := r.electLocked(partition, leaderEpoch)
	r.mu.Unlock()
	if replaced {
		r.unload(old, kerr.NotCoordinator)
	}
	return sh, ok
}

// Resign ends this broker's coordination of partition: leaderEpoch is the epoch in which
// another broker leads it, or -1 when the partition is gone (its epochs are then
// forgotten, as a recreated topic starts over).
func (r *Runtime[S]) Resign(partition, leaderEpoch int32) {
	r.mu.Lock()
	sh, ok := r.mu.shards[partition]
	switch {
	case leaderEpoch < 0:
		delete(r.mu.epochs, partition)
	case ok && leaderEpoch < sh.Term().Epoch:
		r.mu.Unlock()
		r.cfg.Log.Info(r.cfg.Name+" ignored a stale resignation", "partition", partition, "leader_epoch", leaderEpoch, "current_epoch", sh.Term().Epoch)
		return
	default:
		if last, seen := r.mu.epochs[partition]; !seen || leaderEpoch > last {
			r.mu.epochs[partition] = leaderEpoch
		}
	}
	delete(r.mu.shards, partition)
	r.mu.Unlock()
	if ok {
		r.unload(sh, kerr.NotCoordinator)
		r.cfg.Log.Info(r.cfg.Name+" resigned", "partition", partition, "leader_epoch", leaderEpoch)
	}
}

// electLocked registers a new shard for partition in leaderEpoch; it returns the shard to
// load (ok false if the election is ignored or the partition is not open here) and the
// shard it replaces (replaced), which the caller unloads.
func (r *Runtime[S]) electLocked(partition, leaderEpoch int32) (sh S, ok bool, old S, replaced bool) {
	if r.mu.closed {
		return sh, false, old, false
	}
	if last, seen := r.mu.epochs[partition]; seen && leaderEpoch <= last {
		return sh, false, old, false
	}
	r.mu.epochs[partition] = leaderEpoch
	old, replaced = r.mu.shards[partition]
	delete(r.mu.shards, partition)
	p := r.cfg.Replicas.Get(r.cfg.Topic, partition)
	if p == nil {
		r.cfg.Log.Error(r.cfg.Name+" elected for a partition that is not open", "topic", r.cfg.Topic, "partition", partition, "leader_epoch", leaderEpoch)
		return sh, false, old, replaced
	}
	t := &Term{Index: partition, Epoch: leaderEpoch, Partition: p}
	t.Ctx, t.cancel = context.WithCancel(r.ctx)
	sh = r.cfg.NewShard(t)
	r.mu.shards[partition] = sh
	return sh, true, old, replaced
}

// Attach records that the topic has n partitions and, without Config.Manual, elects every
// one open locally (a single node leads them all) in SingleNodeEpoch; it returns the new
// shards, not yet loaded (LoadAll loads them).
func (r *Runtime[S]) Attach(n int32) ([]S, error) {
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		return nil, fmt.Errorf("%s: closed", r.cfg.Name)
	}
	r.mu.partitions = n
	var shards, olds []S
	for i := range n {
		if r.cfg.Manual {
			break
		}
		sh, ok, old, replaced := r.electLocked(i, SingleNodeEpoch)
		if replaced {
			olds = append(olds, old) // elected earlier in a newer term: its state is stale
		}
		if ok {
			shards = append(shards, sh)
		}
	}
	r.mu.Unlock()
	for _, old := range olds {
		r.unload(old, kerr.NotCoordinator)
	}
	return shards, nil
}

// unload ends sh's term (its Ctx is cancelled: loading and its waits stop) and retires it.
func (r *Runtime[S]) unload(sh S, why *kerr.Error) {
	sh.Term().cancel()
	r.cfg.Unload(sh, why)
}
