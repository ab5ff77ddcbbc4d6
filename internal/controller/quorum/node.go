// Package quorum runs the controller quorum: the metadata state machine (package state)
// replicated by etcd raft (go.etcd.io/raft/v3) among the controllers of
// controller.quorum.voters.
//
// One goroutine owns the raft node, the state machine and the storage (the run loop). It
// ticks raft on a ticker, steps messages from the transport, and handles each raft Ready in
// the order raft requires: persist the hard state, entries and any received snapshot
// (fsynced), then send the messages, then apply committed entries to the state machine,
// then Advance. Every SnapshotEntries applied entries it snapshots the state machine,
// compacts the raft log and rewrites the WAL.
//
// The raft leader is the active controller once it has applied the first entry of its own
// term (so its image holds everything committed before it). Commands (Do) run on the loop
// against that image, one at a time: a command's records are proposed as one entry and the
// next command runs only after that entry has applied, so every command sees the effect of
// the one before. A command that produces no records is answered at once. Followers refuse
// commands with NOT_CONTROLLER (proposal forwarding is off: a command must be computed on
// the node whose image is current). If leadership is lost while a proposal is in flight its
// caller gets NOT_CONTROLLER although the entry may still commit (as with Kafka, a retried
// CreateTopics may then see TOPIC_ALREADY_EXISTS).
//
// Raft ids are node.id + 1 (raft reserves 0). The voter set is static: it comes from
// controller.quorum.voters and is stored in every snapshot; there are no membership changes.
//
// Brokers (later: raft learners or fetchers over the network) follow the committed log
// through OnCommit (pushed on the loop) or ReadCommitted/LatestSnapshot (pulled).
package quorum

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/storage"
)

// Errors returned to callers. ErrNotController wraps kerr.NotController so the api layer
// answers NOT_CONTROLLER.
var (
	ErrNotController = fmt.Errorf("quorum: not the active controller: %w", kerr.NotController)
	ErrStopped       = errors.New("quorum: controller stopped")
	// ErrCompacted: ReadCommitted was asked for entries folded into a snapshot; read
	// LatestSnapshot and continue after its offset.
	ErrCompacted = errors.New("quorum: entries compacted into a snapshot")
)

// snapshotWALBytes also triggers a snapshot (and so a WAL rewrite): a few huge entries must
// not grow the WAL without bound before SnapshotEntries is reached.
const snapshotWALBytes = 64 << 20

// Config configures one controller of the quorum.
type Config struct {
	NodeID    int32          // node.id
	Voters    []config.Voter // controller.quorum.voters; must include NodeID
	ClusterID string         // checked on every controller connection
	Dir       string         // raft storage directory (WAL and snapshots)
	FS        storage.FS     // default storage.OS
	// Listener is the bound CONTROLLER listener. Nil: listen on this node's voter address.
	Listener net.Listener
	// Dial connects to a peer's CONTROLLER listener (default: TCP). On a TLS controller
	// listener it runs the TLS handshake too (security.PeerTLS), so the peer's hello and
	// messages cross encrypted.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Admit, if set, vets each connection Listener accepts before its hello is read; an
	// error closes the connection with a log line. On a TLS controller listener it
	// requires a verified client certificate (security.VerifyPeer).
	Admit func(net.Conn) error
	// TickInterval is raft's tick (default 50 ms). A follower campaigns after
	// ElectionTicks..2*ElectionTicks ticks without hearing from a leader (default 10, so a
	// dead leader is replaced in 0.5-1 s); the leader heartbeats every HeartbeatTicks
	// (default 2: every 100 ms) and, with CheckQuorum, steps down after an election timeout
	// without hearing from a majority.
	TickInterval   time.Duration
	ElectionTicks  int
	HeartbeatTicks int
	// CampaignAtStart makes a voter of a new quorum (no term yet) campaign as it starts,
	// instead of after an election timeout. For voters started together (an embedded
	// cluster): one of them leads at once, and any other order of events is still raft's
	// election, only sooner. A quorum of one always campaigns at start.
	CampaignAtStart bool
	// SnapshotEntries: snapshot the state machine every this many applied entries (default
	// 10,000); CatchUpEntries are kept behind a snapshot for slow followers (default 1,000).
	SnapshotEntries uint64
	CatchUpEntries  uint64
	// MaxMessageBytes is the largest raft message accepted from a peer (default 256 MiB).
	MaxMessageBytes int
	State           state.Config
	// CommitLatency, if set, is told how long each of this controller's proposals took from
	// proposing to applying its commit (Kafka's raft-metrics commit-latency). It is called
	// on the raft loop: it must not block.
	CommitLatency func(time.Duration)
	// AutoLeaderRebalance (auto.leader.rebalance.enable) makes the active controller check
	// the leader imbalance every ImbalanceCheckInterval (leader.imbalance.check.interval.seconds,
	// default 300 s) and move leadership back to preferred replicas when a broker's share of
	// partitions led by another broker exceeds ImbalancePct percent
	// (leader.imbalance.per.broker.percentage); see rebalance.go.
	AutoLeaderRebalance    bool
	ImbalanceCheckInterval time.Duration
	ImbalancePct           int
	Now                    func() time.Time // default time.Now
	Logger                 *slog.Logger     // default slog.Default()
	// OnCommit is called on the run loop after each entry applies (and with Snapshot set when
	// a snapshot from the leader replaced the image). It must not block; it must not modify
	// the records.
	OnCommit func(Committed)
}

// Committed is one applied log entry as a follower of the metadata log sees it: a batch of
// records at Offset (the raft index), or, when Snapshot is set, an image snapshot
// (state.Restore) as of Offset that replaces everything before it.
type Committed struct {
	Offset   int64
	Records  []state.Record
	Snapshot []byte
}

// Status is a node's view of the quorum.
type Status struct {
	NodeID  int32
	Leader  int32 // node id of the raft leader, -1 if unknown
	Term    uint64
	Applied int64 // metadata offset applied to this node's image
	// Committed is the highest offset this node knows committed (raft's commit index, as of
	// the last status published: at least Applied).
	Committed int64
	Active    bool // this node is the active controller
}

// Node is one running controller.
type Node struct {
	cfg  Config
	id   uint64 // raft id
	log  *slog.Logger
	rn   *raft.RawNode
	st   *diskStorage
	tr   *transport
	ctrl *state.Controller

	recvc  chan *pb.Message
	eventc chan transportEvent
	propc  chan *proposal
	readc  chan *readReq
	stopc  chan struct{}
	donec  chan struct{}
	once   sync.Once
	status atomic.Pointer[Status]
	fatal  atomic.Pointer[error]
	// noHandOff is set by CloseNoHandOff before stopc closes.
	noHandOff atomic.Bool

	appliedSig appliedSignal // wakes Applied's waiters when applied moves (watch.go)

	// Owned by the run loop.
	lead uint64
	// formerLead is the last leader other than this node (raft id; raft.None if none).
	formerLead uint64
	isLeader   bool
	active     bool
	applied    uint64
	snapIndex  uint64
	seq        uint64
	queue      []*proposal
	inflight   *proposal
	expireDue  bool
	rb         rebalancer
}

type proposal struct {
	ctx  context.Context
	cmd  func(c *state.Controller, nowMs int64) ([]state.Record, any)
	done chan result // buffered: the loop never blocks on it
	seq  uint64
	resp any
	at   time.Time // when it was proposed to raft
}

type result struct {
	resp any
	err  error
}

func (p *proposal) finish(resp any, err error) {
	if p.done != nil {
		p.done <- result{resp, err}
	}
}

type readReq struct {
	fn   func(c *state.Controller)
	done chan struct{}
}

func (cfg *Config) setDefaults() {
	if cfg.FS == nil {
		cfg.FS = storage.OS
	}
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = 50 * time.Millisecond
	}
	if cfg.ElectionTicks <= 0 {
		cfg.ElectionTicks = 10
	}
	if cfg.HeartbeatTicks <= 0 {
		cfg.HeartbeatTicks = 2
	}
	if cfg.SnapshotEntries == 0 {
		cfg.SnapshotEntries = 10_000
	}
	if cfg.CatchUpEntries == 0 {
		cfg.CatchUpEntries = 1_000
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = 256 << 20
	}
	if cfg.ImbalanceCheckInterval <= 0 {
		cfg.ImbalanceCheckInterval = 300 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
}

// Start opens the controller's storage (recovering from a crash), restores the state machine
// from the newest snapshot, and starts raft, the transport and the run loop.
func Start(cfg Config) (*Node, error) {
	cfg.setDefaults()
	if cfg.ElectionTicks <= cfg.HeartbeatTicks {
		return nil, fmt.Errorf("quorum: election ticks (%d) must exceed heartbeat ticks (%d)", cfg.ElectionTicks, cfg.HeartbeatTicks)
	}
	if cfg.State.ClusterID == "" {
		cfg.State.ClusterID = cfg.ClusterID
	}
	addrs := map[uint64]string{}
	var voters []uint64
	for _, v := range cfg.Voters {
		addrs[uint64(v.ID)+1] = net.JoinHostPort(v.Host, strconv.Itoa(v.Port))
		voters = append(voters, uint64(v.ID)+1)
	}
	id := uint64(cfg.NodeID) + 1
	if cfg.NodeID < 0 || addrs[id] == "" {
		return nil, fmt.Errorf("quorum: node %d is not in controller.quorum.voters", cfg.NodeID)
	}
	slices.Sort(voters)
	cs := &pb.ConfState{Voters: voters}
	st, err := openStorage(cfg.FS, cfg.Dir, cs)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger.With("controller", cfg.NodeID)
	if r := st.recovered; r.TornBytes > 0 || r.SnapshotIndex > 0 || r.Entries > 0 {
		log.Info("recovered controller log", "snapshot_offset", r.SnapshotIndex, "entries", r.Entries, "torn_bytes_dropped", r.TornBytes)
	}
	ctrl := state.New(cfg.State)
	snapIndex := st.snap.GetMetadata().GetIndex()
	if snapIndex > 0 {
		if err := ctrl.Restore(st.snap.GetData()); err != nil {
			st.close()
			return nil, fmt.Errorf("quorum: snapshot %d: %w", snapIndex, err)
		}
	}
	rn, err := raft.NewRawNode(&raft.Config{
		ID:                        id,
		ElectionTick:              cfg.ElectionTicks,
		HeartbeatTick:             cfg.HeartbeatTicks,
		Storage:                   st,
		Applied:                   snapIndex,
		MaxSizePerMsg:             1 << 20,
		MaxInflightMsgs:           256,
		CheckQuorum:               true,
		PreVote:                   true,
		DisableProposalForwarding: true,
		Logger:                    raftLogger{log},
	})
	if err != nil {
		st.close()
		return nil, err
	}
	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", addrs[id]); err != nil {
			st.close()
			return nil, err
		}
	}
	n := &Node{
		cfg: cfg, id: id, log: log, rn: rn, st: st, ctrl: ctrl,
		recvc:   make(chan *pb.Message, 4096),
		eventc:  make(chan transportEvent, 1024),
		propc:   make(chan *proposal),
		readc:   make(chan *readReq),
		stopc:   make(chan struct{}),
		donec:   make(chan struct{}),
		applied: snapIndex, snapIndex: snapIndex,
	}
	n.tr = newTransport(id, cfg.ClusterID, ln, addrs, cfg.MaxMessageBytes, log, n.deliver, n.event)
	if cfg.Dial != nil {
		n.tr.dial = cfg.Dial
	}
	n.tr.admit = cfg.Admit
	if len(voters) == 1 || (cfg.CampaignAtStart && rn.BasicStatus().HardState.GetTerm() == 0) {
		// A quorum of one need not wait out an election timeout (0.5-1 s) to lead: the
		// embedded single-node broker is ready as soon as its log is open. Nor need a new
		// quorum whose voters start together (CampaignAtStart).
		if err := rn.Campaign(); err != nil {
			st.close()
			return nil, err
		}
	}
	n.publishStatus()
	n.tr.start()
	go n.run()
	return n, nil
}

// deliver hands a received message to the loop; a full queue drops it (raft retries).
func (n *Node) deliver(m *pb.Message) {
	select {
	case n.recvc <- m:
	default:
	}
}

func (n *Node) event(ev transportEvent) {
	select {
	case n.eventc <- ev:
	default:
	}
}

// Close stops the node: the loop, the transport, the storage. Pending commands fail with
// ErrStopped. Everything acknowledged was already durable, so Close and a crash leave the
// same state on disk. The leader of a quorum of several first hands its leadership to the
// most caught-up voter (handOff), for at most an election timeout.
func (n *Node) Close() error {
	n.once.Do(func() { close(n.stopc) })
	return n.wait()
}

// CloseNoHandOff is Close without the hand-off: for a quorum whose voters all stop
// together, where no voter would take the leadership and waiting for one only delays the
// stop by an election timeout.
func (n *Node) CloseNoHandOff() error {
	n.noHandOff.Store(true)
	return n.Close()
}

func (n *Node) wait() error {
	<-n.donec
	n.tr.stop()
	return n.st.close()
}

// Done is closed once the node has stopped: after Close, or on its own after a storage
// failure (then Err says why). A controller that cannot write its log cannot go on (Kafka's
// KafkaRaftClient halts the process on a log I/O error); the process that runs it stops.
func (n *Node) Done() <-chan struct{} { return n.donec }

// Err returns the fatal error that stopped the node (a storage failure), or nil.
func (n *Node) Err() error {
	if e := n.fatal.Load(); e != nil {
		return *e
	}
	return nil
}

// Status returns the node's current view (safe from any goroutine).
func (n *Node) Status() Status { return *n.status.Load() }

// Addr is the address the node listens on for its peers.
func (n *Node) Addr() net.Addr { return n.tr.ln.Addr() }

func (n *Node) publishStatus() {
	hs := n.rn.BasicStatus()
	leader := int32(-1)
	if n.lead != raft.None {
		leader = int32(n.lead - 1)
	}
	n.status.Store(&Status{NodeID: n.cfg.NodeID, Leader: leader, Term: hs.HardState.GetTerm(), Applied: int64(n.applied), Committed: max(int64(hs.HardState.GetCommit()), int64(n.applied)), Active: n.active})
	n.appliedSig.set(int64(n.applied))
}

// Do runs a command on the active controller: cmd computes records and a response from the
// current image (on the run loop; it must not keep the controller), the records are
// committed by the quorum and applied, then the response is returned. A command producing
// no records is answered without a log write. On a follower, or if leadership is lost
// before the records commit, the error is ErrNotController. If ctx ends after the records
// were proposed they may still commit.
func Do[R any](ctx context.Context, n *Node, cmd func(c *state.Controller, nowMs int64) ([]state.Record, R)) (R, error) {
	var zero R
	p := &proposal{
		ctx:  ctx,
		cmd:  func(c *state.Controller, now int64) ([]state.Record, any) { recs, r := cmd(c, now); return recs, r },
		done: make(chan result, 1),
	}
	select {
	case n.propc <- p:
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-n.donec:
		return zero, ErrStopped
	}
	select {
	case r := <-p.done:
		if r.err != nil {
			return zero, r.err
		}
		return r.resp.(R), nil
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-n.donec:
		return zero, ErrStopped
	}
}

// Read runs fn on the run loop with the node's controller: a consistent view of the image
// as of the node's applied offset (on a follower it may lag the leader). fn must not keep
// the controller or modify it.
func (n *Node) Read(ctx context.Context, fn func(c *state.Controller)) error {
	r := &readReq{fn: fn, done: make(chan struct{})}
	select {
	case n.readc <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-n.donec:
		return ErrStopped
	}
	select {
	case <-r.done:
		return nil
	case <-n.donec:
		return ErrStopped
	}
}

// ReadCommitted returns up to max applied entries with records, starting at offset from
// (the raft index; entries without records are skipped). ErrCompacted means from is
// before the oldest retained entry: read LatestSnapshot and continue after its offset.
func (n *Node) ReadCommitted(from int64, max int) ([]Committed, error) {
	applied := uint64(n.Status().Applied)
	if from < 1 || uint64(from) < n.st.firstIndex() {
		return nil, ErrCompacted
	}
	if uint64(from) > applied || max <= 0 {
		return nil, nil
	}
	hi := min(applied, uint64(from)+uint64(max)-1)
	ents, err := n.st.Entries(uint64(from), hi+1, math.MaxUint64)
	if errors.Is(err, raft.ErrCompacted) {
		return nil, ErrCompacted
	}
	if err != nil {
		return nil, err
	}
	var out []Committed
	for _, e := range ents {
		if e.GetType() != pb.EntryNormal || len(e.GetData()) == 0 {
			continue
		}
		_, _, recs, err := decodeEntry(e.GetData())
		if err != nil {
			return nil, fmt.Errorf("quorum: entry %d: %w", e.GetIndex(), err)
		}
		out = append(out, Committed{Offset: int64(e.GetIndex()), Records: recs})
	}
	return out, nil
}

// LatestSnapshot returns the newest stored image snapshot and its offset (0 and nil before
// the first snapshot).
func (n *Node) LatestSnapshot() (int64, []byte, error) {
	snap, err := n.st.Snapshot()
	if err != nil {
		return 0, nil, err
	}
	return int64(snap.GetMetadata().GetIndex()), snap.GetData(), nil
}

func (n *Node) nowMs() int64 { return n.cfg.Now().UnixMilli() }

func (n *Node) run() {
	defer close(n.donec)
	ticker := time.NewTicker(n.cfg.TickInterval)
	defer ticker.Stop()
	stopc := n.stopc
	var handOffUntil <-chan time.Time // set while handing off the leadership before stopping
	// What Start left pending (a campaign's own vote) is handled now, not at the first tick.
	if !n.processed() {
		return
	}
	for {
		select {
		case <-stopc:
			if !n.handOff() {
				n.failAll(ErrStopped)
				return
			}
			stopc = nil
			handOffUntil = time.After(time.Duration(n.cfg.ElectionTicks) * n.cfg.TickInterval)
		case <-handOffUntil:
			n.log.Warn("controller leadership not handed off before stopping; the other voters elect a leader when their election timeout passes")
			n.failAll(ErrStopped)
			return
		case <-ticker.C:
			n.rn.Tick()
			n.expireDue = n.active
		case m := <-n.recvc:
			if err := n.rn.Step(m); err != nil {
				// A message from a peer raft does not know, or a proposal it dropped.
				n.log.Debug("raft refused a message", "from", int64(m.GetFrom())-1, "type", m.GetType().String(), "err", err)
			}
		case ev := <-n.eventc:
			if ev.unreachable {
				n.rn.ReportUnreachable(ev.to)
			}
			if ev.snapshot {
				st := raft.SnapshotFinish
				if !ev.snapOK {
					st = raft.SnapshotFailure
				}
				n.rn.ReportSnapshot(ev.to, st)
			}
		case p := <-n.propc:
			n.queue = append(n.queue, p)
		case r := <-n.readc:
			r.fn(n.ctrl)
			close(r.done)
		}
		if !n.processed() {
			return
		}
		if stopc == nil && !n.isLeader && n.lead != raft.None {
			// Another voter leads: it heard from a majority, so the votes it needed (ours, in
			// a quorum of two) have arrived, and it tells the others what is committed.
			n.log.Info("controller leadership handed off before stopping", "leader", int64(n.lead)-1)
			n.failAll(ErrStopped)
			return
		}
	}
}

// processed runs process and publishes the status; false means the node stopped on a
// storage failure (recorded for Err) and the loop must end.
func (n *Node) processed() bool {
	if err := n.process(); err != nil {
		n.fatal.Store(&err)
		n.log.Error("controller stopped: storage failure", "err", err)
		n.active = false
		n.publishStatus()
		n.failAll(ErrStopped)
		return false
	}
	n.publishStatus()
	return true
}

// handOff starts moving the leadership to the voter with the most of the log, when this node
// leads a quorum of several; it reports whether it did. Without it the other voters learn
// that the last entries the stopping leader committed (a controlled shutdown's own leadership
// moves, say) are committed only once they elect a leader after an election timeout, so the
// brokers would act on them up to a second late. raft sends the voter MsgTimeoutNow once it
// has the whole log, and the voter campaigns at once (Kafka's resigning leader sends
// EndQuorumEpoch for the same reason).
func (n *Node) handOff() bool {
	if !n.isLeader || n.noHandOff.Load() {
		return false
	}
	var to, match uint64
	for id, pr := range n.rn.Status().Progress {
		if id != n.id && (to == 0 || pr.Match > match) {
			to, match = id, pr.Match
		}
	}
	if to == 0 {
		return false
	}
	n.log.Info("controller stopping: handing the leadership off", "to", int64(to)-1)
	n.rn.TransferLeader(to)
	n.failQueued(ErrStopped)
	return true
}

// process handles every pending Ready and proposes queued commands until neither is left.
func (n *Node) process() error {
	for {
		for n.rn.HasReady() {
			if err := n.handleReady(); err != nil {
				return err
			}
		}
		if !n.propose() {
			return nil
		}
	}
}

func (n *Node) handleReady() error {
	rd := n.rn.Ready()
	if rd.SoftState != nil {
		n.lead = rd.SoftState.Lead
		if l := rd.SoftState.Lead; l != raft.None && l != n.id {
			n.formerLead = l
		}
		leader := rd.SoftState.RaftState == raft.StateLeader
		if n.isLeader && !leader {
			n.log.Info("controller lost leadership", "leader", int64(n.lead)-1)
			n.active = false
			n.failAll(ErrNotController)
		}
		n.isLeader = leader
	}
	if err := n.st.save(rd.HardState, rd.Entries, rd.Snapshot, rd.MustSync); err != nil {
		return fmt.Errorf("persisting raft state: %w", err)
	}
	n.tr.send(rd.Messages) // only now: what they acknowledge is durable
	if rd.Snapshot != nil && !raft.IsEmptySnap(rd.Snapshot) {
		idx := rd.Snapshot.GetMetadata().GetIndex()
		if err := n.ctrl.Restore(rd.Snapshot.GetData()); err != nil {
			return fmt.Errorf("restoring snapshot %d from the leader: %w", idx, err)
		}
		n.applied, n.snapIndex = idx, idx
		n.log.Info("installed controller snapshot from the leader", "offset", idx)
		if n.cfg.OnCommit != nil {
			n.cfg.OnCommit(Committed{Offset: int64(idx), Snapshot: rd.Snapshot.GetData()})
		}
	}
	for _, e := range rd.CommittedEntries {
		n.apply(e)
	}
	n.rn.Advance(rd)
	if n.applied > n.snapIndex && (n.applied-n.snapIndex >= n.cfg.SnapshotEntries || n.st.wal.size >= snapshotWALBytes) {
		if err := n.st.snapshot(n.applied, n.ctrl.Snapshot(), n.cfg.CatchUpEntries); err != nil {
			return fmt.Errorf("snapshot at %d: %w", n.applied, err)
		}
		n.snapIndex = n.applied
	}
	return nil
}

// apply applies one committed entry to the state machine and answers its proposer.
func (n *Node) apply(e *pb.Entry) {
	idx := e.GetIndex()
	if idx <= n.applied {
		return
	}
	n.applied = idx
	switch e.GetType() {
	case pb.EntryNormal:
	default:
		n.log.Warn("ignoring a raft configuration change entry (the voter set is static)", "offset", idx)
		return
	}
	if len(e.GetData()) == 0 {
		// The empty entry a new leader appends: once it applies, the leader's image holds
		// everything committed before its term, and it may run commands.
		if n.isLeader && !n.active && e.GetTerm() == n.rn.BasicStatus().HardState.GetTerm() {
			n.active = true
			n.ctrl.ActivateSessions(n.nowMs(), int32(n.formerLead)-1) // raft ids are node ids + 1; none: -1
			n.log.Info("active controller", "term", e.GetTerm(), "offset", idx)
		}
		return
	}
	proposer, seq, recs, err := decodeEntry(e.GetData())
	if err != nil {
		// Every controller decodes the same bytes, so all skip this entry alike.
		n.log.Error("undecodable metadata log entry skipped", "offset", idx, "err", err)
		if n.inflight != nil && proposer == n.id && seq == n.inflight.seq {
			n.inflight.finish(nil, err)
			n.inflight = nil
		}
		return
	}
	aerr := n.ctrl.Apply(int64(idx), recs)
	if aerr != nil {
		n.log.Error("metadata records rejected", "offset", idx, "err", aerr)
	}
	if n.cfg.OnCommit != nil {
		n.cfg.OnCommit(Committed{Offset: int64(idx), Records: recs})
	}
	if n.inflight != nil && proposer == n.id && seq == n.inflight.seq {
		n.publishStatus() // a caller that sees its command done sees Applied cover it
		if on := n.cfg.CommitLatency; on != nil {
			on(time.Since(n.inflight.at))
		}
		if aerr != nil {
			n.inflight.finish(nil, fmt.Errorf("%w: %v", kerr.UnknownServerError, aerr))
		} else {
			n.inflight.finish(n.inflight.resp, nil)
		}
		n.inflight = nil
	}
}

// propose runs queued commands until one proposes records; it reports whether it proposed.
func (n *Node) propose() bool {
	if n.inflight != nil {
		return false
	}
	if !n.active {
		n.failQueued(ErrNotController)
		n.expireDue = false
		return false
	}
	now := n.nowMs()
	if n.expireDue {
		n.expireDue = false
		recs, fenced, unclean := n.ctrl.ExpireSessions(now)
		if len(recs) > 0 {
			n.log.Warn("fencing brokers whose session expired", "brokers", fenced)
			for _, tp := range unclean {
				n.log.Warn("unclean leader election: records only on the old ISR are lost", "topic", tp.Topic, "partition", tp.Partition)
			}
			if n.submit(&proposal{ctx: context.Background()}, recs) {
				return true
			}
		}
		if recs := n.rebalanceLeaders(now); len(recs) > 0 && n.submit(&proposal{ctx: context.Background()}, recs) {
			return true
		}
		if recs := n.ctrl.ExpireDelegationTokens(now); len(recs) > 0 {
			n.log.Info("removing expired delegation tokens", "tokens", len(recs))
			if n.submit(&proposal{ctx: context.Background()}, recs) {
				return true
			}
		}
	}
	for len(n.queue) > 0 {
		p := n.queue[0]
		n.queue[0] = nil
		n.queue = n.queue[1:]
		if err := p.ctx.Err(); err != nil {
			p.finish(nil, err)
			continue
		}
		recs, resp := p.cmd(n.ctrl, now)
		p.resp = resp
		if len(recs) == 0 {
			p.finish(resp, nil)
			continue
		}
		if n.submit(p, recs) {
			return true
		}
	}
	return false
}

func (n *Node) submit(p *proposal, recs []state.Record) bool {
	n.seq++
	p.seq = n.seq
	p.at = time.Now()
	if err := n.rn.Propose(encodeEntry(n.id, p.seq, recs)); err != nil {
		p.finish(nil, fmt.Errorf("%w (%v)", ErrNotController, err))
		return false
	}
	n.inflight = p
	return true
}

func (n *Node) failQueued(err error) {
	for _, p := range n.queue {
		p.finish(nil, err)
	}
	n.queue = n.queue[:0]
}

func (n *Node) failAll(err error) {
	if n.inflight != nil {
		n.inflight.finish(nil, err)
		n.inflight = nil
	}
	n.failQueued(err)
}

// raftLogger sends raft's log to slog; raft's chatty info lines go to debug.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...any)                 { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Debugf(format string, v ...any) { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r raftLogger) Info(v ...any)                  { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Infof(format string, v ...any)  { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r raftLogger) Warning(v ...any)               { r.l.Warn(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(f string, v ...any)    { r.l.Warn(fmt.Sprintf(f, v...)) }
func (r raftLogger) Error(v ...any)                 { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(f string, v ...any)      { r.l.Error(fmt.Sprintf(f, v...)) }
func (r raftLogger) Fatal(v ...any)                 { r.l.Error(fmt.Sprint(v...)); panic(fmt.Sprint(v...)) }
func (r raftLogger) Fatalf(f string, v ...any)      { r.Fatal(fmt.Sprintf(f, v...)) }
func (r raftLogger) Panic(v ...any)                 { panic(fmt.Sprint(v...)) }
func (r raftLogger) Panicf(f string, v ...any)      { panic(fmt.Sprintf(f, v...)) }
