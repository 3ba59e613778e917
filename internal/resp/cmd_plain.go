package resp

import (
	"errors"
	"fmt"
	"math"

	"github.com/rlserver/rlserver/internal/keyspace"
)

// The Redis string commands behind the INCR/EXPIRE rate-limiting pattern,
// with Redis 7's semantics and error wording. They act on plain keys, a
// namespace separate from limiter state (see shards/plain.go).

// errInvalidExpire is Redis's reply to an expiry it refuses, naming the
// command: not positive (SET, SETEX, PSETEX), or beyond what a signed 64-bit
// count of milliseconds holds (every command).
func errInvalidExpire(cmd string) error {
	return fmt.Errorf("invalid expire time in '%s' command", cmd)
}

var (
	errExpireNXXX  = errors.New("NX and XX, GT or LT options at the same time are not compatible")
	errExpireGTLT  = errors.New("GT and LT options at the same time are not compatible")
	errDecrOverRun = errors.New("decrement would overflow")
)

// Expiry times are validated as Redis 7.0 validates them, in milliseconds
// and with its overflow checks, so the same commands fail; the keyspace
// then keeps them in nanoseconds, where an instant past 2262 does not fit:
// such an expiry is kept as the last representable instant (see
// millisToNanos). An expiry in the past, however far, deletes the key.

// expiryUnit says how an expiry argument is read.
type expiryUnit uint8

const (
	unitSeconds   expiryUnit = iota + 1 // EX, SETEX, EXPIRE
	unitMillis                          // PX, PSETEX, PEXPIRE
	unitAtSeconds                       // EXAT, EXPIREAT: a unix time
	unitAtMillis                        // PXAT, PEXPIREAT
)

func (u expiryUnit) seconds() bool  { return u == unitSeconds || u == unitAtSeconds }
func (u expiryUnit) absolute() bool { return u == unitAtSeconds || u == unitAtMillis }

// setExpiryMillis reads the expiry of SET, SETEX and PSETEX as Redis does:
// an integer above zero whose milliseconds, added to nowMs when relative,
// fit in an int64. It returns the milliseconds as given (relative or
// absolute); name is the command, for the error.
func setExpiryMillis(word []byte, unit expiryUnit, nowMs int64, name string) (int64, error) {
	ms, ok := parseInt(word)
	if !ok {
		return 0, errNotInteger
	}
	if ms <= 0 || (unit.seconds() && ms > math.MaxInt64/1000) {
		return 0, errInvalidExpire(name)
	}
	if unit.seconds() {
		ms *= 1000
	}
	if !unit.absolute() && ms > math.MaxInt64-nowMs {
		return 0, errInvalidExpire(name)
	}
	return ms, nil
}

// expireMillis reads the time argument of EXPIRE, PEXPIRE, EXPIREAT and
// PEXPIREAT as Redis does: any integer (negative ones lie in the past)
// whose milliseconds, added to nowMs when relative, fit in an int64. It
// returns the milliseconds as given, relative or absolute.
func expireMillis(word []byte, unit expiryUnit, nowMs int64, name string) (int64, error) {
	ms, ok := parseInt(word)
	if !ok {
		return 0, errNotInteger
	}
	if unit.seconds() {
		if ms > math.MaxInt64/1000 || ms < math.MinInt64/1000 {
			return 0, errInvalidExpire(name)
		}
		ms *= 1000
	}
	if !unit.absolute() && ms > math.MaxInt64-nowMs {
		return 0, errInvalidExpire(name)
	}
	return ms, nil
}

// Nanoseconds per millisecond and per second.
const (
	nsPerMs  = int64(1e6)
	nsPerSec = int64(1e9)
)

// millisToNanos converts milliseconds (a duration or an instant) to
// nanoseconds, saturating: beyond about 292 years either way the result is
// the int64 bound, which the keyspace treats as "2262-04-11" in the future
// and as long gone in the past.
func millisToNanos(ms int64) int64 {
	switch {
	case ms > math.MaxInt64/nsPerMs:
		return math.MaxInt64
	case ms < math.MinInt64/nsPerMs:
		return math.MinInt64
	}
	return ms * nsPerMs
}

// nowMillis is the server's clock in milliseconds, Redis's basetime for a
// relative expiry's overflow check.
func (c *client) nowMillis() int64 { return c.srv.cfg.Clock() / 1e6 }

func plainOp(kind keyspace.OpKind, key []byte) keyspace.Op {
	return keyspace.Op{Kind: kind, Key: key}
}

func prepareGet(c *client, args [][]byte) (keyspace.Op, error) {
	return plainOp(keyspace.Get, args[1]), nil
}

// writeValue answers GET and SET ... GET: the value, or null.
func writeValue(c *client, op *keyspace.Op) {
	if op.Reply.Null {
		c.out.null()
		return
	}
	c.out.bulk(op.Reply.Bytes)
}

// prepareSet parses SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]
// as Redis 7.0 does: the options first (an option may repeat, the last
// expiry given wins; NX with XX, or two kinds of expiry, or KEEPTTL with
// one, is a syntax error), then the expiry's value.
func prepareSet(c *client, args [][]byte) (keyspace.Op, error) {
	op := plainOp(keyspace.Set, args[1])
	op.Args.Value = args[2]
	f := &op.Args.Flags
	var unit expiryUnit
	var expiry []byte
	for i := 3; i < len(args); i++ {
		a := args[i]
		u := setExpiryOption(a)
		switch {
		case equalFold(a, "nx") && *f&keyspace.SetXX == 0:
			*f |= keyspace.SetNX
		case equalFold(a, "xx") && *f&keyspace.SetNX == 0:
			*f |= keyspace.SetXX
		case equalFold(a, "get"):
			*f |= keyspace.SetGet
		case equalFold(a, "keepttl") && unit == 0:
			*f |= keyspace.SetKeepTTL
		case u != 0 && (unit == 0 || unit == u) && *f&keyspace.SetKeepTTL == 0 && i+1 < len(args):
			unit, expiry = u, args[i+1]
			i++
		default:
			return op, errSyntax
		}
	}
	if expiry == nil {
		return op, nil
	}
	ms, err := setExpiryMillis(expiry, unit, c.nowMillis(), "set")
	if err != nil {
		return op, err
	}
	op.Args.N = millisToNanos(ms)
	*f |= keyspace.SetExpiry
	if unit.absolute() {
		*f |= keyspace.ExpireAbsolute
	}
	return op, nil
}

// setExpiryOption returns the unit SET's option a gives its expiry, or 0 if
// a is not EX, PX, EXAT or PXAT.
func setExpiryOption(a []byte) expiryUnit {
	switch {
	case equalFold(a, "ex"):
		return unitSeconds
	case equalFold(a, "px"):
		return unitMillis
	case equalFold(a, "exat"):
		return unitAtSeconds
	case equalFold(a, "pxat"):
		return unitAtMillis
	}
	return 0
}

func writeSet(c *client, op *keyspace.Op) {
	if op.Args.Flags&keyspace.SetGet != 0 {
		writeValue(c, op)
		return
	}
	if op.Reply.Null {
		c.out.null()
		return
	}
	c.out.ok()
}

// prepareSetEx parses SETEX key seconds value and PSETEX key ms value,
// whose expiry Redis reads as SET's EX and PX.
func prepareSetEx(millis bool, name string) func(c *client, args [][]byte) (keyspace.Op, error) {
	unit := unitSeconds
	if millis {
		unit = unitMillis
	}
	return func(c *client, args [][]byte) (keyspace.Op, error) {
		op := plainOp(keyspace.Set, args[1])
		ms, err := setExpiryMillis(args[2], unit, c.nowMillis(), name)
		if err != nil {
			return op, err
		}
		op.Args = keyspace.PlainArgs{Value: args[3], N: millisToNanos(ms), Flags: keyspace.SetExpiry}
		return op, nil
	}
}

// prepareIncr parses INCR, DECR, INCRBY and DECRBY: sign is +1 or −1, and
// fixed the delta of INCR and DECR (0 for the BY forms).
func prepareIncr(sign, fixed int64) func(c *client, args [][]byte) (keyspace.Op, error) {
	return func(c *client, args [][]byte) (keyspace.Op, error) {
		op := plainOp(keyspace.IncrBy, args[1])
		delta := fixed
		if fixed == 0 {
			n, ok := parseInt(args[2])
			if !ok {
				return op, errNotInteger
			}
			if sign < 0 && n == math.MinInt64 {
				return op, errDecrOverRun
			}
			delta = n
		}
		op.Args.N = sign * delta
		return op, nil
	}
}

func writeInt(c *client, op *keyspace.Op) { c.out.integer(op.Reply.Int) }

// prepareExpire parses EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT: key time
// [NX|XX|GT|LT], as Redis 7.0 does: the options first, then the time.
func prepareExpire(millis, absolute bool, name string) func(c *client, args [][]byte) (keyspace.Op, error) {
	unit := unitSeconds
	switch {
	case millis && absolute:
		unit = unitAtMillis
	case millis:
		unit = unitMillis
	case absolute:
		unit = unitAtSeconds
	}
	return func(c *client, args [][]byte) (keyspace.Op, error) {
		op := plainOp(keyspace.Expire, args[1])
		f := &op.Args.Flags
		for _, a := range args[3:] {
			switch {
			case equalFold(a, "nx"):
				*f |= keyspace.ExpireNX
			case equalFold(a, "xx"):
				*f |= keyspace.ExpireXX
			case equalFold(a, "gt"):
				*f |= keyspace.ExpireGT
			case equalFold(a, "lt"):
				*f |= keyspace.ExpireLT
			default:
				return op, fmt.Errorf("Unsupported option %s", a)
			}
		}
		if *f&keyspace.ExpireNX != 0 && *f&(keyspace.ExpireXX|keyspace.ExpireGT|keyspace.ExpireLT) != 0 {
			return op, errExpireNXXX
		}
		if *f&keyspace.ExpireGT != 0 && *f&keyspace.ExpireLT != 0 {
			return op, errExpireGTLT
		}
		ms, err := expireMillis(args[2], unit, c.nowMillis(), name)
		if err != nil {
			return op, err
		}
		// A relative time stays relative: the shard adds it to its
		// clock, so the TTL is exactly the duration asked for.
		op.Args.N = millisToNanos(ms)
		if absolute {
			*f |= keyspace.ExpireAbsolute
		}
		return op, nil
	}
}

func prepareKeyOnly(kind keyspace.OpKind) func(c *client, args [][]byte) (keyspace.Op, error) {
	return func(c *client, args [][]byte) (keyspace.Op, error) {
		return plainOp(kind, args[1]), nil
	}
}

// writeTTL answers TTL (whole seconds, rounded to nearest as Redis does) or
// PTTL (milliseconds): −2 for a missing key, −1 for one without a TTL.
func writeTTL(millis bool) func(c *client, op *keyspace.Op) {
	return func(c *client, op *keyspace.Op) {
		ns := op.Reply.Int
		if ns < 0 {
			c.out.integer(ns)
			return
		}
		ms := ceilMillis(ns)
		if millis {
			c.out.integer(ms)
		} else {
			c.out.integer((ms + 500) / 1000)
		}
	}
}

func writeType(c *client, op *keyspace.Op) {
	if op.Reply.Int == 1 {
		c.out.simple("string")
	} else {
		c.out.simple("none")
	}
}

// cmdDel handles DEL and UNLINK key [key ...], and cmdExists EXISTS key
// [key ...]: every key is handled in one atomic step, across shards too.
func cmdDel(c *client, args [][]byte) error    { return multiKey(c, keyspace.Del, args[1:]) }
func cmdExists(c *client, args [][]byte) error { return multiKey(c, keyspace.Exists, args[1:]) }

func multiKey(c *client, kind keyspace.OpKind, keys [][]byte) error {
	ops := c.groupOps[:0]
	for _, k := range keys {
		ops = append(ops, plainOp(kind, k))
	}
	c.atomic(ops)
	var n int64
	for i := range ops {
		if ops[i].Err != nil {
			return ops[i].Err
		}
		n += ops[i].Reply.Int
	}
	c.out.integer(n)
	clear(ops)
	c.groupOps = ops[:0]
	return nil
}

// cmdFlushAll handles FLUSHALL and FLUSHDB [ASYNC|SYNC]: every plain key
// and all limiter state are dropped (rules stay).
func cmdFlushAll(c *client, args [][]byte) error {
	if len(args) > 2 || (len(args) == 2 && !equalFold(args[1], "async") && !equalFold(args[1], "sync")) {
		return errSyntax
	}
	c.flushAll()
	c.out.ok()
	return nil
}
