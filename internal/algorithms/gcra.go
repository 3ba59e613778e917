package algorithms

import "math"

// GCRA is the generic cell rate algorithm as redis-cell's CL.THROTTLE runs
// it. Its whole state is one instant, the theoretical arrival time (TAT):
// when the key would be back to full if nothing more arrived. Units arrive
// at one per Interval; a request of quantity units moves the TAT forward by
// quantity × Interval, and is admitted while the TAT it would leave is no
// more than the delay variation tolerance, Interval × (Burst + 1), ahead of
// now:
//
//	DVT = Interval × (Burst + 1); increment = Interval × quantity
//	new TAT = max(TAT, now) + increment; allow at = new TAT − DVT
//	limited iff now < allow at
//
// Unlike the five rule algorithms it keeps no State: the caller stores the
// TAT (CL.THROTTLE keeps it as the key's value, expiring at the TAT).

// GCRAParams are one CL.THROTTLE call's numbers, validated by the caller:
// Burst >= 0, Interval >= 1, and Interval × (Burst + 1) fits in an int64.
type GCRAParams struct {
	// Burst is max_burst: how many units beyond the first may be admitted
	// at once.
	Burst int64
	// Interval is the emission interval, period / count: nanoseconds
	// between units at the sustained rate.
	Interval int64
}

// GCRADecision is GCRA's answer, in the terms CL.THROTTLE replies in.
type GCRADecision struct {
	Allowed bool
	// Limit is Burst + 1, the most units admitted at once.
	Limit int64
	// Remaining is the whole units that could still be admitted now,
	// after this request, rounded down.
	Remaining int64
	// RetryAfter is, when denied, nanoseconds until the same request
	// would be admitted; −1 when admitted, or when quantity exceeds what
	// the limiter can ever admit at once (waiting would not help).
	RetryAfter int64
	// ResetAfter is nanoseconds until the limiter is full again (TAT −
	// now).
	ResetAfter int64
}

// GCRA decides a request of quantity units (0 only looks) at now, for a key
// whose TAT is tat (pass now for a key with none). It returns the TAT to
// store when the request is admitted (tat when denied: nothing changes) and
// the decision. A returned TAT at or before now means the limiter is full:
// there is nothing to keep. quantity × Interval must fit in an int64; a TAT
// beyond the int64 range saturates.
func GCRA(p GCRAParams, tat, now, quantity int64) (next int64, d GCRADecision) {
	dvt := p.Interval * (p.Burst + 1)
	increment := p.Interval * quantity
	newTAT := max(tat, now)
	if newTAT > math.MaxInt64-increment {
		newTAT = math.MaxInt64
	} else {
		newTAT += increment
	}
	allowAt := newTAT - dvt
	d.Limit = p.Burst + 1
	next = tat
	if now < allowAt {
		d.ResetAfter, d.RetryAfter = tat-now, allowAt-now
	} else {
		d.Allowed = true
		d.ResetAfter, d.RetryAfter = newTAT-now, -1
		next = newTAT
	}
	if increment > dvt {
		d.RetryAfter = -1
	}
	if diff := dvt - d.ResetAfter; diff > -p.Interval {
		d.Remaining = gcraRemaining(diff, p.Interval)
	}
	return next, d
}

// GCRAInterval is the emission interval in ns, period (ns) / count, computed
// as redis-cell computes it: a float64 division, truncated. It differs from
// integer division only when period (2^53 ns is about 104 days) or count
// exceeds 2^53, where the floats round.
func GCRAInterval(period, count int64) int64 {
	return int64(float64(period) / float64(count))
}

// gcraRemaining is redis-cell's remaining: how many emission intervals
// fit in diff (both ns), each first truncated to whole microseconds,
// divided as float64 and truncated. An interval under 1 µs divides by zero,
// which Rust's float-to-integer conversion turns into 0 (0/0, NaN) or the
// int64 maximum (x/0, infinity); diff > −interval keeps the quotient above
// −1, so truncation gives 0 there.
func gcraRemaining(diff, interval int64) int64 {
	q := float64(diff/1000) / float64(interval/1000)
	switch {
	case q != q:
		return 0
	case q >= math.MaxInt64:
		return math.MaxInt64
	}
	return int64(q)
}
