package group

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/coordinator"
)

// Config is what a shard acts on (Kafka's group.* and offsets.* broker configs).
type Config struct {
	InitialRebalanceDelayMs int64 // group.initial.rebalance.delay.ms
	MinSessionTimeoutMs     int32 // group.min.session.timeout.ms
	MaxSessionTimeoutMs     int32 // group.max.session.timeout.ms
	MaxSize                 int32 // group.max.size
	OffsetsRetentionMs      int64 // offsets.retention.minutes, in ms
	OffsetsRetentionCheckMs int64 // offsets.retention.check.interval.ms
	MaxMetadataBytes        int   // offset.metadata.max.bytes (Kafka: 4096)
	// NewMemberJoinTimeoutMs bounds how long a new member's first JoinGroup may stay parked
	// (Kafka: 5 minutes); a client that gave up retries with a new request.
	NewMemberJoinTimeoutMs int64
	// CommitTimeoutMs (offsets.commit.timeout.ms) bounds how long the Coordinator waits for
	// the ISR to have an append; 0: DefaultCommitTimeoutMs. The core does not use it.
	CommitTimeoutMs int64
	// NewID returns a fresh random suffix for member ids ("<client.id>-<NewID()>"); nil:
	// a random UUID. Tests make it deterministic.
	NewID func() string
	// OnRebalance, if set, is called each time a classic group enters PreparingRebalance (a
	// rebalance starts), for the broker's rebalance counter; it must only count.
	OnRebalance func()

	// Consumer groups (KIP-848); zero values take Kafka's defaults.
	ConsumerSessionTimeoutMs    int32    // group.consumer.session.timeout.ms (45000)
	ConsumerHeartbeatIntervalMs int32    // group.consumer.heartbeat.interval.ms (5000)
	ConsumerMaxSize             int32    // group.consumer.max.size (unlimited)
	ConsumerAssignors           []string // group.consumer.assignors by name, the default first (uniform, range)
	ConsumerMigrationPolicy     string   // group.consumer.migration.policy (bidirectional)
	// ConsumerGroupConfig, if set, returns a consumer group's session timeout and heartbeat
	// interval: its consumer.session.timeout.ms and consumer.heartbeat.interval.ms
	// overrides (group configs), else the broker's. It is asked on every heartbeat, so a
	// change applies from a member's next heartbeat; it must only read. nil:
	// ConsumerSessionTimeoutMs and ConsumerHeartbeatIntervalMs for every group.
	ConsumerGroupConfig func(group string) (sessionMs, heartbeatMs int32)
}

// consumerTimes is group's session timeout and heartbeat interval (ConsumerGroupConfig).
func (c *Config) consumerTimes(group string) (sessionMs, heartbeatMs int32) {
	if c.ConsumerGroupConfig != nil {
		return c.ConsumerGroupConfig(group)
	}
	return c.ConsumerSessionTimeoutMs, c.ConsumerHeartbeatIntervalMs
}

// DefaultMaxMetadataBytes is Kafka's offset.metadata.max.bytes default.
const DefaultMaxMetadataBytes = 4096

// DefaultCommitTimeoutMs is Kafka's offsets.commit.timeout.ms default.
const DefaultCommitTimeoutMs = 5000

// DefaultNewMemberJoinTimeoutMs is Kafka's GroupCoordinator.NewMemberJoinTimeoutMs.
const DefaultNewMemberJoinTimeoutMs = 5 * 60 * 1000

// Waiter identifies a request parked in the core until it is answered: the driver passes
// one with each request and gets it back in the Reply. It must be non-nil; the core only
// stores and returns it.
type Waiter any

// Reply is an answer for a waiting request. Msg is the kmsg response (or, for
// DeleteGroups, a *kmsg.DeleteGroupsResponseGroup).
type Reply struct {
	To  Waiter
	Msg any
}

// Record is a __consumer_offsets record; a nil Value is a tombstone.
type Record = coordinator.Record

// Write is a set of records to append, in order, as one batch; its outcome must be
// reported with Written(ID, err), and the outcomes of all Writes in the order they were
// appended (the log's order), which need not be before the next step: the core makes every
// reply and state change that must wait for the write in Written's callback, and checks
// there that the group is still the one it wrote for.
type Write struct {
	ID      uint64
	Records []Record
	// Txn, when set, makes the batch transactional for this producer (a TxnOffsetCommit's
	// records): it carries the producer id and epoch and BaseSequence -1, and its records
	// count only once the transaction's COMMIT marker follows them (CompleteTxn).
	Txn *Producer
}

// Producer is the transactional producer a Write is made for.
type Producer = coordinator.Producer

// Ready is the output of one step: append each Write in order (reporting each with Written,
// whose Ready is handled the same way) and deliver the Replies, which do not wait for the
// Writes.
//
// Warnings are failures nobody waits for (a tombstone write that failed, say): the driver
// logs them.
type Ready struct {
	Replies  []Reply
	Writes   []Write
	Warnings []error
}

// Client describes where a JoinGroup came from.
type Client struct {
	ID   string // client.id
	Host string // "/<ip>", as Kafka reports it
}

// ErrUnknownRecord is returned by Replay for a __consumer_offsets record type this
// coordinator does not understand.
var ErrUnknownRecord = errors.New("group: unknown __consumer_offsets record type")

// Shard is the deterministic core for the groups of one __consumer_offsets partition. It is
// not safe for concurrent use: the driver serialises calls.
type Shard struct {
	cfg    Config
	groups map[string]*Group
	timers timers

	writeSeq  uint64
	onWritten map[uint64]func(err error)

	// order counts the records of the partition's log as the shard sees them: each one
	// replayed, then each one written, takes the next value, so it orders records the way
	// their log offsets do (Offset.order).
	order uint64

	// Transactional offset commits awaiting their transaction's marker (txn.go): by
	// producer id, group and partition; openTxns indexes the producers by group. A group
	// id in openTxns has at least one entry in txns and the reverse.
	txns     map[int64]map[string]map[TopicPartition]*Offset
	openTxns map[string]map[int64]struct{}

	topics  Topics     // the latest view a consumer-protocol request brought
	regexes regexCache // subscription regexes resolved in topics

	// During a step: its time and its output being assembled.
	now int64
	out Ready
}

// NewShard returns an empty shard. Call LoadComplete (after any Replay) before requests.
func NewShard(cfg Config) *Shard {
	if cfg.NewID == nil {
		cfg.NewID = randomID
	}
	if cfg.MaxMetadataBytes == 0 {
		cfg.MaxMetadataBytes = DefaultMaxMetadataBytes
	}
	if cfg.NewMemberJoinTimeoutMs == 0 {
		cfg.NewMemberJoinTimeoutMs = DefaultNewMemberJoinTimeoutMs
	}
	cfg.consumerDefaults()
	return &Shard{
		cfg: cfg, groups: map[string]*Group{}, timers: newTimers(), onWritten: map[uint64]func(error){}, topics: noTopics{},
		txns: map[int64]map[string]map[TopicPartition]*Offset{}, openTxns: map[string]map[int64]struct{}{},
	}
}

// randomID is a random UUID, as Kafka's member ids end with.
func randomID() string {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u[:])
	return fmt.Sprintf("%s-%s-%s-%s-%s", h[:8], h[8:12], h[12:16], h[16:20], h[20:])
}

// Group returns a group by id, or nil (for tests and tools; the caller holds the driver's
// lock and must not modify it).
func (s *Shard) Group(id string) *Group { return s.groups[id] }

// NumGroups is the number of groups the shard holds.
func (s *Shard) NumGroups() int { return len(s.groups) }

func (s *Shard) begin(now int64) {
	s.now = now
	s.out = Ready{}
}

func (s *Shard) end() Ready {
	r := s.out
	s.out = Ready{}
	return r
}

func (s *Shard) warn(err error) { s.out.Warnings = append(s.out.Warnings, err) }

// sortedGroups returns the groups ordered by id, so outputs do not depend on map order.
func (s *Shard) sortedGroups() []*Group {
	gs := make([]*Group, 0, len(s.groups))
	for _, g := range s.groups {
		gs = append(gs, g)
	}
	slices.SortFunc(gs, func(a, b *Group) int { return strings.Compare(a.ID, b.ID) })
	return gs
}

func (s *Shard) reply(w Waiter, msg any) {
	s.out.Replies = append(s.out.Replies, Reply{To: w, Msg: msg})
}

// write queues records for appending; done runs (inside Written) with the outcome. It
// returns the order of the first record (Offset.order); the others follow it.
func (s *Shard) write(recs []Record, done func(err error)) uint64 {
	return s.writeTxn(recs, nil, done)
}

// writeTxn is write for a transactional batch of p (nil: a plain one).
func (s *Shard) writeTxn(recs []Record, p *Producer, done func(err error)) uint64 {
	s.writeSeq++
	s.out.Writes = append(s.out.Writes, Write{ID: s.writeSeq, Records: recs, Txn: p})
	s.onWritten[s.writeSeq] = done
	first := s.order + 1
	s.order += uint64(len(recs))
	return first
}

// Written reports the outcome of appending Write id: nil, or an error, ideally a *kerr.Error
// naming the partition's failure (NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR,
// MESSAGE_TOO_LARGE, NOT_ENOUGH_REPLICAS, ...), which the core maps as Kafka does.
func (s *Shard) Written(now int64, id uint64, err error) Ready {
	s.begin(now)
	if done := s.onWritten[id]; done != nil {
		delete(s.onWritten, id)
		done(err)
	}
	return s.end()
}

// NextDeadline is the earliest time Tick has something to do; ok false if nothing is
// scheduled. It may be early (Tick then does nothing and the deadline moves on).
func (s *Shard) NextDeadline() (int64, bool) { return s.timers.Next() }

// Tick fires every deadline due at now.
func (s *Shard) Tick(now int64) Ready {
	s.begin(now)
	for {
		k, ok := s.timers.PopDue(now)
		if !ok {
			break
		}
		s.fire(k)
	}
	return s.end()
}

func (s *Shard) fire(k timerKey) {
	if k.kind == timerExpiry {
		s.expireOffsets()
		s.timers.Set(timerKey{kind: timerExpiry}, s.now+s.cfg.OffsetsRetentionCheckMs)
		return
	}
	g := s.groups[k.group]
	if g == nil {
		return
	}
	switch k.kind {
	case timerHeartbeat:
		s.onHeartbeatExpired(g, k.member)
	case timerPending:
		s.onPendingExpired(g, k.member)
	case timerJoin:
		s.onJoinDeadline(g)
	case timerSync:
		s.onSyncExpired(g)
	case timerConsumerSession:
		s.onConsumerSessionExpired(g, k.member)
	case timerConsumerRebalance:
		s.onConsumerRebalanceExpired(g, k.member)
	case timerClassicJoin, timerClassicSync:
		s.onClassicMemberExpired(g, k.member)
	}
}

// Unload answers every parked request with NOT_COORDINATOR and forgets all state (the
// broker is shutting down, or the partition moved away).
func (s *Shard) Unload(now int64) Ready {
	s.begin(now)
	for _, g := range s.sortedGroups() {
		for _, m := range g.order {
			s.answerParked(g, m, kerr.NotCoordinator)
		}
		g.state = Dead
	}
	s.groups = map[string]*Group{}
	s.timers = newTimers()
	s.txns, s.openTxns = map[int64]map[string]map[TopicPartition]*Offset{}, map[string]map[int64]struct{}{}
	for id, done := range s.onWritten {
		delete(s.onWritten, id)
		done(kerr.NotCoordinator)
	}
	return s.end()
}

// answerParked fails a member's parked JoinGroup and SyncGroup with err.
func (s *Shard) answerParked(g *Group, m *Member, err *kerr.Error) {
	if m.join != nil {
		s.reply(m.join.w, joinError(m.ID, err))
		g.setJoin(m, nil)
	}
	if m.sync != nil {
		s.reply(m.sync, syncError(err))
		m.sync = nil
	}
}

// scheduleHeartbeat restarts a member's session timeout (Kafka's
// completeAndScheduleNextHeartbeatExpiration).
func (s *Shard) scheduleHeartbeat(g *Group, m *Member, timeoutMs int64) {
	s.timers.Set(timerKey{timerHeartbeat, g.ID, m.ID}, s.now+timeoutMs)
}

func (s *Shard) cancelHeartbeat(g *Group, memberID string) {
	s.timers.Cancel(timerKey{timerHeartbeat, g.ID, memberID})
}

// groupWriteError maps an append failure of group metadata as Kafka's storeGroup does.
func groupWriteError(err error) *kerr.Error {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return kerr.UnknownServerError
	}
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend:
		return kerr.CoordinatorNotAvailable
	case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
		return kerr.NotCoordinator
	case kerr.RequestTimedOut:
		return kerr.RebalanceInProgress
	case kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidFetchSize:
		return kerr.UnknownServerError
	}
	return ke
}

// offsetWriteError maps an append failure of offset commits as Kafka's storeOffsets does.
func offsetWriteError(err error) *kerr.Error {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return kerr.UnknownServerError
	}
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
		return kerr.CoordinatorNotAvailable
	case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
		return kerr.NotCoordinator
	case kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidFetchSize:
		return kerr.InvalidCommitOffsetSize
	}
	return ke
}

// LoadComplete ends loading (after Replay of every record, or for a new partition): loaded
// members get a full session timeout from now to heartbeat, and the offset expiry check is
// scheduled.
func (s *Shard) LoadComplete(now int64) Ready {
	s.begin(now)
	for _, g := range s.groups {
		if g.cons != nil {
			s.loadConsumerGroup(g)
			continue
		}
		g.computeSubscribed()
		for _, m := range g.order {
			s.scheduleHeartbeat(g, m, int64(m.SessionTimeoutMs))
		}
	}
	s.timers.Set(timerKey{kind: timerExpiry}, now+s.cfg.OffsetsRetentionCheckMs)
	return s.end()
}
