package quota

import (
	"math"
	"time"
)

// Window is how rates are sampled: Num samples of Size each (quota.window.num,
// quota.window.size.seconds).
type Window struct {
	Num  int
	Size time.Duration
}

func (w Window) sizeMs() int64 { return max(w.Size.Milliseconds(), 1) }
func (w Window) num() int      { return max(w.Num, 1) }

// Rate is Kafka's Rate over a WindowedSum (org.apache.kafka.common.metrics.stats): what was
// recorded in the retained samples divided by the time they span.
//
// A sample covers Window.Size from its start; recording past its end starts the next one,
// reusing the oldest slot (Window.Num+1 slots: one extra for a sample that started before the
// measured window but overlaps it). A sample whose last record is Num windows old or more is
// obsolete and reset before measuring. The time the rate divides by is from the start of the
// oldest sample to now, but never less than Num-1 whole windows (so a client's first second
// is not measured as a full rate over one second), and at least 1 ms.
//
// Times are Unix milliseconds, as Kafka's; a clock that steps back is measured as it reads.
type Rate struct {
	samples []sample
	current int
}

type sample struct {
	start, last int64 // ms
	value       float64
}

func (s *sample) reset(now int64) { *s = sample{start: now, last: now} }

// Record adds v at now.
func (r *Rate) Record(w Window, v float64, now int64) {
	s := r.cur(now)
	if now-s.start >= w.sizeMs() {
		s = r.advance(w, now)
	}
	s.value += v
	s.last = now
}

func (r *Rate) cur(now int64) *sample {
	if len(r.samples) == 0 {
		r.samples = append(r.samples, sample{start: now, last: now})
	}
	return &r.samples[r.current]
}

func (r *Rate) advance(w Window, now int64) *sample {
	r.current = (r.current + 1) % (w.num() + 1)
	if r.current >= len(r.samples) {
		r.samples = append(r.samples, sample{start: now, last: now})
	} else {
		r.samples[r.current].reset(now)
	}
	return &r.samples[r.current]
}

// purge resets the samples with no record in the last Num windows.
func (r *Rate) purge(w Window, now int64) {
	expire := int64(w.num()) * w.sizeMs()
	for i := range r.samples {
		if now-r.samples[i].last >= expire {
			r.samples[i].reset(now)
		}
	}
}

// WindowMs is the time, in ms, the rate at now is measured over (Kafka's Rate.windowSize).
func (r *Rate) WindowMs(w Window, now int64) int64 {
	r.purge(w, now)
	oldest := r.cur(now).start
	for i := range r.samples {
		oldest = min(oldest, r.samples[i].start)
	}
	elapsed := now - oldest
	if full, need := elapsed/w.sizeMs(), int64(w.num()-1); full < need {
		elapsed += (need - full) * w.sizeMs()
	}
	return max(elapsed, 1)
}

// Measure is the rate at now, per second.
func (r *Rate) Measure(w Window, now int64) float64 {
	ms := r.WindowMs(w, now) // purges first
	var sum float64
	for i := range r.samples {
		sum += r.samples[i].value
	}
	return sum / (float64(ms) / 1000)
}

// Idle reports whether every sample is obsolete at now: the rate is 0 and a new Rate would
// measure the same from now on.
func (r *Rate) Idle(w Window, now int64) bool {
	expire := int64(w.num()) * w.sizeMs()
	for i := range r.samples {
		if now-r.samples[i].last < expire {
			return false
		}
	}
	return true
}

// ThrottleTime is Kafka's QuotaUtils.throttleTime: how long a client measured at observed
// against bound over windowMs must send nothing for its rate to come down to the bound,
// observed*W/(W+X) = bound, so X = (observed-bound)/bound*W, rounded to the millisecond.
// Zero when observed is within the bound.
func ThrottleTime(observed, bound float64, windowMs int64) time.Duration {
	if !(observed > bound) || !(bound > 0) {
		return 0
	}
	ms := math.Round((observed - bound) / bound * float64(windowMs))
	if ms >= float64(math.MaxInt64/int64(time.Millisecond)) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ms) * time.Millisecond
}
