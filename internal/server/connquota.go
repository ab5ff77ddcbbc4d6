package server

import (
	"fmt"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregor-project/gregor/internal/quota"
)

// ConnQuotas are the connection limits of a broker's listeners, Kafka's ConnectionQuotas
// (SocketServer.scala): one ConnQuotas is shared by all the listeners of a broker, and each
// listener's accept loop asks it about every connection it accepts, in two steps.
//
//  1. Throttle, as soon as a connection is accepted: the connection is counted in its
//     listener's creation rate (max.connection.creation.rate, or the listener's own) and in
//     the broker's (max.connection.creation.rate), and the answer is how long the accept loop
//     waits before going on so that the rate comes down to its bound: the longer of the two
//     throttle times, at most one quota window (quota.window.size.seconds). The inter-broker
//     listener, when the broker has another listener (Kafka's protected listener), is
//     counted in its own rate only.
//
//  2. Admit: whether the connection may be served now.
//     - No slot (Admission.Wait): its listener holds its max.connections, or the broker holds
//     max.connections over all its listeners (which the protected listener ignores). The
//     accept loop waits until Wait is closed (a connection was released or the limits
//     changed) and asks again; connections not yet accepted wait in the listen backlog.
//     - Throttled (Admission.Refused is a *ConnectionThrottledError): the ip client quota
//     connection_creation_rate of the connection's address (the entity naming it, else the
//     default ip entity; Table.ResolveIP) is exceeded. The connection is counted in no rate
//     and no count, and the accept loop closes it once the throttle time has passed (Kafka's
//     delayed close, so a client reconnecting at once is slowed).
//     - Too many (Admission.Refused is a *TooManyConnectionsError): the address holds
//     max.connections.per.ip (or its entry in max.connections.per.ip.overrides), counted
//     over all the broker's listeners. The connection is closed at once.
//     - Admitted (Admission.Slot): the connection is counted against its address, its
//     listener and the broker until its ConnSlot is released, which the server does when the
//     connection closes for any reason (the client, an idle timeout, a failed TLS handshake
//     or authentication, shutdown, or an eviction).
//
// Eviction (Admission.Evict, and SetLimits' answer): while the broker holds more than
// max.connections (the protected listener went past it, or the limit was lowered), the least
// recently active connection of a listener other than the protected one is closed, one per
// connection over the limit, as Kafka's processors close their lowest-priority channel.
// Kafka picks within each processor; here the choice is over all the broker's unprotected
// listeners. A connection is active when it is admitted and each time a request arrives
// (ConnSlot.Touch).
//
// Rates are Kafka's sampled rates over quota.window.num windows of quota.window.size.seconds
// (quota.Rate); a rate of math.MaxInt32 or more is no bound and is not measured.
//
// ConnQuotas is a deterministic core: every call that needs the time takes it, and nothing
// waits, sleeps or closes a connection inside; the accept loop does those.
//
// # Locking
//
// mu guards everything in it. It is a leaf lock: no other lock is taken while it is held,
// and nothing blocks or calls out under it (the connections to close are returned to the
// caller, which closes them after the call). ConnSlot.active is atomic: the connection's
// goroutine writes it without the lock, Admit reads it under the lock.
type ConnQuotas struct {
	mu struct {
		sync.Mutex
		lim       ConnLimits
		total     int                    // admitted connections not yet released
		listeners map[string]int         // the same by listener
		ips       map[netip.Addr]int     // the same by address
		slots     map[*ConnSlot]struct{} // every admitted connection not yet released
		evicting  int                    // slots told to close and not yet released

		brokerRate    quota.Rate
		listenerRates map[string]*quota.Rate
		ipRates       map[netip.Addr]*quota.Rate
		swept         int64 // when idle ipRates were last dropped (Unix ms)

		// changed is closed, and replaced, when a slot is released or the limits change:
		// what a blocked accept loop waits on (Admission.Wait).
		changed chan struct{}
	}
}

// ConnLimits are the limits a ConnQuotas enforces, from the broker's configuration.
type ConnLimits struct {
	MaxConnections  int                           // max.connections, over all listeners
	MaxCreationRate int                           // max.connection.creation.rate, broker-wide, a second
	Listeners       map[string]ListenerConnLimits // every listener of the broker, by name
	InterBroker     string                        // inter.broker.listener.name
	MaxPerIP        int                           // max.connections.per.ip
	PerIPOverrides  map[netip.Addr]int            // max.connections.per.ip.overrides, resolved (unmapped addresses)
	Window          quota.Window                  // quota.window.num, quota.window.size.seconds
}

// ListenerConnLimits are one listener's own limits (the broker's values unless the listener
// sets its own).
type ListenerConnLimits struct {
	MaxConnections  int // listener.name.<listener>.max.connections
	MaxCreationRate int // listener.name.<listener>.max.connection.creation.rate, a second
}

// TooManyConnectionsError refuses a connection from an address that holds its
// max.connections.per.ip (Kafka's TooManyConnectionsException).
type TooManyConnectionsError struct {
	IP  netip.Addr
	Max int
}

func (e *TooManyConnectionsError) Error() string {
	return fmt.Sprintf("address %s already has the configured maximum of %d connections", e.IP, e.Max)
}

// ConnectionThrottledError refuses a connection from an address over its ip
// connection_creation_rate quota; it is closed after Throttle (Kafka's
// ConnectionThrottledException).
type ConnectionThrottledError struct {
	IP       netip.Addr
	Throttle time.Duration
}

func (e *ConnectionThrottledError) Error() string {
	return fmt.Sprintf("address %s is over its connection_creation_rate quota; closing after %s", e.IP, e.Throttle)
}

// Admission is Admit's answer: exactly one of Slot, Wait and Refused is set. Evict may come
// with any of them.
type Admission struct {
	Slot    *ConnSlot       // admitted: release it when the connection closes
	Wait    <-chan struct{} // no slot now: ask again once it is closed
	Refused error           // *TooManyConnectionsError or *ConnectionThrottledError
	Evict   []*ConnSlot     // connections to close (ConnSlot.Close) to get back within max.connections
}

// ConnSlot is one admitted connection's place in the counts.
type ConnSlot struct {
	q        *ConnQuotas
	listener string
	ip       netip.Addr
	close    func()
	active   atomic.Int64 // Unix nanoseconds of the last activity (Touch)

	// Guarded by q.mu.
	released, evicted bool
}

// NewConnQuotas returns the connection quotas of limits l.
func NewConnQuotas(l ConnLimits) *ConnQuotas {
	q := &ConnQuotas{}
	q.mu.lim = l
	q.mu.listeners = map[string]int{}
	q.mu.ips = map[netip.Addr]int{}
	q.mu.slots = map[*ConnSlot]struct{}{}
	q.mu.listenerRates = map[string]*quota.Rate{}
	q.mu.ipRates = map[netip.Addr]*quota.Rate{}
	q.mu.changed = make(chan struct{})
	return q
}

// SetLimits replaces the limits (a dynamic configuration change): blocked accept loops ask
// again, and the connections returned must be closed (the broker holds more than the new
// max.connections). Rates keep what they measured.
func (q *ConnQuotas) SetLimits(l ConnLimits) (evict []*ConnSlot) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.mu.lim = l
	q.wakeLocked()
	return q.excessLocked()
}

// Limits returns the limits in force.
func (q *ConnQuotas) Limits() ConnLimits {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.lim
}

// Throttle counts a connection just accepted on listener at now in the creation rates and
// returns how long the listener must wait before going on (step 1 of the type comment).
func (q *ConnQuotas) Throttle(listener string, now time.Time) time.Duration {
	ms := now.UnixMilli()
	q.mu.Lock()
	defer q.mu.Unlock()
	w := q.mu.lim.Window
	var d time.Duration
	if !q.protectedLocked(listener) && limited(q.mu.lim.MaxCreationRate) {
		d = recordRate(&q.mu.brokerRate, w, 1, ms, q.mu.lim.MaxCreationRate)
	}
	if l, ok := q.mu.lim.Listeners[listener]; ok && limited(l.MaxCreationRate) {
		d = max(d, recordRate(q.listenerRateLocked(listener), w, 1, ms, l.MaxCreationRate))
	}
	return min(d, w.Size)
}

// Admit decides about a connection from ip on listener at now, which Throttle has counted
// (step 2 of the type comment). ipQuotas are the client quotas in force (the metadata
// image's); close closes the connection, for an eviction later.
func (q *ConnQuotas) Admit(listener string, ip netip.Addr, ipQuotas quota.Table, close func(), now time.Time) Admission {
	ip = ip.Unmap()
	ms := now.UnixMilli()
	q.mu.Lock()
	defer q.mu.Unlock()
	lim := &q.mu.lim
	if !q.slotAvailableLocked(listener) {
		return Admission{Wait: q.mu.changed}
	}
	if rate, ok := ipQuotas.ResolveIP(quota.ConnectionCreationRate, ip); ok && rate < math.MaxInt32 {
		r := q.ipRateLocked(ip, ms)
		if d := min(recordRate(r, lim.Window, 1, ms, int(rate)), lim.Window.Size); d > 0 {
			// Not accepted: counted in no rate.
			r.Record(lim.Window, -1, ms)
			if !q.protectedLocked(listener) && limited(lim.MaxCreationRate) {
				q.mu.brokerRate.Record(lim.Window, -1, ms)
			}
			if l, ok := lim.Listeners[listener]; ok && limited(l.MaxCreationRate) {
				q.listenerRateLocked(listener).Record(lim.Window, -1, ms)
			}
			return Admission{Refused: &ConnectionThrottledError{IP: ip, Throttle: d}}
		}
	}
	maxIP := lim.MaxPerIP
	if n, ok := lim.PerIPOverrides[ip]; ok {
		maxIP = n
	}
	if q.mu.ips[ip] >= maxIP {
		return Admission{Refused: &TooManyConnectionsError{IP: ip, Max: maxIP}}
	}
	s := &ConnSlot{q: q, listener: listener, ip: ip, close: close}
	s.active.Store(now.UnixNano())
	q.mu.slots[s] = struct{}{}
	q.mu.total++
	q.mu.ips[ip]++
	q.mu.listeners[listener]++
	return Admission{Slot: s, Evict: q.excessLocked()}
}

// Count returns the admitted connections not yet released: over the broker, on listener,
// and from ip.
func (q *ConnQuotas) Count(listener string, ip netip.Addr) (total, onListener, fromIP int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.total, q.mu.listeners[listener], q.mu.ips[ip.Unmap()]
}

// Touch records activity on the connection at now: eviction closes the least recently
// active connection first.
func (s *ConnSlot) Touch(now time.Time) { s.active.Store(now.UnixNano()) }

// Close closes the connection (an eviction); it is released when its server sees it closed.
func (s *ConnSlot) Close() { s.close() }

// Listener and IP are the connection's.
func (s *ConnSlot) Listener() string { return s.listener }
func (s *ConnSlot) IP() netip.Addr   { return s.ip }

// Release gives the connection's place back, waking a blocked accept loop. Calls after the
// first do nothing.
func (s *ConnSlot) Release() {
	q := s.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if s.released {
		return
	}
	s.released = true
	delete(q.mu.slots, s)
	if s.evicted {
		q.mu.evicting--
	}
	q.mu.total--
	if q.mu.ips[s.ip]--; q.mu.ips[s.ip] <= 0 {
		delete(q.mu.ips, s.ip)
	}
	if q.mu.listeners[s.listener]--; q.mu.listeners[s.listener] <= 0 {
		delete(q.mu.listeners, s.listener)
	}
	q.wakeLocked()
}

// protectedLocked is Kafka's protectedListener: the inter-broker listener of a broker with
// other listeners.
func (q *ConnQuotas) protectedLocked(listener string) bool {
	return listener == q.mu.lim.InterBroker && len(q.mu.lim.Listeners) > 1
}

// slotAvailableLocked is Kafka's connectionSlotAvailable.
func (q *ConnQuotas) slotAvailableLocked(listener string) bool {
	if l, ok := q.mu.lim.Listeners[listener]; ok && q.mu.listeners[listener] >= l.MaxConnections {
		return false
	}
	if q.protectedLocked(listener) {
		return true
	}
	return q.mu.total < q.mu.lim.MaxConnections
}

// excessLocked picks a connection to close for each one the broker holds over
// max.connections and not already closing: the least recently active of the unprotected
// listeners'.
func (q *ConnQuotas) excessLocked() []*ConnSlot {
	var out []*ConnSlot
	for q.mu.total-q.mu.evicting > q.mu.lim.MaxConnections {
		var victim *ConnSlot
		for s := range q.mu.slots {
			if s.evicted || q.protectedLocked(s.listener) {
				continue
			}
			if victim == nil || s.active.Load() < victim.active.Load() {
				victim = s
			}
		}
		if victim == nil {
			break
		}
		victim.evicted = true
		q.mu.evicting++
		out = append(out, victim)
	}
	return out
}

func (q *ConnQuotas) wakeLocked() {
	close(q.mu.changed)
	q.mu.changed = make(chan struct{})
}

func (q *ConnQuotas) listenerRateLocked(listener string) *quota.Rate {
	r := q.mu.listenerRates[listener]
	if r == nil {
		r = &quota.Rate{}
		q.mu.listenerRates[listener] = r
	}
	return r
}

// ipRateLocked returns ip's rate, made on first use; now and then the idle rates are
// dropped, so addresses that come and go do not grow the map.
func (q *ConnQuotas) ipRateLocked(ip netip.Addr, now int64) *quota.Rate {
	w := q.mu.lim.Window
	if span := int64(max(w.Num, 1)) * max(w.Size.Milliseconds(), 1); now-q.mu.swept >= span {
		for a, r := range q.mu.ipRates {
			if r.Idle(w, now) {
				delete(q.mu.ipRates, a)
			}
		}
		q.mu.swept = now
	}
	r := q.mu.ipRates[ip]
	if r == nil {
		r = &quota.Rate{}
		q.mu.ipRates[ip] = r
	}
	return r
}

// limited reports whether a creation rate bounds anything (Kafka's default, Int.MaxValue, is
// no bound).
func limited(rate int) bool { return rate < math.MaxInt32 }

// recordRate records v in r at now and returns the throttle time of bound: Kafka's sensor
// record, whose quota violation gives QuotaUtils.throttleTime.
func recordRate(r *quota.Rate, w quota.Window, v float64, now int64, bound int) time.Duration {
	r.Record(w, v, now)
	return quota.ThrottleTime(r.Measure(w, now), float64(bound), r.WindowMs(w, now))
}
