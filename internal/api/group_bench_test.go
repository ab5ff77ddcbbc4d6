package api_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// benchGroup is a group driven over raw connections, one per member (a parked JoinGroup
// holds its connection), as a benchmark harness.
type benchGroup struct {
	tb      testing.TB
	topic   string
	parts   int32
	conns   []*groupConn
	ids     []string
	gen     int32
	meta    []byte
	timeout int32
}

func newBenchGroup(tb testing.TB, addr, topic string, parts int32, members int) *benchGroup {
	g := &benchGroup{tb: tb, topic: topic, parts: parts, ids: make([]string, members), timeout: 60000}
	for i := 0; i < members; i++ {
		g.conns = append(g.conns, dialGroupConn(tb, addr))
	}
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = []string{topic}
	g.meta = m.AppendTo(nil)
	return g
}

// reserve does a new member's first JoinGroup, which only hands out its member id.
func (g *benchGroup) reserve(i int) {
	r := g.join(i)
	if r.ErrorCode != kerr.MemberIDRequired.Code {
		g.tb.Fatalf("first join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	g.ids[i] = r.MemberID
}

// join sends member i's JoinGroup.
func (g *benchGroup) join(i int) *kmsg.JoinGroupResponse {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID = "bench", g.ids[i]
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = g.timeout, g.timeout
	req.ProtocolType = "consumer"
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: g.meta}}
	resp, err := g.conns[i].try(req, 9)
	if err != nil {
		g.tb.Error(err)
		return joinFailed()
	}
	return resp.(*kmsg.JoinGroupResponse)
}

// grow has new member i join a Stable group: its JoinGroup (both round trips) starts a
// rebalance, which member 0 notices by heartbeat; then the others rejoin, the leader
// assigns and everyone syncs.
func (g *benchGroup) grow(i int, others []int) {
	g.reserve(i)
	done := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { done <- g.join(i) }()
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "bench", g.ids[0], g.gen
	for g.conns[0].do(hb, 4).(*kmsg.HeartbeatResponse).ErrorCode != kerr.RebalanceInProgress.Code {
	}
	g.rejoin(others, i, done)
}

// rebalance has the given members (with member ids: reserve new ones first) join together,
// the leader assign the partitions by range, and every member sync.
func (g *benchGroup) rebalance(members []int) { g.rejoin(members, -1, nil) }

// rejoin is rebalance where member newcomer's JoinGroup is already in flight (its answer comes
// on joined).
func (g *benchGroup) rejoin(members []int, newcomer int, joined chan *kmsg.JoinGroupResponse) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	resps := map[int]*kmsg.JoinGroupResponse{}
	for _, i := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := g.join(i)
			mu.Lock()
			resps[i] = r
			mu.Unlock()
		}()
	}
	wg.Wait()
	if joined != nil {
		resps[newcomer] = <-joined
	}
	var leader *kmsg.JoinGroupResponse
	for i, r := range resps {
		if r.ErrorCode != 0 {
			g.tb.Fatalf("member %d join: %v", i, kerr.ErrorForCode(r.ErrorCode))
		}
		if len(r.Members) > 0 {
			leader = r
		}
	}
	g.gen = leader.Generation
	assign := map[string][]byte{}
	per := g.parts / int32(len(leader.Members))
	extra := g.parts % int32(len(leader.Members))
	next := int32(0)
	for k, m := range leader.Members {
		n := per
		if int32(k) < extra {
			n++
		}
		a := kmsg.NewConsumerMemberAssignment()
		t := kmsg.NewConsumerMemberAssignmentTopic()
		t.Topic = g.topic
		for p := next; p < next+n; p++ {
			t.Partitions = append(t.Partitions, p)
		}
		next += n
		a.Topics = []kmsg.ConsumerMemberAssignmentTopic{t}
		assign[m.MemberID] = a.AppendTo(nil)
	}
	for i, r := range resps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var a map[string][]byte
			if r == leader {
				a = assign
			}
			if r := rawSync(g.conns[i], "bench", g.ids[i], g.gen, a); r.ErrorCode != 0 || len(r.MemberAssignment) == 0 {
				g.tb.Errorf("member %d sync: %v", i, kerr.ErrorForCode(r.ErrorCode))
			}
		}()
	}
	wg.Wait()
}

func (g *benchGroup) leave(i int) {
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Group = "bench"
	lv.Members = []kmsg.LeaveGroupRequestMember{{MemberID: g.ids[i]}}
	if r := g.conns[i].do(lv, 5).(*kmsg.LeaveGroupResponse); r.ErrorCode != 0 || r.Members[0].ErrorCode != 0 {
		g.tb.Fatalf("leave: %+v", r)
	}
	g.ids[i] = ""
}

func span(from, to int) []int {
	var s []int
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

// BenchmarkGroupRebalance100x1000: a group of 100 members over a 1,000-partition topic. Each
// iteration one new member joins a Stable group of 99 (both JoinGroup round trips); member
// 0's heartbeat reports REBALANCE_IN_PROGRESS and the 99 rejoin at once (real clients wait
// for their next heartbeat: heartbeat.interval.ms more), the leader assigns the 1,000
// partitions by range and everyone syncs. Reported: ms from the new member's first JoinGroup
// until the last SyncGroup answer (the group is Stable). The member then leaves (untimed).
func BenchmarkGroupRebalance100x1000(b *testing.B) {
	br := testutil.StartBroker(b, "group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=50", "num.partitions=1000")
	c := dialGroupConn(b, br.Addr())
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "wide", NumPartitions: 1000, ReplicationFactor: 1}}
	if r := c.do(ct, 7).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 {
		b.Fatalf("create topic: %v", kerr.ErrorForCode(r.Topics[0].ErrorCode))
	}
	g := newBenchGroup(b, br.Addr(), "wide", 1000, 100)
	g.reserve(0)
	g.rebalance([]int{0})
	for i := 1; i < 99; i++ {
		g.reserve(i) // pending member ids hold the join phase open until all have joined
	}
	g.rebalance(span(0, 99))
	b.ResetTimer()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		g.grow(99, span(0, 99))
		total += time.Since(start)
		b.StopTimer()
		g.leave(99)
		g.rebalance(span(0, 99))
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms-to-stable")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkOffsetCommit measures the broker's CPU per OffsetCommit request (v9, 10
// partitions, from a member of a Stable group): the broker runs as its own process, and its
// user+system CPU time (/proc/<pid>/stat) over the run is divided by the requests.
func BenchmarkOffsetCommit(b *testing.B) {
	dir := b.TempDir()
	p := testutil.StartProcess(b, dir, testutil.FreePort(b), "group.initial.rebalance.delay.ms=0")
	pid := pidOf(b, dir)
	c := dialGroupConn(b, p.Addr)
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "commits", NumPartitions: 10, ReplicationFactor: 1}}
	c.do(ct, 7)
	g := newBenchGroup(b, p.Addr, "commits", 10, 1)
	g.reserve(0)
	g.rebalance([]int{0})
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = "bench", g.ids[0], g.gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "commits"
	for p := int32(0); p < 10; p++ {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition = p
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	commit := func(i int) {
		for j := range req.Topics[0].Partitions {
			req.Topics[0].Partitions[j].Offset = int64(i)
		}
		r := c.do(req, 9).(*kmsg.OffsetCommitResponse)
		if r.Topics[0].Partitions[0].ErrorCode != 0 {
			b.Fatalf("commit: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
		}
	}
	for i := 0; i < 100; i++ { // warm up
		commit(i)
	}
	b.ResetTimer()
	cpu0 := cpuTime(b, pid)
	for i := 0; i < b.N; i++ {
		commit(i)
	}
	cpu := cpuTime(b, pid) - cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "broker-cpu-µs/commit")
}

// pidOf finds the broker process serving data dir dir.
func pidOf(tb testing.TB, dir string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmd, []byte("log.dirs="+dir+"\x00")) {
			return pid
		}
	}
	tb.Fatalf("no broker process for %s", dir)
	return 0
}

// cpuTime is a process's user+system CPU time from /proc/<pid>/stat (clock ticks of 10 ms).
func cpuTime(tb testing.TB, pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after the parenthesised command name; utime and stime are fields 14 and 15.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("parse %s: %v %v", b, err1, err2)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}
