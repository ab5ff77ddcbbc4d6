package server

import (
	"errors"
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/gregor-project/gregor/internal/quota"
)

var (
	ip1 = netip.MustParseAddr("127.0.0.1")
	ip2 = netip.MustParseAddr("127.0.0.2")
	t0  = time.Unix(1_700_000_000, 0)
)

// limits with no bound but those a test sets.
func openLimits(listeners ...string) ConnLimits {
	l := ConnLimits{
		MaxConnections: math.MaxInt32, MaxCreationRate: math.MaxInt32, MaxPerIP: math.MaxInt32,
		Listeners: map[string]ListenerConnLimits{}, InterBroker: "PLAINTEXT",
		Window: quota.Window{Num: 2, Size: time.Second},
	}
	for _, n := range listeners {
		l.Listeners[n] = ListenerConnLimits{MaxConnections: math.MaxInt32, MaxCreationRate: math.MaxInt32}
	}
	return l
}

func admitted(t *testing.T, a Admission) *ConnSlot {
	t.Helper()
	if a.Slot == nil {
		t.Fatalf("not admitted: %+v", a)
	}
	return a.Slot
}

func nop() {}

func TestConnQuotasPerIP(t *testing.T) {
	l := openLimits("PLAINTEXT")
	l.MaxPerIP = 2
	l.PerIPOverrides = map[netip.Addr]int{ip1: 3}
	q := NewConnQuotas(l)
	var from1 []*ConnSlot
	for range 3 {
		from1 = append(from1, admitted(t, q.Admit("PLAINTEXT", ip1, nil, nop, t0)))
	}
	var tooMany *TooManyConnectionsError
	if a := q.Admit("PLAINTEXT", ip1, nil, nop, t0); !errors.As(a.Refused, &tooMany) || tooMany.Max != 3 {
		t.Fatalf("4th from %s: %+v, want refused at its override 3", ip1, a)
	}
	admitted(t, q.Admit("PLAINTEXT", ip2, nil, nop, t0))
	admitted(t, q.Admit("PLAINTEXT", ip2, nil, nop, t0))
	if a := q.Admit("PLAINTEXT", ip2, nil, nop, t0); !errors.As(a.Refused, &tooMany) || tooMany.Max != 2 {
		t.Fatalf("3rd from %s: %+v, want refused at max.connections.per.ip 2", ip2, a)
	}
	// An IPv4-mapped address is its IPv4 address.
	if a := q.Admit("PLAINTEXT", netip.MustParseAddr("::ffff:127.0.0.1"), nil, nop, t0); a.Refused == nil {
		t.Fatal("a mapped address escapes its limit")
	}
	from1[0].Release()
	from1[0].Release() // a second release gives nothing back
	admitted(t, q.Admit("PLAINTEXT", ip1, nil, nop, t0))
	if a := q.Admit("PLAINTEXT", ip1, nil, nop, t0); a.Refused == nil {
		t.Fatal("a released slot counted twice")
	}
	if total, onL, fromIP := q.Count("PLAINTEXT", ip1); total != 5 || onL != 5 || fromIP != 3 {
		t.Fatalf("counts = %d, %d, %d; want 5, 5, 3", total, onL, fromIP)
	}
}

func TestConnQuotasMaxConnectionsBlocks(t *testing.T) {
	l := openLimits("PLAINTEXT", "EXTERNAL")
	l.MaxConnections = 3
	l.Listeners["EXTERNAL"] = ListenerConnLimits{MaxConnections: 1, MaxCreationRate: math.MaxInt32}
	l.InterBroker = "OTHER" // no protected listener here
	q := NewConnQuotas(l)
	ext := admitted(t, q.Admit("EXTERNAL", ip1, nil, nop, t0))
	a := q.Admit("EXTERNAL", ip1, nil, nop, t0)
	if a.Wait == nil {
		t.Fatalf("EXTERNAL over its listener max.connections: %+v, want a wait", a)
	}
	s1 := admitted(t, q.Admit("PLAINTEXT", ip1, nil, nop, t0))
	admitted(t, q.Admit("PLAINTEXT", ip1, nil, nop, t0))
	b := q.Admit("PLAINTEXT", ip1, nil, nop, t0)
	if b.Wait == nil {
		t.Fatalf("PLAINTEXT at the broker's max.connections: %+v, want a wait", b)
	}
	select {
	case <-b.Wait:
		t.Fatal("wait over before any release")
	default:
	}
	s1.Release()
	<-b.Wait
	<-a.Wait // one broadcast wakes every waiter; EXTERNAL asks again and still waits
	if a := q.Admit("EXTERNAL", ip1, nil, nop, t0); a.Wait == nil {
		t.Fatalf("EXTERNAL: %+v, want a wait (its own limit)", a)
	}
	admitted(t, q.Admit("PLAINTEXT", ip1, nil, nop, t0))
	ext.Release()
	admitted(t, q.Admit("PLAINTEXT", ip1, nil, nop, t0)) // the broker holds 3 again
	if a := q.Admit("EXTERNAL", ip1, nil, nop, t0); a.Wait == nil {
		t.Fatalf("EXTERNAL with the broker full: %+v, want a wait", a)
	}
	// Raising the limit wakes the waiters, and they get in.
	w := q.Admit("EXTERNAL", ip1, nil, nop, t0).Wait
	l.MaxConnections = 4
	if ev := q.SetLimits(l); len(ev) != 0 {
		t.Fatalf("raising the limit evicts %d", len(ev))
	}
	<-w
	admitted(t, q.Admit("EXTERNAL", ip1, nil, nop, t0))
}

func TestConnQuotasInterBrokerProtected(t *testing.T) {
	l := openLimits("PLAINTEXT", "EXTERNAL") // PLAINTEXT is the inter-broker listener
	l.MaxConnections = 2
	q := NewConnQuotas(l)
	closed := map[string]bool{}
	closer := func(name string) func() { return func() { closed[name] = true } }
	old := admitted(t, q.Admit("EXTERNAL", ip1, nil, closer("old"), t0))
	recent := admitted(t, q.Admit("EXTERNAL", ip1, nil, closer("recent"), t0.Add(time.Second)))
	old.Touch(t0.Add(3 * time.Second)) // now "recent" is the least recently active
	if a := q.Admit("EXTERNAL", ip1, nil, nop, t0.Add(4*time.Second)); a.Wait == nil {
		t.Fatalf("EXTERNAL at max.connections: %+v", a)
	}
	a := q.Admit("PLAINTEXT", ip2, nil, nop, t0.Add(5*time.Second))
	inter := admitted(t, a)
	if len(a.Evict) != 1 || a.Evict[0] != recent {
		t.Fatalf("evicted %v, want the least recently active EXTERNAL connection", a.Evict)
	}
	a.Evict[0].Close()
	if !closed["recent"] || closed["old"] {
		t.Fatalf("closed %v", closed)
	}
	// A second inter-broker connection takes the other one; none is picked twice.
	a = q.Admit("PLAINTEXT", ip2, nil, nop, t0.Add(6*time.Second))
	admitted(t, a)
	if len(a.Evict) != 1 || a.Evict[0] != old {
		t.Fatalf("evicted %v, want the other EXTERNAL connection", a.Evict)
	}
	// Past every unprotected connection, nothing more is evicted, and inter-broker
	// connections still get in.
	if a = q.Admit("PLAINTEXT", ip2, nil, nop, t0); a.Slot == nil || len(a.Evict) != 0 {
		t.Fatalf("third inter-broker connection: %+v", a)
	}
	recent.Release()
	old.Release()
	inter.Release()
	// Total 2 (the last two inter-broker connections): EXTERNAL waits.
	if a := q.Admit("EXTERNAL", ip1, nil, nop, t0); a.Wait == nil {
		t.Fatalf("EXTERNAL with the broker at its limit: %+v", a)
	}

	// With one listener the inter-broker listener is not protected: it waits like any.
	one := openLimits("PLAINTEXT")
	one.MaxConnections = 1
	q = NewConnQuotas(one)
	admitted(t, q.Admit("PLAINTEXT", ip1, nil, nop, t0))
	if a := q.Admit("PLAINTEXT", ip1, nil, nop, t0); a.Wait == nil {
		t.Fatalf("sole listener past max.connections: %+v", a)
	}
}

func TestConnQuotasLoweredLimitEvicts(t *testing.T) {
	l := openLimits("PLAINTEXT", "EXTERNAL")
	q := NewConnQuotas(l)
	var ext []*ConnSlot
	for i := range 3 {
		ext = append(ext, admitted(t, q.Admit("EXTERNAL", ip1, nil, nop, t0.Add(time.Duration(i)*time.Second))))
	}
	admitted(t, q.Admit("PLAINTEXT", ip1, nil, nop, t0)) // protected: never evicted
	l.MaxConnections = 2
	ev := q.SetLimits(l)
	if len(ev) != 2 || ev[0] != ext[0] || ev[1] != ext[1] {
		t.Fatalf("evicted %v, want the two least recently active EXTERNAL connections", ev)
	}
	ev[0].Release()
	if ev := q.SetLimits(l); len(ev) != 0 {
		t.Fatalf("connections already closing evicted again: %v", ev)
	}
}

func TestConnQuotasCreationRate(t *testing.T) {
	l := openLimits("PLAINTEXT", "EXTERNAL")
	l.MaxCreationRate = 10
	l.Listeners["EXTERNAL"] = ListenerConnLimits{MaxConnections: math.MaxInt32, MaxCreationRate: 4}
	q := NewConnQuotas(l)
	// Two windows of 1 s: the rate is measured over at least 1 s, so 10 connections at
	// once are within 10/s and the 11th is 1 over: (11-10)/10 of the 1 s window.
	for i := range 10 {
		if d := q.Throttle("PLAINTEXT", t0); d != 0 {
			t.Fatalf("connection %d of the inter-broker listener throttled %s: it only counts in its own rate", i, d)
		}
	}
	for i := range 4 {
		if d := q.Throttle("EXTERNAL", t0); d != 0 {
			t.Fatalf("EXTERNAL connection %d throttled %s", i, d)
		}
	}
	// The 5th on EXTERNAL: its own 4/s gives (5-4)/4 s; the broker's rate is 5/s (the
	// protected listener is not counted in it).
	if d := q.Throttle("EXTERNAL", t0); d != 250*time.Millisecond {
		t.Fatalf("EXTERNAL over its own rate: %s, want 250ms", d)
	}
	// Far over: capped at one window.
	for range 20 {
		q.Throttle("EXTERNAL", t0)
	}
	if d := q.Throttle("EXTERNAL", t0); d != time.Second {
		t.Fatalf("throttle %s, want the 1s cap", d)
	}
	// Once the samples are old the rate is low again.
	if d := q.Throttle("EXTERNAL", t0.Add(10*time.Second)); d != 0 {
		t.Fatalf("after 10s: %s", d)
	}
}

func TestConnQuotasIPRate(t *testing.T) {
	q := NewConnQuotas(openLimits("PLAINTEXT"))
	tab := quota.Table{
		{IP: quota.DefaultName}:      {quota.ConnectionCreationRate: 2},
		{IP: quota.Of(ip1.String())}: {quota.ConnectionCreationRate: 100},
	}
	for range 5 {
		admitted(t, q.Admit("PLAINTEXT", ip1, tab, nop, t0))
	}
	admitted(t, q.Admit("PLAINTEXT", ip2, tab, nop, t0))
	admitted(t, q.Admit("PLAINTEXT", ip2, tab, nop, t0))
	var th *ConnectionThrottledError
	a := q.Admit("PLAINTEXT", ip2, tab, nop, t0)
	if !errors.As(a.Refused, &th) || th.Throttle != 500*time.Millisecond {
		t.Fatalf("3rd from %s at 2/s: %+v, want throttled (3-2)/2 of 1s", ip2, a)
	}
	// The throttled connection was counted nowhere: the next one is throttled the same.
	if a := q.Admit("PLAINTEXT", ip2, tab, nop, t0); !errors.As(a.Refused, &th) || th.Throttle != 500*time.Millisecond {
		t.Fatalf("4th: %+v", a)
	}
	if total, _, fromIP := q.Count("PLAINTEXT", ip2); total != 7 || fromIP != 2 {
		t.Fatalf("counts %d, %d", total, fromIP)
	}
	// Without quotas nothing is throttled.
	admitted(t, q.Admit("PLAINTEXT", ip2, nil, nop, t0))
}
