package algorithms

// Acquire and Refund serve the two-tier pattern: a gateway node reserves a
// chunk of units in one call, serves them from memory, and gives back the
// units it did not use.
//
// A reservation is a real spend: the units are charged at the instant they
// are granted, exactly as if that many requests of cost 1 had been admitted
// then. A refund can therefore only make the state look as though fewer of
// those units had been spent at that instant, and must never give back more
// than that: a key whose units have already drained, aged out or rolled out
// of their window has nothing of them left to return, and returning units
// that other callers spent meanwhile would let the key admit more than its
// limit. That is why Refund takes the instant the units were granted (the
// Stamp of the State Acquire returned): it is how each algorithm tells which
// of its units a refund may remove. Refund trusts its caller to return only
// units it was granted and did not use; a caller that returns units it never
// had gives the key more than its limit, and no state can tell them apart.

// Acquire grants as many of n units as the key can admit at now, between 0
// and n: exactly the largest cost Decide would admit, capped at n. The units
// granted are spent (a grant of k is Decide with cost k); granting 0 spends
// nothing. n must be at least 1 (the command layer refuses smaller counts);
// a larger n than the key's capacity is fine and simply grants what there
// is, so the result never exceeds the limit (Capacity for buckets).
//
// The Decision is Decide's for the cost granted: Allowed when granted > 0,
// with Remaining, ResetAfter and Delay after the grant. When nothing is
// granted it is the denial of a cost of 1: RetryAfter is the wait until one
// more unit can be granted, if nobody else spends meanwhile.
//
// The instant the units were spent is the returned State's Stamp (now, or
// the state's own stamp if now is earlier): Refund needs it.
//
// Like Decide, Acquire allocates only when a sliding log's ring must grow.
func Acquire(p Params, s State, now, n int64) (next State, granted int64, d Decision) {
	// A peek for one unit leaves the state advanced to now (drained,
	// rolled, expired) and reports in Remaining exactly how many units
	// fit: for every algorithm, a cost c is admitted iff c <= Remaining
	// (for the sliding counter, Remaining already takes off the previous
	// window's weight, rounded up, which is the exact admission bound).
	next, d = decide(p, s, now, 1, false)
	granted = min(n, d.Remaining)
	if granted < 1 {
		d.Allowed = false // n < 1: nothing asked, nothing granted
		if invariants {
			checkValid("Acquire", p, next)
		}
		return next, 0, d
	}
	next, d = decide(p, next, now, granted, true)
	if !d.Allowed {
		panic("algorithms: Acquire was refused the units Remaining reported")
	}
	return next, granted, d
}

// Refund gives back up to n units the caller was granted at the instant at
// (the Stamp of the State Acquire returned) and did not use, at now, and
// returns the new state and the number given back: between 0 and n, never
// more than the key holds, so the key never goes below empty (a bucket never
// above full). What may be given back is what is still counted against the
// key from that grant:
//
//   - token_bucket, leaky_bucket: the level is lowered, by n less the units
//     that may have drained since at (now − at at the rule's rate, rounded
//     up). The bucket does not remember whose units are still in it, and
//     it drains the oldest first; at worst, every unit that drained since
//     at was one of the caller's. What remains of them has not drained
//     and is safe to take off.
//   - fixed_window: the current window's count is lowered, if at falls in
//     the current window; a refund in a later window than the grant returns
//     nothing (the grant's window is over, and its units with it).
//   - sliding_counter: the same, from the current window's count only. The
//     previous window's count, which weighs on the estimate, is never
//     touched: the grant's units, spent in this window, are not in it.
//   - sliding_log: entries stamped exactly at are removed (entries of one
//     instant are interchangeable). Once at has aged out of the trailing
//     window there are none, and nothing is returned. Removing the newest
//     entries instead would be wrong when others were admitted after the
//     grant: their admissions would then be recorded at the earlier instant
//     and age out too soon.
//
// In every case the state afterwards is at least as spent as if the caller
// had been granted only the units it used, so any interleaving of Decide,
// Acquire and Refund admits no more than the algorithm admits for the units
// actually used. Refund never allocates.
func Refund(p Params, s State, now, at, n int64) (next State, returned int64) {
	if now < s.Stamp {
		now = s.Stamp
	}
	switch p.Algorithm {
	case TokenBucket, LeakyBucket:
		s, returned = refundBucket(p, s, now, at, n)
	case FixedWindow:
		if windowStart(now, p.Window) > windowStart(s.Stamp, p.Window) {
			s.Count = 0
		}
		s.Stamp = now
		s, returned = refundCount(p, s, now, at, n)
	case SlidingCounter:
		s = rollCounter(p, s, now)
		s, returned = refundCount(p, s, now, at, n)
	case SlidingLog:
		s = expireLog(s, now-p.Window)
		s.Stamp = now
		s, returned = refundLog(s, at, n)
	default:
		panic("algorithms: invalid algorithm " + p.Algorithm.String())
	}
	if invariants {
		checkValid("Refund", p, s)
	}
	return s, returned
}

// refundBucket lowers a bucket's level, drained to now, by n less what may
// have drained since at.
func refundBucket(p Params, s State, now, at, n int64) (State, int64) {
	s = drain(p, s, now)
	if n < 1 || s.Count == 0 {
		return s, 0
	}
	if at < now {
		// At most elapsed × Limit / Window units drained since at,
		// rounded up so a fraction of a unit is never returned.
		drained := mul(now-at, p.Limit).ceilDiv(p.Window)
		if drained >= n {
			return s, 0
		}
		n -= drained
	}
	give := min(n, s.Count)
	s.Count -= give
	if s.Count == 0 {
		s.Aux = 0 // no unit left to be part-way through draining
	}
	return s, give
}

// refundCount lowers the current window's count of a window algorithm
// (already rolled to now) by up to n, if at is in the current window.
func refundCount(p Params, s State, now, at, n int64) (State, int64) {
	if n < 1 || at < 0 || windowStart(at, p.Window) != windowStart(now, p.Window) {
		return s, 0
	}
	give := min(n, s.Count)
	s.Count -= give
	return s, give
}

// refundLog removes up to n entries stamped at from a sliding log already
// expired to now, shifting the newer entries down over them in place.
func refundLog(s State, at, n int64) (State, int64) {
	if n < 1 || s.Count == 0 {
		return s, 0
	}
	// Entries are in time order: [lo, hi) is the run stamped at.
	lo := firstLogAtOrAfter(s, at)
	hi := lo
	for hi < s.Count && logAt(s, hi) == at {
		hi++
	}
	give := min(n, hi-lo)
	if give == 0 {
		return s, 0
	}
	size := int64(len(s.Log))
	for i := hi - give; i+give < s.Count; i++ {
		s.Log[(s.Aux+i)%size] = logAt(s, i+give)
	}
	s.Count -= give
	if s.Count == 0 {
		s.Aux = 0
	}
	return s, give
}

// firstLogAtOrAfter returns the index of the oldest entry at or after t
// (s.Count if none), by binary search.
func firstLogAtOrAfter(s State, t int64) int64 {
	lo, hi := int64(0), s.Count
	for lo < hi {
		mid := int64(uint64(lo+hi) >> 1)
		if logAt(s, mid) < t {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// checkValid panics if s is not a valid state under p: a post-condition
// checked in builds tagged invariants.
func checkValid(op string, p Params, s State) {
	if err := Valid(p, s); err != nil {
		panic("algorithms: " + op + " produced an invalid state: " + err.Error())
	}
}
