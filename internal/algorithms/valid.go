package algorithms

import (
	"errors"
	"fmt"
)

// Valid reports whether s is a state a key can be in under p: every state
// Decide and Rescale produce from valid states (the zero State included) is
// valid, and every valid state is one the algorithms handle without
// overflow. It is the one definition of a well-formed state: Rescale's
// post-condition, and what the snapshot encoder and decoder check.
//
// The ranges deliberately include over-spent states: when a rule's limit
// (or burst) is lowered below what a key has already spent, Rescale keeps
// the spent units, so the key stays denied until they refill. Their bounds
// come from where spent units can come from, not from p: no key ever spends
// more than MaxLimit units at once (the largest capacity a rule may have),
// nor more than MaxSlidingLogLimit in a sliding log, and Rescale trims a
// bucket's level to what drains within MaxDrain.
//
//	every algorithm  Stamp >= 0
//	buckets          0 <= Count <= maxLevel(p); 0 <= Aux < Window; Aux = 0 when Count = 0
//	fixed_window     0 <= Count <= MaxLimit; Aux = 0
//	sliding_counter  0 <= Count, Aux <= MaxLimit
//	sliding_log      0 <= Count <= MaxSlidingLogLimit, Count <= len(Log);
//	                 0 <= Aux < len(Log) (both 0 with no Log); the Count entries
//	                 from Aux are in time order and within [0, Stamp]
//
// Log is used by the sliding log alone: the other algorithms' states hold
// none.
func Valid(p Params, s State) error {
	if s.Stamp < 0 {
		return fmt.Errorf("stamp %d is before the epoch", s.Stamp)
	}
	if s.Count < 0 || s.Aux < 0 {
		return fmt.Errorf("negative count %d or aux %d", s.Count, s.Aux)
	}
	if p.Algorithm != SlidingLog && len(s.Log) != 0 {
		return fmt.Errorf("%s state holds a log", p.Algorithm)
	}
	switch p.Algorithm {
	case TokenBucket, LeakyBucket:
		if s.Count > p.Capacity && s.Count > maxLevel(p) { // maxLevel >= Capacity
			return fmt.Errorf("bucket level %d exceeds %d, the most that drains in %d ns at %d per %d ns",
				s.Count, maxLevel(p), MaxDrain, p.Limit, p.Window)
		}
		if s.Aux >= p.Window || (s.Count == 0 && s.Aux != 0) {
			return fmt.Errorf("drain progress %d for a level of %d and a window of %d ns", s.Aux, s.Count, p.Window)
		}
	case FixedWindow:
		if s.Count > MaxLimit || s.Aux != 0 {
			return fmt.Errorf("fixed window count %d, aux %d", s.Count, s.Aux)
		}
	case SlidingCounter:
		if s.Count > MaxLimit || s.Aux > MaxLimit {
			return fmt.Errorf("sliding counter counts %d and %d exceed %d", s.Count, s.Aux, MaxLimit)
		}
	case SlidingLog:
		return validLog(s)
	default:
		return errors.New("invalid algorithm " + p.Algorithm.String())
	}
	return nil
}

// validLog is Valid for a sliding log.
func validLog(s State) error {
	n := int64(len(s.Log))
	if s.Count > MaxSlidingLogLimit || s.Count > n {
		return fmt.Errorf("log of %d entries (ring of %d), more than the %d any rule allows", s.Count, n, MaxSlidingLogLimit)
	}
	if (n == 0 && s.Aux != 0) || (n > 0 && s.Aux >= n) {
		return fmt.Errorf("log head %d in a ring of %d", s.Aux, n)
	}
	prev := int64(0)
	for i := range s.Count {
		at := logAt(s, i)
		if at < prev || at > s.Stamp {
			return fmt.Errorf("log entry %d at %d is out of order (previous %d, stamp %d)", i, at, prev, s.Stamp)
		}
		prev = at
	}
	return nil
}

// maxLevel is the highest level a bucket under p may hold: its capacity,
// or, for a key over-spent by a rule change, what drains within MaxDrain,
// but never more than MaxLimit (no key can have spent more).
func maxLevel(p Params) int64 {
	drainable, _ := mul(MaxDrain, p.Limit).divmod(p.Window)
	return min(max(p.Capacity, drainable), MaxLimit)
}
