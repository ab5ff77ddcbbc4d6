package api_test

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Two, then three franz-go consumers share six partitions; no partition is ever owned by
// two members at once.
func TestGroupMembersShareSixPartitions(t *testing.T) {
	b := testutil.StartBroker(t, groupBroker...)
	createTopic(t, b.Addr(), "six", 6, nil)
	own := newGroupOwnership()
	m1 := startGroupMember(t, b.Addr(), "share", "six", "m1", own)
	m2 := startGroupMember(t, b.Addr(), "share", "six", "m2", own)
	groupBalanced(t, 6, m1, m2)
	m3 := startGroupMember(t, b.Addr(), "share", "six", "m3", own)
	groupBalanced(t, 6, m1, m2, m3)
	own.check(t)
}

// A member whose connections die without a LeaveGroup keeps its partitions until its
// session timeout expires; then they move to the others.
func TestGroupKilledMemberPartitionsMoveAfterSessionTimeout(t *testing.T) {
	b := testutil.StartBroker(t, groupBroker...)
	createTopic(t, b.Addr(), "six", 6, nil)
	own := newGroupOwnership()
	session := kgo.SessionTimeout(time.Second)
	m1 := startGroupMember(t, b.Addr(), "kill", "six", "m1", own, session)
	m2 := startGroupMember(t, b.Addr(), "kill", "six", "m2", own, session)
	m3 := startGroupMember(t, b.Addr(), "kill", "six", "m3", own, session)
	groupBalanced(t, 6, m1, m2, m3)
	killed := time.Now()
	m3.kill()
	groupBalanced(t, 6, m1, m2)
	moved := time.Since(killed)
	t.Logf("partitions moved %v after the kill (session timeout 1s)", moved)
	if moved < 500*time.Millisecond {
		t.Fatalf("partitions moved %v after the kill: before the session timeout could expire", moved)
	}
	own.check(t)
}

// A member that leaves gracefully hands its partitions over at once, long before its
// session timeout.
func TestGroupGracefulLeaveMovesPartitionsAtOnce(t *testing.T) {
	b := testutil.StartBroker(t, groupBroker...)
	createTopic(t, b.Addr(), "six", 6, nil)
	own := newGroupOwnership()
	session := kgo.SessionTimeout(30 * time.Second)
	m1 := startGroupMember(t, b.Addr(), "leave", "six", "m1", own, session)
	m2 := startGroupMember(t, b.Addr(), "leave", "six", "m2", own, session)
	m3 := startGroupMember(t, b.Addr(), "leave", "six", "m3", own, session)
	groupBalanced(t, 6, m1, m2, m3)
	left := time.Now()
	m3.close()
	groupBalanced(t, 6, m1, m2)
	moved := time.Since(left)
	t.Logf("partitions moved %v after the leave (session timeout 30s)", moved)
	if moved > 15*time.Second {
		t.Fatalf("partitions moved %v after a graceful leave: that was the session timeout", moved)
	}
	own.check(t)
}

// With more members than partitions the extra member owns nothing; when an owner leaves,
// it takes over.
func TestGroupMoreMembersThanPartitions(t *testing.T) {
	b := testutil.StartBroker(t, groupBroker...)
	createTopic(t, b.Addr(), "two", 2, nil)
	own := newGroupOwnership()
	m1 := startGroupMember(t, b.Addr(), "extra", "two", "m1", own)
	m2 := startGroupMember(t, b.Addr(), "extra", "two", "m2", own)
	groupBalanced(t, 2, m1, m2)
	m3 := startGroupMember(t, b.Addr(), "extra", "two", "m3", own)
	groupWait(t, 20*time.Second, "the third member joined the group", func() (bool, string) {
		d, err := kadm.NewClient(newClient(t, b.Addr())).DescribeGroups(ctxT(t), "extra")
		if err != nil {
			return false, err.Error()
		}
		g := d["extra"]
		return g.State == "Stable" && len(g.Members) == 3, fmt.Sprintf("%s with %d members", g.State, len(g.Members))
	})
	groupBalanced(t, 2, m1, m2)
	if ps := m3.partitions(); len(ps) != 0 {
		t.Fatalf("the extra member owns %v", ps)
	}
	m1.close()
	groupBalanced(t, 2, m2, m3)
	own.check(t)
}

// Two groups on one topic each read every record (publish/subscribe); within one group of
// three members each record is read exactly once (a queue).
func TestGroupPubSubAndQueue(t *testing.T) {
	b := testutil.StartBroker(t, groupBroker...)
	createTopic(t, b.Addr(), "events", 6, nil)
	var queue, sub []*groupMember
	for i := 0; i < 3; i++ {
		queue = append(queue, startGroupMember(t, b.Addr(), "queue", "events", fmt.Sprint("q", i), nil))
	}
	for i := 0; i < 2; i++ {
		sub = append(sub, startGroupMember(t, b.Addr(), "subscriber", "events", fmt.Sprint("s", i), nil))
	}
	groupBalanced(t, 6, queue...)
	groupBalanced(t, 6, sub...)
	const n = 600
	cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic("events"))
	var rs []*kgo.Record
	for i := 0; i < n; i++ {
		rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))})
	}
	produceSync(t, cl, rs...)
	for name, ms := range map[string][]*groupMember{"queue": queue, "subscriber": sub} {
		groupWait(t, 20*time.Second, name+" read every record", func() (bool, string) {
			total := 0
			for _, m := range ms {
				total += len(m.consumed())
			}
			return total >= n, fmt.Sprintf("%d of %d", total, n)
		})
		seen := map[string]string{}
		for _, m := range ms {
			if len(m.consumed()) == 0 {
				t.Fatalf("group %s: member %s read nothing", name, m.name)
			}
			for _, r := range m.consumed() {
				if other, dup := seen[string(r.Value)]; dup {
					t.Fatalf("group %s: record %s read by %s and %s", name, r.Value, other, m.name)
				}
				seen[string(r.Value)] = m.name
			}
		}
		if len(seen) != n {
			t.Fatalf("group %s read %d distinct records, want %d", name, len(seen), n)
		}
	}
}

// A member commits what it processed and leaves; the broker restarts (rebuilding the group
// from __consumer_offsets); a new member resumes exactly after the commit: nothing is
// skipped or read twice.
func TestGroupResumesAfterBrokerRestart(t *testing.T) {
	b := testutil.StartBroker(t, groupBroker...)
	createTopic(t, b.Addr(), "resume", 3, nil)
	cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic("resume"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const n = 90
	for i := 0; i < n; i += 10 { // one batch of ten per produce, spread over the partitions
		var rs []*kgo.Record
		for j := i; j < i+10; j++ {
			rs = append(rs, &kgo.Record{Partition: int32(i / 10 % 3), Value: []byte(fmt.Sprint(j))})
		}
		produceSync(t, cl, rs...)
	}
	type pos struct {
		p int32
		o int64
	}
	read := map[pos]int{}
	first := newClient(t, b.Addr(), kgo.ConsumerGroup("resume-group"), kgo.ConsumeTopics("resume"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxPartitionBytes(1), kgo.FetchMaxBytes(1))
	var processed []*kgo.Record
	ctx := ctxT(t)
	for len(processed) < 40 {
		fs := first.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("first member read %d records", len(processed))
		}
		processed = append(processed, fs.Records()...)
	}
	if err := first.CommitRecords(ctx, processed...); err != nil {
		t.Fatal(err)
	}
	for _, r := range processed {
		read[pos{r.Partition, r.Offset}]++
	}
	first.Close()

	b = b.Restart()
	committed, err := kadm.NewClient(newClient(t, b.Addr())).FetchOffsets(ctxT(t), "resume-group")
	if err != nil || committed.Error() != nil {
		t.Fatalf("offsets after restart: %v %v", err, committed.Error())
	}
	next := map[int32]int64{}
	for _, r := range processed {
		next[r.Partition] = max(next[r.Partition], r.Offset+1)
	}
	for p, o := range next {
		if c, ok := committed.Lookup("resume", p); !ok || c.At != o {
			t.Fatalf("partition %d committed %+v after restart, want %d", p, c, o)
		}
	}

	second := newClient(t, b.Addr(), kgo.ConsumerGroup("resume-group"), kgo.ConsumeTopics("resume"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	ctx = ctxT(t)
	for len(read) < n {
		fs := second.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records in all", len(read), n)
		}
		for _, r := range fs.Records() {
			k := pos{r.Partition, r.Offset}
			read[k]++
			if read[k] > 1 {
				t.Fatalf("record at partition %d offset %d read again after the restart", r.Partition, r.Offset)
			}
		}
	}
}

// Every balancer franz-go ships works: two, then three members share six partitions.
func TestGroupBalancers(t *testing.T) {
	b := testutil.StartBroker(t, groupBroker...)
	for name, bal := range map[string]kgo.GroupBalancer{
		"range": kgo.RangeBalancer(), "roundrobin": kgo.RoundRobinBalancer(),
		"sticky": kgo.StickyBalancer(), "cooperative-sticky": kgo.CooperativeStickyBalancer(),
	} {
		t.Run(name, func(t *testing.T) {
			createTopic(t, b.Addr(), name, 6, nil)
			own := newGroupOwnership()
			opt := kgo.Balancers(bal)
			m1 := startGroupMember(t, b.Addr(), "g-"+name, name, "m1", own, opt)
			m2 := startGroupMember(t, b.Addr(), "g-"+name, name, "m2", own, opt)
			groupBalanced(t, 6, m1, m2)
			m3 := startGroupMember(t, b.Addr(), "g-"+name, name, "m3", own, opt)
			groupBalanced(t, 6, m1, m2, m3)
			d, err := kadm.NewClient(newClient(t, b.Addr())).DescribeGroups(ctxT(t), "g-"+name)
			if err != nil || d["g-"+name].Protocol != name {
				t.Fatalf("group protocol %q (%v), want %s", d["g-"+name].Protocol, err, name)
			}
			own.check(t)
		})
	}
}

// With cooperative-sticky, a member joining moves only the partitions it takes: the others
// keep (and are never revoked) the rest throughout the rebalance.
func TestGroupCooperativeStickyKeepsUnaffectedPartitions(t *testing.T) {
	b := testutil.StartBroker(t, groupBroker...)
	createTopic(t, b.Addr(), "coop", 6, nil)
	own := newGroupOwnership()
	opt := kgo.Balancers(kgo.CooperativeStickyBalancer())
	m1 := startGroupMember(t, b.Addr(), "coop", "coop", "m1", own, opt)
	m2 := startGroupMember(t, b.Addr(), "coop", "coop", "m2", own, opt)
	groupBalanced(t, 6, m1, m2)
	before := map[*groupMember][]int32{m1: m1.partitions(), m2: m2.partitions()}
	revokedBefore := map[*groupMember]int{}
	for _, m := range []*groupMember{m1, m2} {
		m.mu.Lock()
		revokedBefore[m] = len(m.revoked)
		m.mu.Unlock()
	}
	m3 := startGroupMember(t, b.Addr(), "coop", "coop", "m3", own, opt)
	groupBalanced(t, 6, m1, m2, m3)
	for _, m := range []*groupMember{m1, m2} {
		after := m.partitions()
		m.mu.Lock()
		revoked := append([]int32(nil), m.revoked[revokedBefore[m]:]...)
		m.mu.Unlock()
		for _, p := range after {
			if !slices.Contains(before[m], p) {
				t.Fatalf("%s got partition %d it did not own before (sticky moves only what m3 takes)", m.name, p)
			}
			if slices.Contains(revoked, p) {
				t.Fatalf("%s had partition %d revoked during the rebalance although it kept it", m.name, p)
			}
		}
		if len(revoked) != len(before[m])-len(after) {
			t.Fatalf("%s: revoked %v, owned %v then %v", m.name, revoked, before[m], after)
		}
	}
	own.check(t)
}

// Many members heartbeating as fast as they can do not stall produce or fetch: every
// produce is acknowledged and every record fetched while the storm runs. The produce
// latencies with and without the storm are logged (measured, not asserted).
func TestGroupHeartbeatStormDoesNotStallProduceFetch(t *testing.T) {
	b := testutil.StartBroker(t, "group.initial.rebalance.delay.ms=1000", "offsets.topic.num.partitions=5")
	createTopic(t, b.Addr(), "storm-data", 1, nil)
	const members = 40
	var wg sync.WaitGroup
	conns := make([]*groupConn, members)
	joins := make([]*kmsg.JoinGroupResponse, members)
	for i := range conns {
		conns[i] = dialGroupConn(t, b.Addr())
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := kmsg.NewPtrJoinGroupRequest()
			req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = "storm", 30000, 30000
			req.ProtocolType = "consumer"
			meta := kmsg.NewConsumerMemberMetadata()
			req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
			resp, err := conns[i].try(req, 3) // v3: no MEMBER_ID_REQUIRED round trip
			if err != nil {
				t.Error(err)
				joins[i] = joinFailed()
				return
			}
			joins[i] = resp.(*kmsg.JoinGroupResponse)
		}()
	}
	wg.Wait()
	gen := joins[0].Generation
	for i, j := range joins {
		if j.ErrorCode != 0 || j.Generation != gen {
			t.Fatalf("member %d joined with %v generation %d (want %d)", i, kerr.ErrorForCode(j.ErrorCode), j.Generation, gen)
		}
	}
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rawSync(conns[i], "storm", joins[i].MemberID, gen, map[string][]byte{})
		}()
	}
	wg.Wait()

	produce := func(cl *kgo.Client, n int) []time.Duration {
		var lat []time.Duration
		for i := 0; i < n; i++ {
			start := time.Now()
			produceSync(t, cl, &kgo.Record{Value: []byte(fmt.Sprint(i))})
			lat = append(lat, time.Since(start))
		}
		return lat
	}
	cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic("storm-data"), kgo.ProducerLinger(0))
	quiet := produce(cl, 100)

	stop := make(chan struct{})
	// Deferred too: a failure below must not leave the heartbeats running into the cleanup
	// that closes their connections (they would report to a finished test).
	endStorm := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
	defer endStorm()
	var beats, errs atomic.Int64
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hb := kmsg.NewPtrHeartbeatRequest()
			hb.Group, hb.MemberID, hb.Generation = "storm", joins[i].MemberID, gen
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := conns[i].try(hb, 4)
				if err != nil {
					t.Error(err)
					return
				}
				if resp.(*kmsg.HeartbeatResponse).ErrorCode != 0 {
					errs.Add(1)
				}
				beats.Add(1)
			}
		}()
	}
	stormy := produce(cl, 300)
	got := consumeN(t, b.Addr(), "storm-data", 400)
	endStorm()
	if len(got) != 400 {
		t.Fatalf("fetched %d records, want 400", len(got))
	}
	if errs.Load() != 0 {
		t.Fatalf("%d heartbeats failed", errs.Load())
	}
	pct := func(l []time.Duration, q float64) time.Duration {
		l = slices.Clone(l)
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		return l[int(q*float64(len(l)-1))]
	}
	t.Logf("produce latency without storm: p50 %v p99 %v; during %d heartbeats from %d members: p50 %v p99 %v",
		pct(quiet, .5), pct(quiet, .99), beats.Load(), members, pct(stormy, .5), pct(stormy, .99))
	if beats.Load() < members {
		t.Fatalf("only %d heartbeats: the storm did not happen", beats.Load())
	}
}
