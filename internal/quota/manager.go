package quota

import (
	"sync"
	"time"
)

// Manager measures the clients' rates of one quota key (Kafka's ClientQuotaManager of one
// quota type) against the quotas of a Table. It is safe for concurrent use.
type Manager struct {
	key    string
	window Window
	// maxThrottle caps a throttle time (0: no cap).
	maxThrottle time.Duration

	mu struct {
		sync.Mutex
		rates map[SensorKey]*Rate
		// swept is when idle rates were last dropped (ms).
		swept int64
	}
}

// NewManager returns the manager of key (ProducerByteRate, ConsumerByteRate,
// RequestPercentage) sampled by w. A request_percentage throttle is capped at one window, as
// Kafka's ClientRequestQuotaManager caps it; byte rates are not.
func NewManager(key string, w Window) *Manager {
	m := &Manager{key: key, window: w}
	if key == RequestPercentage {
		m.maxThrottle = w.Size
	}
	m.mu.rates = map[SensorKey]*Rate{}
	return m
}

// Key is the quota key m enforces.
func (m *Manager) Key() string { return m.key }

// Limit returns the quota of m's key that applies to (user, clientID) in t.
func (m *Manager) Limit(t Table, user, clientID string) (float64, bool) {
	limit, _, ok := t.Resolve(m.key, user, clientID)
	return limit, ok
}

// Record records value for the client (user, clientID) at now and returns how long it must
// be throttled: zero when no quota of t applies or the client's rate is within it (Kafka's
// recordAndGetThrottleTimeMs: the value counts either way).
func (m *Manager) Record(t Table, user, clientID string, value float64, now time.Time) time.Duration {
	limit, key, ok := t.Resolve(m.key, user, clientID)
	if !ok {
		return 0
	}
	ms := now.UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.rateLocked(key, ms)
	r.Record(m.window, value, ms)
	observed := r.Measure(m.window, ms)
	d := ThrottleTime(observed, limit, r.WindowMs(m.window, ms))
	if m.maxThrottle > 0 {
		d = min(d, m.maxThrottle)
	}
	return d
}

// Unrecord takes back a value Record counted at now (Kafka's unrecordQuotaSensor: a throttled
// fetch is answered empty, so its bytes were never sent).
func (m *Manager) Unrecord(t Table, user, clientID string, value float64, now time.Time) {
	_, key, ok := t.Resolve(m.key, user, clientID)
	if !ok {
		return
	}
	ms := now.UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rateLocked(key, ms).Record(m.window, -value, ms)
}

// rateLocked returns key's rate, made on first use. Now and then it drops the rates that are
// idle (their samples all obsolete: a new one measures the same), so clients that come and
// go do not grow the map.
func (m *Manager) rateLocked(key SensorKey, now int64) *Rate {
	if span := int64(m.window.num()) * m.window.sizeMs(); now-m.mu.swept >= span {
		for k, r := range m.mu.rates {
			if r.Idle(m.window, now) {
				delete(m.mu.rates, k)
			}
		}
		m.mu.swept = now
	}
	r := m.mu.rates[key]
	if r == nil {
		r = &Rate{}
		m.mu.rates[key] = r
	}
	return r
}

// Len is the number of rates m keeps (tests).
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.mu.rates)
}
