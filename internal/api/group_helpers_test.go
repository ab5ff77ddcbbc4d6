package api_test

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// groupBroker is the broker config of the group tests: no initial rebalance delay, and
// session timeouts short enough to expire members within a test.
var groupBroker = []string{
	"group.initial.rebalance.delay.ms=0",
	"group.min.session.timeout.ms=500",
	"offsets.topic.num.partitions=5",
}

// groupWait polls cond until it holds or the deadline passes; cond's message explains a
// failure.
func groupWait(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, timeout, msg)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// groupOwnership tracks which member owns each partition, from the members' assignment
// callbacks, and records any moment a partition had two owners.
type groupOwnership struct {
	mu         sync.Mutex
	owner      map[int32]string
	violations []string
}

func newGroupOwnership() *groupOwnership { return &groupOwnership{owner: map[int32]string{}} }

func (o *groupOwnership) assigned(member string, ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps {
		if cur, ok := o.owner[p]; ok && cur != member {
			o.violations = append(o.violations, fmt.Sprintf("partition %d assigned to %s while %s owns it", p, member, cur))
		}
		o.owner[p] = member
	}
}

func (o *groupOwnership) released(member string, ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps {
		if o.owner[p] == member {
			delete(o.owner, p)
		}
	}
}

// drop forgets a killed member's partitions (it cannot read them any more).
func (o *groupOwnership) drop(member string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for p, m := range o.owner {
		if m == member {
			delete(o.owner, p)
		}
	}
}

func (o *groupOwnership) check(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.violations) > 0 {
		t.Fatalf("partitions owned by two members at once:\n%s", strings.Join(o.violations, "\n"))
	}
}

// groupCutDialer dials normally until cut; then it closes every connection it made and refuses
// new ones: the client dies without a word to the broker.
type groupCutDialer struct {
	mu    sync.Mutex
	conns []net.Conn
	dead  bool
}

func (d *groupCutDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return nil, fmt.Errorf("cut")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *groupCutDialer) cut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead = true
	for _, c := range d.conns {
		c.Close()
	}
}

// groupMember is a franz-go group consumer reading in the background.
type groupMember struct {
	name   string
	cl     *kgo.Client
	dialer *groupCutDialer
	own    *groupOwnership
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	owned   map[int32]bool
	revoked []int32 // every partition ever revoked from this member
	records []*kgo.Record
}

// startGroupMember starts a consumer of topic in group; opts come after the defaults (a 3 s
// session timeout, 100 ms heartbeats, reading from the start).
func startGroupMember(t *testing.T, addr, group, topic, name string, own *groupOwnership, opts ...kgo.Opt) *groupMember {
	t.Helper()
	m := &groupMember{name: name, dialer: &groupCutDialer{}, own: own, owned: map[int32]bool{}, done: make(chan struct{})}
	base := []kgo.Opt{
		kgo.SeedBrokers(addr), kgo.ClientID(name), kgo.Dialer(m.dialer.DialContext),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(3 * time.Second), kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.FetchMaxWait(100 * time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.mu.Lock()
			for _, p := range a[topic] {
				m.owned[p] = true
			}
			m.mu.Unlock()
			if own != nil {
				own.assigned(name, a[topic])
			}
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) { m.release(topic, r) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, r map[string][]int32) { m.release(topic, r) }),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			recs := fs.Records()
			m.mu.Lock()
			m.records = append(m.records, recs...)
			m.mu.Unlock()
		}
	}()
	t.Cleanup(m.close)
	return m
}

func (m *groupMember) release(topic string, r map[string][]int32) {
	m.mu.Lock()
	for _, p := range r[topic] {
		delete(m.owned, p)
		m.revoked = append(m.revoked, p)
	}
	m.mu.Unlock()
	if m.own != nil {
		m.own.released(m.name, r[topic])
	}
}

// partitions returns the partitions the member owns, sorted.
func (m *groupMember) partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ps []int32
	for p := range m.owned {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

func (m *groupMember) consumed() []*kgo.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*kgo.Record(nil), m.records...)
}

// close leaves the group gracefully (idempotent).
func (m *groupMember) close() {
	m.cancel()
	m.cl.Close()
	<-m.done
}

// kill cuts the member's connections without a LeaveGroup; it stops reading at once.
func (m *groupMember) kill() {
	m.dialer.cut()
	m.cancel()
	if m.own != nil {
		m.own.drop(m.name)
	}
	m.mu.Lock()
	m.owned = map[int32]bool{}
	m.mu.Unlock()
}

// groupBalanced waits until the members together own partitions 0..n-1, each exactly once,
// with sizes as even as possible (every member within one of n/len).
func groupBalanced(t *testing.T, n int, ms ...*groupMember) {
	t.Helper()
	groupWait(t, 20*time.Second, "partitions balanced", func() (bool, string) {
		seen := map[int32]string{}
		var desc []string
		ok := true
		for _, m := range ms {
			ps := m.partitions()
			desc = append(desc, fmt.Sprintf("%s=%v", m.name, ps))
			if len(ps) < n/len(ms) || len(ps) > (n+len(ms)-1)/len(ms) {
				ok = false
			}
			for _, p := range ps {
				if other, dup := seen[p]; dup {
					ok = false
					desc = append(desc, fmt.Sprintf("p%d also %s", p, other))
				}
				seen[p] = m.name
			}
		}
		return ok && len(seen) == n, strings.Join(desc, " ")
	})
}
