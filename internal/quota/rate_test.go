package quota

import (
	"math"
	"testing"
	"time"
)

var kafkaWindow = Window{Num: 11, Size: time.Second} // Kafka's defaults

func TestRateFirstSecondsCountAsTenWindows(t *testing.T) {
	var r Rate
	r.Record(kafkaWindow, 1000, 0)
	// One sample 0 ms old: Kafka assumes Num-1 full windows have passed.
	if got := r.WindowMs(kafkaWindow, 0); got != 10_000 {
		t.Fatalf("window = %d ms, want 10000", got)
	}
	if got := r.Measure(kafkaWindow, 500); got != 1000/10.5 {
		t.Fatalf("rate at 500 ms = %v, want %v", got, 1000/10.5)
	}
}

func TestRateSteady(t *testing.T) {
	var r Rate
	// 100 bytes every 100 ms for 30 s: 1000 bytes/s.
	for now := int64(0); now <= 30_000; now += 100 {
		r.Record(kafkaWindow, 100, now)
	}
	got := r.Measure(kafkaWindow, 30_000)
	if math.Abs(got-1000) > 1000*0.02 {
		t.Fatalf("steady rate = %v, want ~1000", got)
	}
	// The measured span never exceeds the retained samples: Num+1 slots of a second.
	if w := r.WindowMs(kafkaWindow, 30_000); w > 12_000 || w < 10_000 {
		t.Fatalf("window = %d ms", w)
	}
}

func TestRateObsoleteSamplesPurged(t *testing.T) {
	var r Rate
	r.Record(kafkaWindow, 1e6, 0)
	r.Record(kafkaWindow, 1e6, 1500)
	if r.Idle(kafkaWindow, 12_000) {
		t.Fatal("a sample recorded 10.5 s ago is not obsolete")
	}
	if !r.Idle(kafkaWindow, 12_500) {
		t.Fatal("every sample 11 windows old is obsolete")
	}
	if got := r.Measure(kafkaWindow, 12_500); got != 0 {
		t.Fatalf("rate after 11 idle windows = %v, want 0", got)
	}
}

func TestThrottleTime(t *testing.T) {
	for _, c := range []struct {
		observed, bound float64
		window          int64
		want            time.Duration
	}{
		{1500, 1000, 10_000, 5 * time.Second}, // (1500-1000)/1000 * 10 s
		{1000, 1000, 10_000, 0},               // at the bound: not throttled
		{999, 1000, 10_000, 0},
		{1000.06, 1000, 10_000, 1 * time.Millisecond}, // 0.6 ms rounds to 1
		{3000, 1000, 11_000, 22 * time.Second},
	} {
		if got := ThrottleTime(c.observed, c.bound, c.window); got != c.want {
			t.Errorf("ThrottleTime(%v, %v, %d) = %v, want %v", c.observed, c.bound, c.window, got, c.want)
		}
	}
}

func TestManagerThrottles(t *testing.T) {
	tab := Table{{ClientID: Of("slow")}: {ProducerByteRate: 1000}}
	m := NewManager(ProducerByteRate, kafkaWindow)
	t0 := time.UnixMilli(1_700_000_000_000)
	if d := m.Record(tab, "User:ANONYMOUS", "slow", 5000, t0); d != 0 {
		t.Fatalf("5000 bytes over an assumed 10 s = 500/s: throttled %v", d)
	}
	// 25000 bytes over 10 s = 2500/s against 1000/s: (2500-1000)/1000 * 10 s.
	if d := m.Record(tab, "User:ANONYMOUS", "slow", 20000, t0); d != 15*time.Second {
		t.Fatalf("throttle = %v, want 15s", d)
	}
	if d := m.Record(tab, "User:ANONYMOUS", "fast", 1e9, t0); d != 0 {
		t.Fatalf("a client without a quota is throttled %v", d)
	}
	if m.Len() != 1 {
		t.Fatalf("%d rates kept, want 1 (clients without a quota are not measured)", m.Len())
	}
	// Idle rates are dropped.
	m.Record(tab, "User:ANONYMOUS", "slow", 1, t0.Add(time.Minute))
	if m.Len() != 1 {
		t.Fatalf("%d rates after a minute", m.Len())
	}
}

func TestRequestThrottleCappedAtOneWindow(t *testing.T) {
	tab := Table{{User: DefaultName}: {RequestPercentage: 1}}
	m := NewManager(RequestPercentage, kafkaWindow)
	if d := m.Record(tab, "alice", "c", 1e6, time.UnixMilli(0)); d != time.Second {
		t.Fatalf("request throttle = %v, want capped at 1s", d)
	}
}

// A client that waits out every throttle time it is given settles at its quota: the
// closed loop a KIP-219 client runs. 64 KiB requests against 100 KiB/s over two minutes.
func TestManagerClosedLoopConvergesToQuota(t *testing.T) {
	const quota, req = 100 << 10, 64 << 10
	tab := Table{{ClientID: Of("p")}: {ProducerByteRate: quota}}
	m := NewManager(ProducerByteRate, kafkaWindow)
	now := time.UnixMilli(0)
	var sent float64
	start := now.Add(20 * time.Second) // measure after the first windows filled
	for now.Before(start.Add(2 * time.Minute)) {
		d := m.Record(tab, "u", "p", req, now)
		if !now.Before(start) {
			sent += req
		}
		now = now.Add(d + 5*time.Millisecond) // the throttle, then a round trip
	}
	rate := sent / now.Sub(start).Seconds()
	if math.Abs(rate-quota)/quota > 0.05 {
		t.Fatalf("closed-loop rate %.0f B/s, want within 5%% of %d", rate, quota)
	}
}
