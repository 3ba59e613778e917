package algorithms

// Rescale adapts a key's state, kept under the numbers old, to a rule whose
// limit, window or burst changed to new (same algorithm), at now. The budget
// already spent carries over in whole units and the new ceiling applies at
// once: a bucket keeps its level and the fraction of a unit drained so far;
// a window algorithm keeps the units counted in its current (and, for the
// sliding counter, previous) window, re-aligned to the new window length; a
// sliding log keeps its entries, which the new window then ages.
//
// A key that had spent more than the new ceiling therefore stays denied
// until enough drains or ages out. The one bound: a bucket keeps at most the
// level that drains within MaxDrain (about 100 years) under new, so every
// duration it reports stays in range; a key over-spent by more is denied for
// that long instead. The result is valid under new (see Valid) whenever s was
// valid under old.
func Rescale(old, new Params, s State, now int64) State {
	if now < s.Stamp {
		now = s.Stamp
	}
	switch new.Algorithm {
	case TokenBucket, LeakyBucket:
		s = drain(old, s, now)
		s.Aux, _ = mul(s.Aux, new.Window).divmod(old.Window)
		s.Count = min(s.Count, maxLevel(new))
	case FixedWindow:
		// The count carries over if its window is still the current one;
		// Stamp = now then places it in the new window containing now.
		if windowStart(now, old.Window) > windowStart(s.Stamp, old.Window) {
			s.Count = 0
		}
		s.Stamp = now
	case SlidingCounter:
		s = rollCounter(old, s, now)
	}
	if invariants {
		if err := Valid(new, s); err != nil {
			panic("algorithms: Rescale produced an invalid state: " + err.Error())
		}
	}
	return s
}
