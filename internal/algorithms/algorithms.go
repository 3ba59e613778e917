// Package algorithms holds rlserver's five rate-limiting algorithms as pure
// functions over a small State value and an instant supplied by the caller.
//
// Nothing here reads a clock, locks, allocates on the steady path or does
// I/O: the shard that owns a key passes in the key's state and "now", and
// stores the State that comes back. That makes every algorithm testable by
// walking fixed instants through a table, and lets one goroutine own each
// key's state without any synchronisation inside the algorithm.
//
// Time is an int64 count of nanoseconds since the Unix epoch throughout. All
// arithmetic on rates is exact integer arithmetic (with 128-bit intermediates
// where a product can exceed 64 bits), so limits up to 10^9 per window and
// windows from 1 ms to 366 days lose no precision. An instant earlier than
// one the state has already seen counts as no time passing.
package algorithms

// Algorithm names one of the five algorithms. The zero value is invalid.
type Algorithm uint8

// The algorithms, in the order the documentation lists them.
const (
	TokenBucket Algorithm = iota + 1
	LeakyBucket
	FixedWindow
	SlidingLog
	SlidingCounter
)

// Bounds on Params. The rules package enforces them on every rule; the
// exact arithmetic here relies on them (see Params), and Valid on the states
// they allow.
const (
	// MaxLimit bounds a rule's limit and a bucket's burst, in units.
	MaxLimit = 1_000_000_000
	// MinWindow and MaxWindow bound a rule's window: 1 ms to 366 days, in
	// nanoseconds.
	MinWindow = int64(1_000_000)
	MaxWindow = 366 * 24 * 3600 * int64(1_000_000_000)
	// MaxDrain bounds the time a bucket takes to drain from its fullest
	// level to empty, about 100 years in nanoseconds: a rule's burst ×
	// window / limit must fit it, and Rescale keeps an over-spent key's
	// level within it, so every duration a bucket reports, added to any
	// instant before the year 2140, fits in an int64.
	MaxDrain = 100 * MaxWindow
	// MaxSlidingLogLimit bounds a sliding log's limit: the log keeps one
	// timestamp (8 bytes) per admitted unit inside the window, so memory
	// per key is O(limit), and 100000 units is 800 KB for one key.
	MaxSlidingLogLimit = 100_000
)

var algorithmNames = [...]string{
	TokenBucket:    "token_bucket",
	LeakyBucket:    "leaky_bucket",
	FixedWindow:    "fixed_window",
	SlidingLog:     "sliding_log",
	SlidingCounter: "sliding_counter",
}

// String returns the name used in rule files and commands, e.g. "token_bucket".
func (a Algorithm) String() string {
	if a == 0 || int(a) >= len(algorithmNames) {
		return "unknown"
	}
	return algorithmNames[a]
}

// IsBucket reports whether a is one of the two bucket algorithms, whose
// capacity may differ from their limit (the "burst").
func (a Algorithm) IsBucket() bool { return a == TokenBucket || a == LeakyBucket }

// ParseAlgorithm maps a name as written in a rule ("sliding_counter") to its
// Algorithm. Names are case-sensitive, as in the rules file.
func ParseAlgorithm(name string) (Algorithm, bool) {
	for a := TokenBucket; a <= SlidingCounter; a++ {
		if algorithmNames[a] == name {
			return a, true
		}
	}
	return 0, false
}

// Params are a rule's numbers, already validated by the rules package:
// 1 <= Limit <= MaxLimit, MinWindow <= Window <= MaxWindow, 1 <= Capacity
// <= MaxLimit, and for buckets Capacity*Window/Limit (the time to drain a
// full bucket) is at most MaxDrain.
type Params struct {
	Algorithm Algorithm
	// Limit is the number of units admitted per Window (the rate is
	// Limit/Window units per nanosecond).
	Limit int64
	// Window is the length of the window in nanoseconds.
	Window int64
	// Capacity is the most units a key can hold: the burst for buckets
	// (Limit when no burst is set), Limit for the window algorithms.
	Capacity int64
}

// Decision is the answer to one request. Durations are nanoseconds; the RESP
// layer rounds them up to whole milliseconds, so a client that waits the
// rounded figure is never early.
type Decision struct {
	// Allowed reports whether the request was (or, for a peek, would be)
	// admitted.
	Allowed bool
	// Limit is Capacity for buckets and Limit for the window algorithms.
	Limit int64
	// Remaining is the whole units still available after this decision,
	// never negative.
	Remaining int64
	// RetryAfter is, when denied, the time until a request of the same cost
	// would be admitted if nobody else spends meanwhile; 0 when allowed.
	RetryAfter int64
	// ResetAfter is the time until the key is back at full capacity.
	ResetAfter int64
	// Delay is, for an admitted leaky-bucket request, the time the work
	// already queued ahead of it takes to drain; 0 otherwise.
	Delay int64
}

// State is one key's state. Stamp is, for every algorithm, the latest
// instant the key has seen, so an earlier now can be treated as no time
// passing; windows are aligned, so the current window's start is derived from
// it. Count and Aux mean different things per algorithm, which keeps every key
// the same small size in the shard's map:
//
//	algorithm        Count                          Aux
//	token_bucket     tokens spent, not yet refilled drain progress
//	leaky_bucket     units queued, not yet drained  drain progress
//	fixed_window     units in the current window    -
//	sliding_counter  units in the current window    units in the previous window
//	sliding_log      entries held in Log            index of the oldest entry in Log
//
// Drain progress is how far the oldest held unit is through draining, in
// units of 1/Window of a unit (so a bucket drains exactly Limit of them per
// nanosecond, an integer); it is always in [0, Window).
//
// Count may exceed the rule's capacity after the rule was lowered (see
// Rescale); Valid gives the exact ranges.
//
// The zero State is a fresh key for every algorithm: a full token bucket, an
// empty leaky bucket, empty windows and an empty log.
type State struct {
	Stamp int64
	Count int64
	Aux   int64
	// Log is the sliding log's ring buffer of admission instants, holding
	// Count entries from index Aux, oldest first. The buffer is reused in
	// place: after Decide, only the returned State may be used.
	Log []int64
}

// Decide spends cost units if the algorithm admits them at now, and returns
// the new state and the decision. A denied request leaves the budget as it
// was. cost must be between 1 and p.Capacity (the rules layer rejects larger
// costs before they reach here, because such a request could never pass).
func Decide(p Params, s State, now, cost int64) (State, Decision) {
	return decide(p, s, now, cost, true)
}

// Peek reports what Decide would answer for cost at now without spending:
// Allowed says whether the request would be admitted, and Remaining and
// ResetAfter describe the state as it is, uncharged.
func Peek(p Params, s State, now, cost int64) Decision {
	_, d := decide(p, s, now, cost, false)
	return d
}

func decide(p Params, s State, now, cost int64, spend bool) (next State, d Decision) {
	switch p.Algorithm {
	case TokenBucket, LeakyBucket:
		next, d = bucket(p, s, now, cost, spend)
	case FixedWindow:
		next, d = fixedWindow(p, s, now, cost, spend)
	case SlidingLog:
		next, d = slidingLog(p, s, now, cost, spend)
	case SlidingCounter:
		next, d = slidingCounter(p, s, now, cost, spend)
	default:
		panic("algorithms: invalid algorithm " + p.Algorithm.String())
	}
	if invariants && spend {
		if err := Valid(p, next); err != nil {
			panic("algorithms: Decide produced an invalid state: " + err.Error())
		}
	}
	return next, d
}

// FreshAt returns the instant from which s is indistinguishable from a new
// key's state under p: dropping the key at or after it changes no decision
// made at any instant from s.Stamp on. It is the instant a token bucket is
// full again, a leaky bucket drained, a fixed window over, a sliding log's
// newest entry aged out, or a sliding counter's current and previous windows
// both aged out; s.Stamp itself when s already is fresh.
func FreshAt(p Params, s State) int64 {
	switch p.Algorithm {
	case TokenBucket, LeakyBucket:
		return s.Stamp + timeToDrain(p, s)
	case FixedWindow:
		if s.Count == 0 {
			return s.Stamp
		}
		return windowStart(s.Stamp, p.Window) + p.Window
	case SlidingCounter:
		start := windowStart(s.Stamp, p.Window)
		switch {
		case s.Count > 0:
			return start + 2*p.Window
		case s.Aux > 0:
			return start + p.Window
		}
		return s.Stamp
	case SlidingLog:
		if s.Count == 0 {
			return s.Stamp
		}
		return logAt(s, s.Count-1) + p.Window
	}
	panic("algorithms: invalid algorithm " + p.Algorithm.String())
}
