package replica

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gregor-project/gregor/internal/observe"
	"github.com/gregor-project/gregor/internal/wire"
)

// The follower side of replication on a broker (Kafka's ReplicaFetcherManager and
// ReplicaFetcherThread): Fetchers runs one goroutine per source broker, and that goroutine
// fetches every partition this broker follows from that leader, in one Fetch per round (not
// one per partition). Each partition's protocol is its Follower core (follower.go); the
// goroutine asks every core what it needs (Next), sends one request of each kind the round
// needs to the leader over one connection (internal/wire), feeds the answers back (HandleFetch,
// HandleEpochEndOffset, HandleLeaderOffsets) and applies the resulting actions to the
// partition (ApplyFollower, then SetFollowerHighWatermark).
//
// A round, per source broker:
//  1. OffsetForLeaderEpoch (v4, replica_id = LocalID) for the partitions whose core is
//     truncating (FetcherOptions.UseOffsetForLeaderEpoch; KIP-101/279);
//  2. ListOffsets earliest and latest (v7, replica_id = LocalID) for the partitions whose core
//     met OFFSET_OUT_OF_RANGE;
//  3. one Fetch (v12, topic names, replica_id = LocalID, isolation read_uncommitted, no fetch
//     session) for the rest, each partition with its fetch offset, log start offset, current
//     leader epoch (KIP-320 fencing) and last fetched epoch (truncation on a diverging epoch).
//
// Errors:
//   - a partition's error goes to its core: FENCED_LEADER_EPOCH stops the partition until
//     Follow brings a newer epoch; OFFSET_OUT_OF_RANGE makes the core ask ListOffsets;
//     NOT_LEADER_OR_FOLLOWER and UNKNOWN_LEADER_EPOCH (the leader has not applied the
//     metadata this broker acted on) retry the partition after 10 ms, doubling up to
//     BackoffMs; the rest back it off for BackoffMs (Kafka's replica.fetch.backoff.ms);
//   - a connection or whole-request error drops the connection; the goroutine waits BackoffMs,
//     redials (the leader's address is looked up again) and retries every partition. A
//     failing leader costs one attempt per BackoffMs, never a busy loop;
//   - a failed ApplyFollower (a storage error, or the partition no longer follows in that
//     epoch) backs the partition off.
//
// A trailing partial batch (a leader cuts the last batch at max bytes) is never appended: the
// core keeps whole batches only.
//
// A partition followed (or restarted in a newer epoch) while the round's Fetch waits at the
// leader (up to MaxWaitMs) interrupts that Fetch, at the earliest minInterruptAge after it was
// sent, so the next round carries the partition at once: a follower that joins a new leader's
// ISR holds that leader's acks=all writes until it fetches. One followed while the round is
// being prepared (dialling, OffsetForLeaderEpoch) makes the round's Fetch not wait. And a
// Fetch waits no longer than the first back-off of the source's other partitions ends, so a
// quick retry is not held by a parked Fetch. Kafka's fetcher thread picks new partitions up
// only after the fetch in flight returns.
//
// Throttle (follower.replication.throttled.rate, Kafka's follower quota): the bytes that
// throttled replicas (Throttled: follower.replication.throttled.replicas) receive draw on one
// token bucket shared by every source broker's goroutine, filled at Throttle() bytes per second
// (a one-second burst). While the bucket is in debt a fetch leaves out the throttled
// partitions not in sync (caught up to the leader's high watermark at the last answer, as
// Kafka's shouldFollowerThrottle spares in-sync replicas), so a reassignment's catch-up does
// not starve the other partitions' replication; a fetch made only of partitions left out
// waits for the bucket.

// Request versions the fetcher speaks.
const (
	fetchVersion                = 12 // topic names, last_fetched_epoch and diverging_epoch (KIP-320 truncation on fetch)
	offsetForLeaderEpochVersion = 4  // replica_id, current_leader_epoch
	listOffsetsVersion          = 7  // replica_id, current_leader_epoch
)

// FetcherOptions are the follower fetchers' settings (replica.fetch.* in server.properties).
// Zero values take Kafka's defaults.
type FetcherOptions struct {
	LocalID int32 // this broker's node id: the replica_id of its requests
	// Endpoint is the leader's inter-broker listener address, from metadata.
	Endpoint func(broker int32) (addr string, ok bool)
	// Dial connects to a leader; default wire.Dial with client id "gregor-replica-<LocalID>".
	Dial func(ctx context.Context, addr string) (*wire.Conn, error)

	MaxBytes         int32 // replica.fetch.max.bytes (per partition), default 1 MiB
	MinBytes         int32 // replica.fetch.min.bytes, default 1
	MaxWaitMs        int32 // replica.fetch.wait.max.ms, default 500
	ResponseMaxBytes int32 // replica.fetch.response.max.bytes, default 10 MiB
	BackoffMs        int32 // replica.fetch.backoff.ms, default 1000
	SocketTimeoutMs  int32 // replica.socket.timeout.ms: a request's answer beyond its wait, default 30000
	// UseOffsetForLeaderEpoch truncates with OffsetForLeaderEpoch before fetching, instead of
	// by the diverging epoch of fetch answers (FollowerConfig.UseOffsetForLeaderEpoch).
	UseOffsetForLeaderEpoch bool
	// Throttle is follower.replication.throttled.rate in bytes per second (0: none); nil: none.
	Throttle func() int64
	// Throttled reports whether this broker's replica of a partition is throttled
	// (follower.replication.throttled.replicas); nil: every replica.
	Throttled func(topic string, partition int32) bool
	Now       func() time.Time
	Log       *slog.Logger
	// Topics count the bytes replicated (ReplicationBytesInPerSec); nil: not counted.
	Topics *observe.Topics
}

func (o *FetcherOptions) defaults() {
	if o.Dial == nil {
		clientID := fmt.Sprintf("gregor-replica-%d", o.LocalID)
		o.Dial = func(ctx context.Context, addr string) (*wire.Conn, error) { return wire.Dial(ctx, addr, clientID) }
	}
	if o.Endpoint == nil {
		o.Endpoint = func(int32) (string, bool) { return "", false }
	}
	setDefault(&o.MaxBytes, 1<<20)
	setDefault(&o.MinBytes, 1)
	setDefault(&o.MaxWaitMs, 500)
	setDefault(&o.ResponseMaxBytes, 10<<20)
	setDefault(&o.BackoffMs, 1000)
	setDefault(&o.SocketTimeoutMs, 30_000)
	if o.Throttle == nil {
		o.Throttle = func() int64 { return 0 }
	}
	if o.Throttled == nil {
		o.Throttled = func(string, int32) bool { return true }
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

func setDefault(v *int32, d int32) {
	if *v <= 0 {
		*v = d
	}
}

// followed is what a fetcher needs of a partition it follows; *Partition is one.
type followed interface {
	topicPartition() (topic string, partition int32)
	LocalLog() LocalLog
	ApplyFollower(leaderEpoch int32, act FollowerAction) (leo int64, err error)
	SetFollowerHighWatermark(hw int64)
}

// Fetchers are a broker's follower fetchers, one per source broker. Safe for concurrent use.
type Fetchers struct {
	o      FetcherOptions
	cfg    FollowerConfig
	bucket throttleBucket
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		sources map[int32]*sourceFetcher    // by leader id; each has at least one partition
		of      map[followed]*sourceFetcher // the source each followed partition fetches from
		closed  bool
	}
}

// NewFetchers makes the fetchers; they start a goroutine per source broker as partitions are
// followed. Close stops them.
func NewFetchers(o FetcherOptions) *Fetchers {
	o.defaults()
	f := &Fetchers{o: o, cfg: FollowerConfig{LocalID: o.LocalID, BackoffMs: int64(o.BackoffMs), UseOffsetForLeaderEpoch: o.UseOffsetForLeaderEpoch}}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.mu.sources = map[int32]*sourceFetcher{}
	f.mu.of = map[followed]*sourceFetcher{}
	return f
}

// Follow makes p (already MakeFollower'd in leaderEpoch) fetch from leader. A partition
// follows exactly one leader: a newer epoch (same leader or another) restarts its Follower
// core, moving it to the leader's source fetcher if the leader changed, and applies the core's
// initial action through p.ApplyFollower; an epoch not newer than the one followed is ignored.
func (f *Fetchers) Follow(p *Partition, leader, leaderEpoch int32) { f.follow(p, leader, leaderEpoch) }

// Unfollow stops fetching p (it became leader, was deleted, or stepped down). When it returns
// no answer to an earlier request is applied to p.
func (f *Fetchers) Unfollow(p *Partition) { f.unfollow(p) }

// Following reports the leader p fetches from.
func (f *Fetchers) Following(p *Partition) (leader int32, ok bool) { return f.following(p) }

// Lag is how far p's log end offset is behind the leader's high watermark in the last fetch
// answer (Kafka's fetcher ConsumerLag); ok false when p is not followed or no answer came yet.
func (f *Fetchers) Lag(p *Partition) (lag int64, ok bool) { return f.lag(p) }

// follow makes p follow leader in leaderEpoch (Follow).
func (f *Fetchers) follow(p followed, leader, leaderEpoch int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.closed {
		return
	}
	if cur := f.mu.of[p]; cur != nil {
		cur.mu.Lock()
		st := cur.mu.parts[p]
		if leaderEpoch <= st.core.LeaderEpoch() {
			// Not newer than what p follows: stale or repeated metadata.
			cur.mu.Unlock()
			return
		}
		if cur.leader == leader {
			_, act := st.core.UpdateLeader(leader, leaderEpoch, p.LocalLog())
			st.leaderHW = -1
			cur.applyLocked(st, act)
			cur.interruptLocked()
			cur.mu.Unlock()
			cur.poke()
			return
		}
		f.removeLocked(cur, p)
		cur.mu.Unlock()
	}
	sf := f.mu.sources[leader]
	if sf == nil {
		sf = f.startSourceLocked(leader)
	}
	core, act := NewFollower(f.cfg, leader, leaderEpoch, p.LocalLog())
	topic, part := p.topicPartition()
	st := &fetchState{p: p, topic: topic, partition: part, core: core, leaderHW: -1}
	sf.mu.Lock()
	sf.mu.parts[p] = st
	sf.applyLocked(st, act)
	sf.interruptLocked()
	sf.mu.Unlock()
	f.mu.of[p] = sf
	sf.poke()
}

// unfollow stops fetching p (Unfollow).
func (f *Fetchers) unfollow(p followed) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sf := f.mu.of[p]
	if sf == nil {
		return
	}
	sf.mu.Lock()
	f.removeLocked(sf, p)
	sf.mu.Unlock()
}

// removeLocked takes p out of sf, stopping sf when it has no partition left. Holding f.mu
// and sf.mu.
func (f *Fetchers) removeLocked(sf *sourceFetcher, p followed) {
	delete(sf.mu.parts, p)
	delete(f.mu.of, p)
	if len(sf.mu.parts) == 0 {
		delete(f.mu.sources, sf.leader)
		sf.cancel()
	}
}

// following reports the leader p fetches from.
func (f *Fetchers) following(p followed) (int32, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sf := f.mu.of[p]; sf != nil {
		return sf.leader, true
	}
	return -1, false
}

// lag is Lag.
func (f *Fetchers) lag(p followed) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sf := f.mu.of[p]
	if sf == nil {
		return 0, false
	}
	sf.mu.Lock()
	defer sf.mu.Unlock()
	st := sf.mu.parts[p]
	if st == nil || st.leaderHW < 0 {
		return 0, false
	}
	return max(0, st.leaderHW-p.LocalLog().LogEndOffset), true
}

// Close stops every fetcher and waits for their goroutines; in-flight requests are abandoned
// (their connections closed) and their answers never applied.
func (f *Fetchers) Close() {
	f.mu.Lock()
	f.mu.closed = true
	for _, sf := range f.mu.sources {
		sf.mu.Lock()
		for p := range sf.mu.parts {
			delete(sf.mu.parts, p)
		}
		sf.mu.Unlock()
	}
	clear(f.mu.sources)
	clear(f.mu.of)
	f.mu.Unlock()
	f.cancel()
	f.wg.Wait()
}

func (f *Fetchers) startSourceLocked(leader int32) *sourceFetcher {
	ctx, cancel := context.WithCancel(f.ctx)
	sf := &sourceFetcher{f: f, leader: leader, cancel: cancel, wake: make(chan struct{}, 1), log: f.o.Log.With("leader", leader)}
	sf.mu.parts = map[followed]*fetchState{}
	f.mu.sources[leader] = sf
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		sf.run(ctx)
	}()
	return sf
}

func (f *Fetchers) nowMs() int64 { return f.o.Now().UnixMilli() }

// backOff pauses the core's requests for its back-off (after a failed apply).
func (c *Follower) backOff(nowMs int64) { c.delayUntilMs = nowMs + c.cfg.BackoffMs }

func (p *Partition) topicPartition() (string, int32) { return p.Topic, p.Index }
