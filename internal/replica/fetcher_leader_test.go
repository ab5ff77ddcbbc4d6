package replica

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A stand-in for the remote leader in the fetcher tests: a TCP server speaking the Kafka
// protocol (kmsg) that serves Fetch, OffsetForLeaderEpoch and ListOffsets from replicaNodes
// leading their partitions on real logs (the harness's serveFetch and serveEpochEndOffset).
// An empty fetch parks until a produce or a high watermark move, or its max wait. The fetcher
// is the thing under test; this is only its peer.

type testLeader struct {
	t  testing.TB
	id int32
	ln net.Listener

	mu      sync.Mutex
	nodes   map[tp]*replicaNode
	changed chan struct{} // closed and replaced on every produce or high watermark move
	// fetched lists, per fetch request received, the partitions it named and their current
	// leader epochs.
	fetched []map[tp]int32
	fetchAt map[tp][]time.Time // when each partition was named in a fetch
	conns   map[net.Conn]bool
	stopped bool // the nodes' logs are about to close: answer nothing more from them

	partErr   atomic.Int32              // when set, every fetched partition answers this error code
	notReady  map[tp]bool               // under mu: these partitions answer NOT_LEADER_OR_FOLLOWER
	hold      atomic.Pointer[holdFetch] // the next fetch answer with records waits for release
	diverging atomic.Int64              // fetch answers that carried a diverging epoch
	epochReqs atomic.Int64              // OffsetForLeaderEpoch requests
	done      chan struct{}             // closed by close: parked fetches answer at once
	wg        sync.WaitGroup
	closeOnce sync.Once
}

type holdFetch struct {
	held    chan struct{} // closed when an answer is held
	release chan struct{} // close to send it
}

func startTestLeader(t testing.TB, id int32) *testLeader {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testLeader{t: t, id: id, ln: ln, nodes: map[tp]*replicaNode{}, changed: make(chan struct{}), done: make(chan struct{}), fetchAt: map[tp][]time.Time{}, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *testLeader) addr() string { return s.ln.Addr().String() }

func (s *testLeader) close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		if h := s.hold.Load(); h != nil {
			close(h.release)
		}
		s.wg.Wait()
	})
}

// newLogNode is a replicaNode for partition name ("t-0") of broker id, with log config cfg.
func newLogNode(t testing.TB, id int32, name string) *replicaNode {
	n := &replicaNode{t: t, id: id, dir: filepath.Join(t.TempDir(), fmt.Sprintf("broker%d", id), name), answers: map[any]error{}}
	n.open()
	t.Cleanup(func() { n.log.Close() })
	return n
}

// lead makes a new node lead topic-part with reg and serves it.
func (s *testLeader) lead(topic string, part int32, reg Registration) *replicaNode {
	n := newLogNode(s.t, s.id, fmt.Sprintf("%s-%d", topic, part))
	n.lead(reg, time.Now().UnixMilli())
	s.serve(topic, part, n)
	return n
}

// serve serves n (already leading) as topic-part.
func (s *testLeader) serve(topic string, part int32, n *replicaNode) {
	s.mu.Lock()
	s.nodes[tp{topic, part}] = n
	s.mu.Unlock()
	// Cleanups run last-in first-out: this one before n's log closes.
	s.t.Cleanup(func() {
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
	})
}

// do runs fn on the node of topic-part under the server's lock, then wakes parked fetches.
func (s *testLeader) do(topic string, part int32, fn func(n *replicaNode)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.nodes[tp{topic, part}])
	s.bumpLocked()
}

func (s *testLeader) produce(topic string, part int32, values ...string) {
	s.do(topic, part, func(n *replicaNode) { n.produce(time.Now().UnixMilli(), values...) })
}

func (s *testLeader) bumpLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// state reads a node's log end offset and high watermark.
func (s *testLeader) state(topic string, part int32) (leo, hw int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.nodes[tp{topic, part}]
	return n.log.LogEndOffset(), n.hw
}

func (s *testLeader) fetches() []map[tp]int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[tp]int32(nil), s.fetched...)
}

func (s *testLeader) fetchTimes(k tp) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.fetchAt[k]...)
}

func (s *testLeader) openConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *testLeader) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			c.Close()
		}()
	}
}

// serveConn answers one connection's requests in order.
func (s *testLeader) serveConn(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		var size [4]byte
		if _, err := io.ReadFull(br, size[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(br, body); err != nil {
			return
		}
		r := kbin.Reader{Src: body}
		key, version, corr := r.Int16(), r.Int16(), r.Int32()
		r.NullableString()
		req := kmsg.RequestForKey(key)
		if req == nil {
			return
		}
		req.SetVersion(version)
		if req.IsFlexible() {
			for n := r.Uvarint(); n > 0; n-- {
				r.Uvarint()
				r.Span(int(r.Uvarint()))
			}
		}
		if !r.Ok() {
			return
		}
		if err := req.ReadFrom(r.Src); err != nil {
			return
		}
		var resp kmsg.Response
		switch req := req.(type) {
		case *kmsg.FetchRequest:
			resp = s.fetch(req)
		case *kmsg.OffsetForLeaderEpochRequest:
			resp = s.offsetForLeaderEpoch(req)
		case *kmsg.ListOffsetsRequest:
			resp = s.listOffsets(req)
		default:
			return
		}
		out := binary.BigEndian.AppendUint32(make([]byte, 4), uint32(corr))
		if req.IsFlexible() {
			out = append(out, 0)
		}
		out = resp.AppendTo(out)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

func epochErrCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrFencedLeaderEpoch):
		return kerr.FencedLeaderEpoch.Code
	case errors.Is(err, ErrUnknownLeaderEpoch):
		return kerr.UnknownLeaderEpoch.Code
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

func (s *testLeader) fetch(req *kmsg.FetchRequest) kmsg.Response {
	deadline := time.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	for {
		s.mu.Lock()
		changed := s.changed
		resp, bytes, final := s.fetchLocked(req)
		s.mu.Unlock()
		if final || bytes > 0 || time.Now().After(deadline) {
			if h := s.hold.Load(); h != nil && bytes > 0 && s.hold.CompareAndSwap(h, nil) {
				close(h.held)
				<-h.release
			}
			return resp
		}
		select {
		case <-changed:
		case <-s.done:
			return resp
		case <-time.After(time.Until(deadline)):
		}
	}
}

// fetchLocked answers req now: the answer, its record bytes, and whether it must go now (an
// error or a diverging epoch).
func (s *testLeader) fetchLocked(req *kmsg.FetchRequest) (*kmsg.FetchResponse, int, bool) {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(req.Version)
	if s.stopped {
		return resp, 0, true
	}
	named := map[tp]int32{}
	total, final := 0, false
	now := time.Now()
	for _, rt := range req.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			k := tp{rt.Topic, rp.Partition}
			named[k] = rp.CurrentLeaderEpoch
			s.fetchAt[k] = append(s.fetchAt[k], now)
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = rp.Partition
			n := s.nodes[k]
			switch {
			case n == nil:
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case s.partErr.Load() != 0:
				p.ErrorCode = int16(s.partErr.Load())
			case s.notReady[k]:
				p.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				hw := n.hw
				ans := serveFetch(n, req.ReplicaID, FollowerRequest{Kind: RequestFetch, CurrentLeaderEpoch: rp.CurrentLeaderEpoch, FetchOffset: rp.FetchOffset, LastFetchedEpoch: rp.LastFetchedEpoch, LogStartOffset: rp.LogStartOffset}, now.UnixMilli())
				if n.hw != hw {
					s.bumpLocked()
				}
				p.ErrorCode = epochErrCode(ans.Err)
				p.HighWatermark, p.LastStableOffset, p.LogStartOffset = ans.HighWatermark, ans.HighWatermark, ans.LogStartOffset
				if d := ans.DivergingEpoch; d != nil {
					p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = d.Epoch, d.EndOffset
					s.diverging.Add(1)
				}
				p.RecordBatches = cutAtMaxBytes(ans.Records, int(rp.PartitionMaxBytes))
			}
			if p.ErrorCode != 0 || p.DivergingEpoch.EndOffset >= 0 {
				final = true
			}
			total += len(p.RecordBatches)
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	s.fetched = append(s.fetched, named)
	return resp, total, final
}

// cutAtMaxBytes cuts records at max bytes as Kafka's leader may, leaving a partial last batch,
// but never below the first whole batch (KIP-74).
func cutAtMaxBytes(records []byte, maxBytes int) []byte {
	if len(records) <= maxBytes {
		return records
	}
	first := int(binary.BigEndian.Uint32(records[8:12])) + 12
	return records[:min(len(records), max(maxBytes, first))]
}

func (s *testLeader) offsetForLeaderEpoch(req *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	s.epochReqs.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	resp.SetVersion(req.Version)
	if s.stopped {
		return resp
	}
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetForLeaderEpochResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			p.Partition = rp.Partition
			if n := s.nodes[tp{rt.Topic, rp.Partition}]; n == nil {
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				ans, err := serveEpochEndOffset(n, FollowerRequest{Kind: RequestOffsetForLeaderEpoch, CurrentLeaderEpoch: rp.CurrentLeaderEpoch, LeaderEpoch: rp.LeaderEpoch})
				p.ErrorCode = epochErrCode(err)
				p.LeaderEpoch, p.EndOffset = ans.Epoch, ans.EndOffset
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func (s *testLeader) listOffsets(req *kmsg.ListOffsetsRequest) kmsg.Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := kmsg.NewPtrListOffsetsResponse()
	resp.SetVersion(req.Version)
	if s.stopped {
		return resp
	}
	for _, rt := range req.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition = rp.Partition
			n := s.nodes[tp{rt.Topic, rp.Partition}]
			switch {
			case n == nil:
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case CheckCurrentLeaderEpoch(n.leader.LeaderEpoch(), rp.CurrentLeaderEpoch) != nil:
				p.ErrorCode = epochErrCode(CheckCurrentLeaderEpoch(n.leader.LeaderEpoch(), rp.CurrentLeaderEpoch))
			case rp.Timestamp == -2:
				p.Offset = n.log.LogStartOffset()
			default:
				p.Offset = n.log.LogEndOffset()
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// testReplica is a follower partition for the fetcher: a replicaNode's log and epoch cache,
// applying whatever it is given (so the tests see what the fetcher itself lets through).
type testReplica struct {
	n     *replicaNode
	topic string
	part  int32

	mu      sync.Mutex
	applies []appliedAction
}

type appliedAction struct {
	epoch int32
	act   FollowerAction
}

var _ followed = (*testReplica)(nil)

func newTestReplica(t testing.TB, id int32, topic string, part int32) *testReplica {
	return &testReplica{n: newLogNode(t, id, fmt.Sprintf("%s-%d", topic, part)), topic: topic, part: part}
}

func (r *testReplica) topicPartition() (string, int32) { return r.topic, r.part }

func (r *testReplica) LocalLog() LocalLog {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n.local()
}

func (r *testReplica) ApplyFollower(leaderEpoch int32, act FollowerAction) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applies = append(r.applies, appliedAction{leaderEpoch, act})
	leo, err := ApplyFollowerAction(r.n.log, r.n.epochs, act)
	if err != nil {
		return leo, err
	}
	if act.HighWatermark >= 0 {
		r.n.hw = act.HighWatermark
	}
	return leo, nil
}

func (r *testReplica) SetFollowerHighWatermark(hw int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n.hw = min(hw, r.n.log.LogEndOffset())
	r.n.log.SetHighWatermark(r.n.hw)
}

func (r *testReplica) state() (leo, hw int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n.log.LogEndOffset(), r.n.hw
}

// appliedCount is how many actions were applied so far; appliedFrom lists those from i on.
func (r *testReplica) appliedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.applies)
}

func (r *testReplica) appliedFrom(i int) []appliedAction {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]appliedAction(nil), r.applies[i:]...)
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
