package keyspace

import (
	"math"
	"strconv"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/ttl"
)

// Plain keys are Redis string keys, for applications that limit with the
// INCR/EXPIRE pattern or redis-cell's CL.THROTTLE. They are a namespace of
// their own: a plain key "k" and the limiter state of ("api", "k") never
// meet. They live in the shard that owns hash(key), share the shard's timing
// wheel (a key with a TTL is scheduled to expire, so it is freed even if
// nobody reads it again), and are checked for expiry, to the nanosecond, on
// every access.

// PlainArgs are a plain-key operation's arguments.
type PlainArgs struct {
	// Value is SET's value.
	Value []byte
	// N is INCRBY's delta, or the expiry of SET and EXPIRE: nanoseconds
	// from now, or since the Unix epoch when Flags has ExpireAbsolute.
	N     int64
	Flags Flags
	// Throttle holds CL.THROTTLE's numbers.
	Throttle ThrottleArgs
}

// Flags modify SET and EXPIRE.
type Flags uint16

// The flags.
const (
	SetNX          Flags = 1 << iota // SET only if the key is missing
	SetXX                            // SET only if the key exists
	SetGet                           // SET replies with the old value
	SetKeepTTL                       // SET keeps the key's TTL
	SetExpiry                        // SET has an expiry in N
	ExpireAbsolute                   // N is an instant, not a duration
	ExpireNX                         // EXPIRE only if the key has no TTL
	ExpireXX                         // EXPIRE only if the key has a TTL
	ExpireGT                         // EXPIRE only to a later instant (no TTL counts as infinite)
	ExpireLT                         // EXPIRE only to an earlier instant
)

// ThrottleArgs are CL.THROTTLE's numbers, validated by the caller:
// MaxBurst >= 0, Count >= 1, Period >= 1 s, Quantity >= 0, and
// Period/Count × (MaxBurst + 1) and Period/Count × Quantity fit in an int64
// of nanoseconds (see algorithms.GCRAParams).
type ThrottleArgs struct {
	MaxBurst, Count, Quantity int64
	Period                    int64 // ns
}

// PlainReply is a plain-key operation's answer.
type PlainReply struct {
	// Int is the integer answer (INCR's value, DEL's count, TTL's
	// nanoseconds, ...); for SET, 1 when the value was set.
	Int int64
	// Null reports a null answer: GET of a missing key, a SET whose NX/XX
	// condition failed (or SET GET of a missing key).
	Null bool
	// Bytes is GET's value (or SET GET's old value), copied.
	Bytes []byte
	// Throttle is CL.THROTTLE's reply: limited, limit, remaining,
	// retry_after (ns, or −1), reset_after (ns).
	Throttle [5]int64
}

// applyAny applies a limiter or a plain-key operation.
func (s *shard) applyAny(op *Op, now int64) {
	if op.Kind.isPlain() {
		s.applyPlain(op, now)
	} else {
		s.apply(op, now)
	}
}

// lookupPlain returns key's live entry, expiring it first if its TTL has
// run out.
func (s *shard) lookupPlain(key []byte, now int64) *entry {
	e := s.plain[string(key)]
	if e != nil && e.state.Stamp != 0 && e.state.Stamp <= now {
		s.remove(e)
		s.expired++
		return nil
	}
	return e
}

// insertPlain creates an empty plain key.
func (s *shard) insertPlain(key []byte) *entry {
	e := s.newEntry(key)
	s.plain[e.key()] = e
	s.keys++
	return e
}

// setExpiry gives e a TTL ending at instant at, or none if at is 0.
func (s *shard) setExpiry(e *entry, at int64) {
	switch {
	case at == 0 && e.state.Stamp != 0:
		s.wheel.Cancel(&e.timer)
		s.expiring--
	case at != 0:
		if e.state.Stamp == 0 {
			s.expiring++
		}
		s.wheel.Schedule(&e.timer, at)
	}
	e.state.Stamp = at
}

// expiryOf turns an operation's N into an instant.
func expiryOf(args *PlainArgs, now int64) int64 {
	if args.Flags&ExpireAbsolute != 0 {
		return args.N
	}
	if args.N > math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + args.N
}

// createPlain creates op's key for a write, if mayCreate allows it;
// otherwise it sets op.Err and returns nil.
func (s *shard) createPlain(op *Op) *entry {
	if err := s.mayCreate(op.Key); err != nil {
		op.Err = err
		return nil
	}
	return s.insertPlain(op.Key)
}

func (s *shard) applyPlain(op *Op, now int64) {
	e := s.lookupPlain(op.Key, now)
	r := &op.Reply
	a := &op.Args
	switch op.Kind {
	case Get:
		if e == nil {
			r.Null = true
			return
		}
		r.Bytes = append(r.Bytes[:0], e.val()...)
	case Set:
		if len(a.Value) > s.limits.maxValue {
			op.Err = &TooLargeError{What: "value", Size: len(a.Value), Limit: s.limits.maxValue}
			return
		}
		if a.Flags&SetGet != 0 {
			if e == nil {
				r.Null = true
			} else {
				r.Bytes = append(r.Bytes[:0], e.val()...)
			}
		}
		if (a.Flags&SetNX != 0 && e != nil) || (a.Flags&SetXX != 0 && e == nil) {
			if a.Flags&SetGet == 0 {
				r.Null = true
			}
			return
		}
		at := int64(0)
		switch {
		case a.Flags&SetExpiry != 0:
			at = expiryOf(a, now)
		case a.Flags&SetKeepTTL != 0 && e != nil:
			at = e.state.Stamp
		}
		if at != 0 && at <= now {
			// Already expired, as Redis treats SET ... EXAT <past>: the
			// key is gone.
			if e != nil {
				s.remove(e)
			}
			r.Int = 1
			s.changes++
			return
		}
		if e == nil {
			if e = s.createPlain(op); e == nil {
				return
			}
		}
		e.setVal(append(e.val()[:0], a.Value...))
		s.setExpiry(e, at)
		r.Int = 1
		s.changes++
	case IncrBy:
		var cur int64
		if e != nil {
			v, err := strconv.ParseInt(string(e.val()), 10, 64)
			if err != nil || !canonicalInt(e.val()) {
				op.Err = ErrNotInteger
				return
			}
			cur = v
		}
		if (a.N > 0 && cur > math.MaxInt64-a.N) || (a.N < 0 && cur < math.MinInt64-a.N) {
			op.Err = ErrOverflow
			return
		}
		if e == nil {
			if e = s.createPlain(op); e == nil {
				return
			}
		}
		r.Int = cur + a.N
		e.setVal(strconv.AppendInt(e.val()[:0], r.Int, 10))
		s.changes++
	case Del:
		if e != nil {
			s.remove(e)
			r.Int = 1
			s.changes++
		}
	case Exists, Type:
		if e != nil {
			r.Int = 1
		}
	case Expire:
		if e == nil {
			return
		}
		at := expiryOf(a, now)
		switch {
		case a.Flags&ExpireNX != 0 && e.state.Stamp != 0,
			a.Flags&ExpireXX != 0 && e.state.Stamp == 0,
			a.Flags&ExpireGT != 0 && (e.state.Stamp == 0 || at <= e.state.Stamp),
			a.Flags&ExpireLT != 0 && e.state.Stamp != 0 && at >= e.state.Stamp:
			return // condition not met: 0
		}
		r.Int = 1
		s.changes++
		if at <= now {
			s.remove(e) // an instant in the past deletes the key
			return
		}
		s.setExpiry(e, at)
	case TTL:
		switch {
		case e == nil:
			r.Int = -2
		case e.state.Stamp == 0:
			r.Int = -1
		default:
			r.Int = e.state.Stamp - now
		}
	case Persist:
		if e != nil && e.state.Stamp != 0 {
			s.setExpiry(e, 0)
			r.Int = 1
			s.changes++
		}
	case Throttle:
		s.throttle(op, e, now)
	}
}

// canonicalInt reports whether b is an integer as Redis writes one, so
// " 1", "+1" and "01" are not integers, as in Redis.
func canonicalInt(b []byte) bool {
	if len(b) == 0 || b[0] == '+' || b[0] == ' ' {
		return false
	}
	digits := b
	if b[0] == '-' {
		digits = b[1:]
	}
	return len(digits) > 0 && (digits[0] != '0' || len(digits) == 1) && !(b[0] == '-' && digits[0] == '0')
}

// throttle is CL.THROTTLE: the GCRA (algorithms.GCRA) over the key's
// theoretical arrival time (TAT, ns since the epoch), which is kept as the
// key's value, with the key expiring at the TAT. A key whose value is not an
// integer is of another kind (ErrWrongKind).
func (s *shard) throttle(op *Op, e *entry, now int64) {
	t := &op.Args.Throttle
	tat := now
	if e != nil {
		v, err := strconv.ParseInt(string(e.val()), 10, 64)
		if err != nil {
			op.Err = ErrWrongKind
			return
		}
		tat = v
	}
	next, d := algorithms.GCRA(algorithms.GCRAParams{Burst: t.MaxBurst, Interval: algorithms.GCRAInterval(t.Period, t.Count)}, tat, now, t.Quantity)
	if d.Allowed && next > now {
		if e == nil {
			if e = s.createPlain(op); e == nil {
				return
			}
		}
		e.setVal(strconv.AppendInt(e.val()[:0], next, 10))
		s.setExpiry(e, next)
		s.changes++
	}
	limited := int64(1)
	if d.Allowed {
		limited = 0
	}
	op.Reply.Throttle = [5]int64{limited, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter}
}

// flush drops every key the shard holds, limiter state and plain keys. The
// rules' tables stay, emptied, so their decision counters keep counting:
// counters are monotonic, restarting only when a rule is deleted or its
// algorithm changes (a new rule ID, a new table).
func (s *shard) flush(now int64) {
	for _, t := range s.tables {
		t.states = make(map[string]*entry)
	}
	s.plain = make(map[string]*entry)
	s.wheel = ttl.New[*entry](now)
	s.keys, s.expiring = 0, 0
	s.abortScan()
	s.changes++
}
