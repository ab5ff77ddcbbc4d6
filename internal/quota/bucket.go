package quota

import "time"

// Bucket is a token bucket: it holds at most Burst tokens and gains Rate tokens a second.
// It starts full at its first use. Take grants what it holds, up to what is asked, so a
// caller asking for more than is left gets part of it (and leaves the rest undone).
//
// Tokens are counted in billionths (nano), so that gains over short steps add up exactly.
// Invariant: 0 <= nano <= Burst*1e9. A clock that steps back adds nothing (last moves back
// with it, so the next step forward is counted from there).
type Bucket struct {
	Rate  int64 // tokens gained a second, > 0
	Burst int64 // most tokens held, > 0

	nano    int64
	last    time.Time
	started bool
}

const nanoPerToken = int64(time.Second)

// Take takes up to n whole tokens at now and returns how many it took.
func (b *Bucket) Take(now time.Time, n int) int {
	b.refill(now)
	got := min(int64(n), b.nano/nanoPerToken)
	if got <= 0 {
		return 0
	}
	b.nano -= got * nanoPerToken
	return int(got)
}

// Tokens is the whole tokens the bucket holds at now (for tests and logs).
func (b *Bucket) Tokens(now time.Time) int64 {
	b.refill(now)
	return b.nano / nanoPerToken
}

func (b *Bucket) refill(now time.Time) {
	full := b.Burst * nanoPerToken
	if !b.started {
		b.nano, b.last, b.started = full, now, true
		return
	}
	if d := now.Sub(b.last); d > 0 {
		// d*Rate in nano-tokens, d capped first at the time to fill up (no overflow).
		d = min(d, time.Duration(full/max(b.Rate, 1))+1)
		b.nano = min(full, b.nano+int64(d)*b.Rate)
	}
	b.last = now
}

// SetRate changes the rate and the burst at now: what the bucket gained until now is counted
// at the old rate, and it keeps what it holds, at most the new burst.
func (b *Bucket) SetRate(now time.Time, rate, burst int64) {
	b.refill(now)
	b.Rate, b.Burst = rate, burst
	b.nano = min(b.nano, burst*nanoPerToken)
}
