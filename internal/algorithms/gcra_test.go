package algorithms

import (
	"math"
	"testing"
)

func TestGCRA(t *testing.T) {
	const now = t0
	for _, tt := range []struct {
		name     string
		p        GCRAParams
		tat      int64 // now for a key with none
		quantity int64
		want     GCRADecision
		next     int64
	}{
		// CL.THROTTLE user123 15 30 60: one unit every 2 s, 16 at once.
		{"fresh key", GCRAParams{Burst: 15, Interval: 2 * sec}, now, 1,
			GCRADecision{Allowed: true, Limit: 16, Remaining: 15, RetryAfter: -1, ResetAfter: 2 * sec}, now + 2*sec},
		// CL.THROTTLE k 0 1 2: one unit every 2 s and no burst.
		{"no burst, first", GCRAParams{Burst: 0, Interval: 2 * sec}, now, 1,
			GCRADecision{Allowed: true, Limit: 1, Remaining: 0, RetryAfter: -1, ResetAfter: 2 * sec}, now + 2*sec},
		{"no burst, second at once", GCRAParams{Burst: 0, Interval: 2 * sec}, now + 2*sec, 1,
			GCRADecision{Allowed: false, Limit: 1, Remaining: 0, RetryAfter: 2 * sec, ResetAfter: 2 * sec}, now + 2*sec},
		{"no burst, TAT reached", GCRAParams{Burst: 0, Interval: 2 * sec}, now, 1,
			GCRADecision{Allowed: true, Limit: 1, Remaining: 0, RetryAfter: -1, ResetAfter: 2 * sec}, now + 2*sec},
		// Half-way through an interval: denied for the other half.
		{"partial interval", GCRAParams{Burst: 1, Interval: sec}, now + 1500*ms, 1,
			GCRADecision{Allowed: false, Limit: 2, Remaining: 0, RetryAfter: 500 * ms, ResetAfter: 1500 * ms}, now + 1500*ms},
		{"partial interval admitted", GCRAParams{Burst: 1, Interval: sec}, now + 500*ms, 1,
			GCRADecision{Allowed: true, Limit: 2, Remaining: 0, RetryAfter: -1, ResetAfter: 1500 * ms}, now + 1500*ms},
		// A TAT in the past is a full limiter.
		{"stale TAT", GCRAParams{Burst: 4, Interval: sec}, now - 10*sec, 2,
			GCRADecision{Allowed: true, Limit: 5, Remaining: 3, RetryAfter: -1, ResetAfter: 2 * sec}, now + 2*sec},
		// Quantity 0 only looks: nothing to store on a full limiter.
		{"look", GCRAParams{Burst: 4, Interval: sec}, now, 0,
			GCRADecision{Allowed: true, Limit: 5, Remaining: 5, RetryAfter: -1, ResetAfter: 0}, now},
		{"look at a busy key", GCRAParams{Burst: 4, Interval: sec}, now + 3*sec, 0,
			GCRADecision{Allowed: true, Limit: 5, Remaining: 2, RetryAfter: -1, ResetAfter: 3 * sec}, now + 3*sec},
		// More than can ever pass at once: denied, and waiting will not help.
		{"quantity above the burst", GCRAParams{Burst: 2, Interval: sec}, now, 5,
			GCRADecision{Allowed: false, Limit: 3, Remaining: 3, RetryAfter: -1, ResetAfter: 0}, now},
		// Exactly the burst at once, then nothing.
		{"whole burst", GCRAParams{Burst: 2, Interval: sec}, now, 3,
			GCRADecision{Allowed: true, Limit: 3, Remaining: 0, RetryAfter: -1, ResetAfter: 3 * sec}, now + 3*sec},
		// A TAT beyond int64 saturates instead of wrapping into the past.
		{"saturating TAT", GCRAParams{Burst: 0, Interval: math.MaxInt64 - 1e18}, now, 1,
			GCRADecision{Allowed: true, Limit: 1, Remaining: 0, RetryAfter: -1, ResetAfter: math.MaxInt64 - now}, math.MaxInt64},
	} {
		next, d := GCRA(tt.p, tt.tat, now, tt.quantity)
		if d != tt.want || next != tt.next {
			t.Errorf("%s: %+v next %d, want %+v next %d", tt.name, d, next-now, tt.want, tt.next-now)
		}
	}
}

// TestGCRASequence walks fixed instants through CL.THROTTLE's documented
// example: 2 units per second with a burst of 2 (3 at once).
func TestGCRASequence(t *testing.T) {
	p := GCRAParams{Burst: 2, Interval: 500 * ms}
	tat := int64(0)
	for i, st := range []struct {
		at        int64 // offset from t0
		allowed   bool
		remaining int64
		retry     int64
	}{
		{0, true, 2, -1}, {0, true, 1, -1}, {0, true, 0, -1},
		{0, false, 0, 500 * ms},
		{499 * ms, false, 0, 1 * ms},
		{500 * ms, true, 0, -1},
		{2000 * ms, true, 2, -1},
	} {
		now := t0 + st.at
		next, d := GCRA(p, max(tat, now), now, 1)
		if d.Allowed != st.allowed || d.Remaining != st.remaining || d.RetryAfter != st.retry {
			t.Fatalf("step %d at +%d ms: %+v, want allowed=%v remaining=%d retry=%d", i, st.at/ms, d, st.allowed, st.remaining, st.retry)
		}
		if d.Allowed {
			tat = next
		}
	}
}
