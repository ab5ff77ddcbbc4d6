package quota

import (
	"testing"
	"time"
)

// The bucket is driven by a clock the test moves; each step is a Take at an offset from the
// start and the tokens it must grant.
func TestBucket(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	steps := []struct {
		at   time.Duration
		ask  int
		want int
		why  string
	}{
		{0, 60, 60, "starts full: a burst of 100"},
		{0, 60, 40, "the rest of the burst, no more"},
		{0, 1, 0, "empty"},
		{90 * time.Millisecond, 1, 0, "0.9 tokens gained at 10/s: not a whole one"},
		{100 * time.Millisecond, 5, 1, "one whole token after 100 ms"},
		{600 * time.Millisecond, 10, 5, "five more after another 500 ms"},
		{300 * time.Millisecond, 10, 0, "the clock stepped back: nothing gained"},
		{500 * time.Millisecond, 10, 2, "counted again from where it stepped back to"},
		{time.Hour, 1000, 100, "idle for an hour: full, never over the burst"},
		{time.Hour, 0, 0, "asking for none takes none"},
		{time.Hour, -3, 0, "nor does a negative ask"},
	}
	b := Bucket{Rate: 10, Burst: 100}
	for i, s := range steps {
		if got := b.Take(t0.Add(s.at), s.ask); got != s.want {
			t.Fatalf("step %d (%s): took %d of %d, want %d", i, s.why, got, s.ask, s.want)
		}
		if tok := b.Tokens(t0.Add(s.at)); tok < 0 || tok > b.Burst {
			t.Fatalf("step %d: %v tokens, outside [0, %v]", i, tok, b.Burst)
		}
	}
}

// SetRate counts what was gained at the old rate, keeps at most the new burst, and fills at
// the new rate from then on.
func TestBucketSetRate(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	b := Bucket{Rate: 10, Burst: 100}
	if got := b.Take(t0, 100); got != 100 {
		t.Fatalf("took %d of a full bucket of 100", got)
	}
	b.SetRate(t0.Add(time.Second), 1000, 50) // 10 gained at the old rate
	if got := b.Take(t0.Add(time.Second), 100); got != 10 {
		t.Fatalf("took %d after a second at 10/s, want 10", got)
	}
	if got := b.Take(t0.Add(time.Second+20*time.Millisecond), 100); got != 20 {
		t.Fatalf("took %d after 20 ms at 1000/s, want 20", got)
	}
	if got := b.Tokens(t0.Add(time.Hour)); got != 50 {
		t.Fatalf("%d tokens after an hour, want the new burst 50", got)
	}
	b.SetRate(t0.Add(time.Hour), 1, 5)
	if got := b.Tokens(t0.Add(time.Hour)); got != 5 {
		t.Fatalf("%d tokens once the burst fell to 5, want 5", got)
	}
}
