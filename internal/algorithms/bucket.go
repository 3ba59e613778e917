package algorithms

// The token bucket and the leaky bucket are one mechanism seen from two
// sides. Both keep a level of units that drains at Limit/Window units per
// nanosecond and admit a request while level + cost <= Capacity. For the
// token bucket the level is the tokens spent and not yet refilled, so a new
// key (level 0) is a full bucket; for the leaky bucket it is the work queued
// and not yet drained, so a new key is an empty queue. Only the leaky bucket
// reports Delay, because it shapes traffic rather than only gating it.

func bucket(p Params, s State, now, cost int64, spend bool) (State, Decision) {
	if now < s.Stamp {
		now = s.Stamp
	}
	s = drain(p, s, now)
	d := Decision{Limit: p.Capacity}
	if s.Count+cost <= p.Capacity {
		d.Allowed = true
		if p.Algorithm == LeakyBucket {
			d.Delay = timeToDrain(p, s)
		}
		if spend {
			s.Count += cost
		}
	} else {
		// k units must drain before cost fits; the oldest has already
		// made Aux of its Window progress units.
		k := s.Count + cost - p.Capacity
		d.RetryAfter = mul(k, p.Window).sub(s.Aux).ceilDiv(p.Limit)
	}
	d.Remaining = max(p.Capacity-s.Count, 0)
	d.ResetAfter = timeToDrain(p, s)
	return s, d
}

// drain lets the time from s.Stamp to now pass over a bucket. Progress is
// counted in 1/Window of a unit, so exactly Limit progress units drain per
// nanosecond and no rate is ever rounded.
func drain(p Params, s State, now int64) State {
	if now <= s.Stamp {
		return s
	}
	elapsed := now - s.Stamp
	s.Stamp = now
	if s.Count == 0 {
		s.Aux = 0
		return s
	}
	progress := mul(elapsed, p.Limit).add(s.Aux)
	if !progress.less(mul(s.Count, p.Window)) {
		s.Count, s.Aux = 0, 0
		return s
	}
	units, rest := progress.divmod(p.Window)
	s.Count -= units
	s.Aux = rest
	return s
}

// timeToDrain is how long, in nanoseconds rounded up, the level of s takes
// to drain to zero.
func timeToDrain(p Params, s State) int64 {
	if s.Count == 0 {
		return 0
	}
	return mul(s.Count, p.Window).sub(s.Aux).ceilDiv(p.Limit)
}
