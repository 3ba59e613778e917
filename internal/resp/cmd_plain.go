package resp

import (
	"errors"
	"fmt"
	"math"

	"github.com/rlserver/rlserver/internal/shards"
)

// The Redis string commands behind the INCR/EXPIRE rate-limiting pattern,
// with Redis 7's semantics and error wording. They act on plain keys, a
// namespace separate from limiter state (see shards/plain.go).

// errInvalidExpire is Redis's reply to an expiry that is not positive (SET,
// SETEX) or does not fit (every command), naming the command.
func errInvalidExpire(cmd string) error {
	return fmt.Errorf("invalid expire time in '%s' command", cmd)
}

var (
	errExpireNXXX  = errors.New("NX and XX, GT or LT options at the same time are not compatible")
	errExpireGTLT  = errors.New("GT and LT options at the same time are not compatible")
	errDecrOverRun = errors.New("decrement would overflow")
)

// toNanos converts an amount of unit (1e9 for seconds, 1e6 for
// milliseconds) to nanoseconds, reporting whether it fits in an int64.
func toNanos(n, unit int64) (int64, bool) {
	if n > math.MaxInt64/unit || n < math.MinInt64/unit {
		return 0, false
	}
	return n * unit, true
}

func plainOp(kind shards.OpKind, key []byte) shards.Op {
	return shards.Op{Kind: kind, Key: key}
}

func prepareGet(c *client, args [][]byte) (shards.Op, error) {
	return plainOp(shards.Get, args[1]), nil
}

// writeValue answers GET and SET ... GET: the value, or null.
func writeValue(c *client, op *shards.Op) {
	if op.Reply.Null {
		c.out.null()
		return
	}
	c.out.bulk(op.Reply.Bytes)
}

// prepareSet parses SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL].
func prepareSet(c *client, args [][]byte) (shards.Op, error) {
	op := plainOp(shards.Set, args[1])
	op.Args.Value = args[2]
	f := &op.Args.Flags
	expirySet := false
	for i := 3; i < len(args); i++ {
		a := args[i]
		switch {
		case equalFold(a, "nx") && *f&shards.SetXX == 0:
			*f |= shards.SetNX
		case equalFold(a, "xx") && *f&shards.SetNX == 0:
			*f |= shards.SetXX
		case equalFold(a, "get"):
			*f |= shards.SetGet
		case equalFold(a, "keepttl") && !expirySet:
			*f |= shards.SetKeepTTL
			expirySet = true
		case (equalFold(a, "ex") || equalFold(a, "px") || equalFold(a, "exat") || equalFold(a, "pxat")) &&
			!expirySet && i+1 < len(args):
			n, ok := parseInt(args[i+1])
			if !ok {
				return op, errNotInteger
			}
			if n <= 0 {
				return op, errInvalidExpire("set")
			}
			unit := int64(1e9)
			if a[0] == 'p' || a[0] == 'P' {
				unit = 1e6
			}
			ns, ok := toNanos(n, unit)
			if !ok {
				return op, errInvalidExpire("set")
			}
			op.Args.N = ns
			*f |= shards.SetExpiry
			if len(a) == 4 {
				*f |= shards.ExpireAbsolute
			}
			expirySet = true
			i++
		default:
			return op, errSyntax
		}
	}
	return op, nil
}

func writeSet(c *client, op *shards.Op) {
	if op.Args.Flags&shards.SetGet != 0 {
		writeValue(c, op)
		return
	}
	if op.Reply.Null {
		c.out.null()
		return
	}
	c.out.ok()
}

// prepareSetEx parses SETEX key seconds value and PSETEX key ms value.
func prepareSetEx(unit int64, name string) func(c *client, args [][]byte) (shards.Op, error) {
	return func(c *client, args [][]byte) (shards.Op, error) {
		op := plainOp(shards.Set, args[1])
		n, ok := parseInt(args[2])
		if !ok {
			return op, errNotInteger
		}
		ns, fits := toNanos(n, unit)
		if n <= 0 || !fits {
			return op, errInvalidExpire(name)
		}
		op.Args = shards.PlainArgs{Value: args[3], N: ns, Flags: shards.SetExpiry}
		return op, nil
	}
}

// prepareIncr parses INCR, DECR, INCRBY and DECRBY: sign is +1 or −1, and
// fixed the delta of INCR and DECR (0 for the BY forms).
func prepareIncr(sign, fixed int64) func(c *client, args [][]byte) (shards.Op, error) {
	return func(c *client, args [][]byte) (shards.Op, error) {
		op := plainOp(shards.IncrBy, args[1])
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

func writeInt(c *client, op *shards.Op) { c.out.integer(op.Reply.Int) }

// prepareExpire parses EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT:
// key time [NX|XX|GT|LT].
func prepareExpire(unit int64, absolute bool, name string) func(c *client, args [][]byte) (shards.Op, error) {
	return func(c *client, args [][]byte) (shards.Op, error) {
		op := plainOp(shards.Expire, args[1])
		n, ok := parseInt(args[2])
		if !ok {
			return op, errNotInteger
		}
		ns, fits := toNanos(n, unit)
		if !fits {
			return op, errInvalidExpire(name)
		}
		op.Args.N = ns
		f := &op.Args.Flags
		if absolute {
			*f |= shards.ExpireAbsolute
		}
		for _, a := range args[3:] {
			switch {
			case equalFold(a, "nx"):
				*f |= shards.ExpireNX
			case equalFold(a, "xx"):
				*f |= shards.ExpireXX
			case equalFold(a, "gt"):
				*f |= shards.ExpireGT
			case equalFold(a, "lt"):
				*f |= shards.ExpireLT
			default:
				return op, fmt.Errorf("Unsupported option %s", a)
			}
		}
		if *f&shards.ExpireNX != 0 && *f&(shards.ExpireXX|shards.ExpireGT|shards.ExpireLT) != 0 {
			return op, errExpireNXXX
		}
		if *f&shards.ExpireGT != 0 && *f&shards.ExpireLT != 0 {
			return op, errExpireGTLT
		}
		return op, nil
	}
}

func prepareKeyOnly(kind shards.OpKind) func(c *client, args [][]byte) (shards.Op, error) {
	return func(c *client, args [][]byte) (shards.Op, error) {
		return plainOp(kind, args[1]), nil
	}
}

// writeTTL answers TTL (whole seconds, rounded to nearest as Redis does) or
// PTTL (milliseconds): −2 for a missing key, −1 for one without a TTL.
func writeTTL(millis bool) func(c *client, op *shards.Op) {
	return func(c *client, op *shards.Op) {
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

func writeType(c *client, op *shards.Op) {
	if op.Reply.Int == 1 {
		c.out.simple("string")
	} else {
		c.out.simple("none")
	}
}

// cmdDel handles DEL and UNLINK key [key ...], and cmdExists EXISTS key
// [key ...]: every key is handled in one atomic step, across shards too.
func cmdDel(c *client, args [][]byte) error    { return multiKey(c, shards.Del, args[1:]) }
func cmdExists(c *client, args [][]byte) error { return multiKey(c, shards.Exists, args[1:]) }

func multiKey(c *client, kind shards.OpKind, keys [][]byte) error {
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
	if len(args) == 2 && !equalFold(args[1], "async") && !equalFold(args[1], "sync") {
		return errSyntax
	}
	c.flushAll()
	c.out.ok()
	return nil
}
