package algorithms

// The sliding log keeps the instant of every admitted unit still inside the
// trailing window, in a ring buffer that grows (up to the rule's limit) only
// when it is full, so a key at steady state never allocates. An entry at t is
// inside the window at now while t > now − Window.

func slidingLog(p Params, s State, now, cost int64, spend bool) (State, Decision) {
	if now < s.Stamp {
		now = s.Stamp
	}
	s = expireLog(s, now-p.Window)
	s.Stamp = now
	d := Decision{Limit: p.Limit}
	if s.Count+cost <= p.Limit {
		d.Allowed = true
		if spend {
			s = appendLog(p, s, now, cost)
		}
	} else {
		// The k oldest entries must age out; the k-th leaves at its
		// instant + Window. k <= Count because cost <= Limit.
		k := s.Count + cost - p.Limit
		d.RetryAfter = logAt(s, k-1) + p.Window - now
	}
	d.Remaining = max(p.Limit-s.Count, 0)
	if s.Count > 0 {
		d.ResetAfter = logAt(s, s.Count-1) + p.Window - now
	}
	return s, d
}

// logAt returns the i-th oldest entry, 0 <= i < s.Count.
func logAt(s State, i int64) int64 {
	return s.Log[(s.Aux+i)%int64(len(s.Log))]
}

// expireLog drops the entries at or before cutoff. Entries are in time order,
// so a binary search finds how many: O(log n) even for a peek that does not
// keep the result.
func expireLog(s State, cutoff int64) State {
	lo, hi := int64(0), s.Count // first entry > cutoff is in [lo, hi]
	for lo < hi {
		mid := int64(uint64(lo+hi) >> 1)
		if logAt(s, mid) <= cutoff {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo > 0 {
		s.Aux = (s.Aux + lo) % int64(len(s.Log))
		s.Count -= lo
	}
	return s
}

// appendLog records cost entries at now, growing the ring when it is full.
// The ring never needs more than Limit slots (Count + cost <= Limit when a
// request is admitted), so growth stops there.
func appendLog(p Params, s State, now, cost int64) State {
	need := s.Count + cost
	if need > int64(len(s.Log)) {
		size := min(max(2*int64(len(s.Log)), need, 4), max(p.Limit, need))
		grown := make([]int64, size)
		for i := range s.Count {
			grown[i] = logAt(s, i)
		}
		s.Log, s.Aux = grown, 0
	}
	n := int64(len(s.Log))
	for i := range cost {
		s.Log[(s.Aux+s.Count+i)%n] = now
	}
	s.Count += cost
	return s
}
