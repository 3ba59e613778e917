package algorithms

// Windows are aligned to multiples of Window since the Unix epoch, so every
// key of a rule rolls over at the same instants and a window's start can be
// computed from now alone.

func windowStart(now, window int64) int64 { return now - now%window }

func fixedWindow(p Params, s State, now, cost int64, spend bool) (State, Decision) {
	if now < s.Stamp {
		now = s.Stamp
	}
	start := windowStart(now, p.Window)
	if start > windowStart(s.Stamp, p.Window) {
		s.Count = 0
	}
	s.Stamp = now
	end := start + p.Window
	d := Decision{Limit: p.Limit}
	if s.Count+cost <= p.Limit {
		d.Allowed = true
		if spend {
			s.Count += cost
		}
	} else {
		d.RetryAfter = end - now
	}
	d.Remaining = max(p.Limit-s.Count, 0)
	if s.Count > 0 {
		d.ResetAfter = end - now
	}
	return s, d
}

// slidingCounter estimates the count over the trailing window as
//
//	previous × (Window − elapsed) / Window + current
//
// where elapsed is the time since the current window started, and admits
// while estimate + cost <= Limit. Both sides are multiplied by Window so the
// comparison is exact in integers.
func slidingCounter(p Params, s State, now, cost int64, spend bool) (State, Decision) {
	if now < s.Stamp {
		now = s.Stamp
	}
	s = rollCounter(p, s, now)
	start := windowStart(now, p.Window)
	previousShare := mul(s.Aux, p.Window-(now-start)) // previous window's weight, × Window
	d := Decision{Limit: p.Limit}
	if room := p.Limit - s.Count - cost; room >= 0 && !mul(room, p.Window).less(previousShare) {
		d.Allowed = true
		if spend {
			s.Count += cost
		}
	} else {
		d.RetryAfter = counterRetryAt(p, s, start, cost) - now
	}
	d.Remaining = max(p.Limit-s.Count-previousShare.ceilDiv(p.Window), 0)
	switch {
	case s.Count > 0:
		d.ResetAfter = start + 2*p.Window - now
	case s.Aux > 0:
		d.ResetAfter = start + p.Window - now
	}
	return s, d
}

// rollCounter moves a sliding counter to the window containing now (which
// must not be before s.Stamp): the current count becomes the previous one if
// the windows are adjacent, and is forgotten if a whole window passed with no
// request.
func rollCounter(p Params, s State, now int64) State {
	start, last := windowStart(now, p.Window), windowStart(s.Stamp, p.Window)
	if start > last {
		if start == last+p.Window {
			s.Aux = s.Count
		} else {
			s.Aux = 0
		}
		s.Count = 0
	}
	s.Stamp = now
	return s
}

// counterRetryAt solves for the first instant at which a request of cost
// would be admitted, given that nothing else is spent and the current window
// began at start. It is the instant enough of the previous window has slid
// out, which may fall inside the current window, inside the next one, or at a
// boundary.
func counterRetryAt(p Params, s State, start, cost int64) int64 {
	// In the current window: need Aux × (Window − e) <= room × Window, so
	// e >= Window × (Aux − room) / Aux.
	if room := p.Limit - s.Count - cost; room >= 0 && s.Aux > room {
		if e := mul(p.Window, s.Aux-room).ceilDiv(s.Aux); e < p.Window {
			return start + e
		}
	}
	// In the next window the current count becomes the previous one and the
	// new current window is empty; room there is Limit − cost >= 0.
	next := start + p.Window
	room := p.Limit - cost
	if s.Count <= room {
		return next
	}
	// e <= Window because room >= 0: at the window after next nothing is left.
	return next + mul(p.Window, s.Count-room).ceilDiv(s.Count)
}
