package commands

import (
	"math"
	"strconv"

	"github.com/rlserver/rlserver/internal/service"
	"github.com/rlserver/rlserver/internal/values"
)

// The Redis string commands behind the INCR/EXPIRE rate-limiting pattern,
// with Redis 7's semantics and error wording. They act on plain keys, a
// namespace separate from limiter state (see keyspace/value.go), and run as
// keyed commands: on the goroutine that has exclusive use of the key's
// shard, through a service.DB.

// errInvalidExpire is Redis's reply to an expiry it refuses, naming the
// command: not positive (SET, SETEX, PSETEX), or beyond what a signed 64-bit
// count of milliseconds holds (every command).
func errInvalidExpire(cmd string) error {
	return errf("invalid expire time in '%s' command", cmd)
}

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

// nowMillis is the DB's instant in milliseconds, Redis's basetime for a
// relative expiry's overflow check.
func nowMillis(db *service.DB) int64 { return db.Now() / nsPerMs }

// expiryAt turns milliseconds as parsed (relative or absolute) into the
// instant the keyspace keeps, in ns, saturating.
func expiryAt(db *service.DB, ms int64, unit expiryUnit) int64 {
	ns := millisToNanos(ms)
	if unit.absolute() {
		return ns
	}
	if ns > math.MaxInt64-db.Now() {
		return math.MaxInt64
	}
	return db.Now() + ns
}

// stringValue returns key's value as bytes, nil for a missing key, or
// errWrongType for a value of another kind.
func stringValue(db *service.DB, key []byte) ([]byte, bool, error) {
	v := db.Get(key)
	if v == nil {
		return nil, false, nil
	}
	s, ok := v.(*service.String)
	if !ok {
		return nil, true, errWrongType
	}
	return s.B, true, nil
}

func execGet(x *keyed, db *service.DB) error {
	b, ok, err := stringValue(db, x.args[1])
	switch {
	case err != nil:
		return err
	case !ok:
		x.out.Null()
	default:
		x.out.Bulk(b)
	}
	return nil
}

// setFlags are SET's options.
type setFlags uint8

const (
	setNX setFlags = 1 << iota
	setXX
	setGet
	setKeepTTL
)

// parseSet parses SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]
// as Redis 7.0 does: the options first (an option may repeat, the last
// expiry given wins; NX with XX, or two kinds of expiry, or KEEPTTL with
// one, is a syntax error), then the expiry's value. It returns the flags
// and the expiry instant (0: none given).
func parseSet(args [][]byte, db *service.DB) (setFlags, int64, error) {
	var f setFlags
	var unit expiryUnit
	var expiry []byte
	for i := 3; i < len(args); i++ {
		a := args[i]
		u := setExpiryOption(a)
		switch {
		case equalFold(a, "nx") && f&setXX == 0:
			f |= setNX
		case equalFold(a, "xx") && f&setNX == 0:
			f |= setXX
		case equalFold(a, "get"):
			f |= setGet
		case equalFold(a, "keepttl") && unit == 0:
			f |= setKeepTTL
		case u != 0 && (unit == 0 || unit == u) && f&setKeepTTL == 0 && i+1 < len(args):
			unit, expiry = u, args[i+1]
			i++
		default:
			return 0, 0, errSyntax
		}
	}
	if expiry == nil {
		return f, 0, nil
	}
	ms, err := setExpiryMillis(expiry, unit, nowMillis(db), "set")
	if err != nil {
		return 0, 0, err
	}
	return f, expiryAt(db, ms, unit), nil
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

func execSet(x *keyed, db *service.DB) error {
	f, at, err := parseSet(x.args, db)
	if err != nil {
		return err
	}
	return set(x, db, x.args[1], x.args[2], f, at)
}

// set stores value under key as SET does with flags f and expiry instant at
// (0: none), and writes SET's reply: OK, or with GET the old value; null when
// NX or XX refused. A value too large for the keyspace changes nothing.
func set(x *keyed, db *service.DB, key, value []byte, f setFlags, at int64) error {
	if err := db.CheckSize(len(value)); err != nil {
		return err
	}
	old, exists, err := stringValue(db, key)
	if err != nil && f&setGet != 0 {
		return err // SET ... GET on another kind of value; without GET, SET replaces any kind
	}
	if f&setGet != 0 {
		// SetString reuses the value's bytes: keep the old ones for the reply.
		x.scratch = append(x.scratch[:0], old...)
	}
	if (f&setNX != 0 && exists) || (f&setXX != 0 && !exists) {
		writeOld(x, f, exists)
		return nil
	}
	keep := int64(0)
	if f&setKeepTTL != 0 && exists {
		keep, _ = db.Expiry(key)
	}
	switch {
	case at != 0 && at <= db.Now():
		// Already expired, as Redis treats SET ... EXAT <past>: the key
		// is gone.
		db.Delete(key)
	default:
		if err := db.SetString(key, value); err != nil {
			return err
		}
		if at == 0 {
			at = keep
		}
		db.SetExpiry(key, at)
	}
	if f&setGet != 0 {
		writeOld(x, f, exists)
		return nil
	}
	x.out.OK()
	return nil
}

// writeOld answers SET with GET (the old value, or null) or a SET that NX
// or XX refused (null).
func writeOld(x *keyed, f setFlags, exists bool) {
	if f&setGet != 0 && exists {
		x.out.Bulk(x.scratch)
		return
	}
	x.out.Null()
}

// execSetEx runs SETEX key seconds value and PSETEX key ms value, whose
// expiry Redis reads as SET's EX and PX.
func execSetEx(millis bool, name string) func(x *keyed, db *service.DB) error {
	unit := unitSeconds
	if millis {
		unit = unitMillis
	}
	return func(x *keyed, db *service.DB) error {
		ms, err := setExpiryMillis(x.args[2], unit, nowMillis(db), name)
		if err != nil {
			return err
		}
		return set(x, db, x.args[1], x.args[3], 0, expiryAt(db, ms, unit))
	}
}

// execIncr runs INCR, DECR, INCRBY and DECRBY: sign is +1 or −1, and fixed
// the delta of INCR and DECR (0 for the BY forms).
func execIncr(sign, fixed int64) func(x *keyed, db *service.DB) error {
	return func(x *keyed, db *service.DB) error {
		delta := fixed
		if fixed == 0 {
			n, ok := parseInt(x.args[2])
			if !ok {
				return errNotInteger
			}
			if sign < 0 && n == math.MinInt64 {
				return errDecrOverRun
			}
			delta = n
		}
		delta *= sign
		key := x.args[1]
		old, exists, err := stringValue(db, key)
		if err != nil {
			return err
		}
		var cur int64
		if exists {
			v, ok := parseInt(old)
			if !ok {
				return errNotInteger
			}
			cur = v
		}
		if (delta > 0 && cur > math.MaxInt64-delta) || (delta < 0 && cur < math.MinInt64-delta) {
			return errOverflow
		}
		x.scratch = strconv.AppendInt(x.scratch[:0], cur+delta, 10)
		if err := db.SetString(key, x.scratch); err != nil {
			return err
		}
		x.out.Integer(cur + delta)
		return nil
	}
}

// expireFlags are EXPIRE's conditions.
type expireFlags uint8

const (
	expireNX expireFlags = 1 << iota
	expireXX
	expireGT
	expireLT
)

// execExpire runs EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT: key time
// [NX|XX|GT|LT], parsed as Redis 7.0 does: the options first, then the time.
func execExpire(millis, absolute bool, name string) func(x *keyed, db *service.DB) error {
	unit := unitSeconds
	switch {
	case millis && absolute:
		unit = unitAtMillis
	case millis:
		unit = unitMillis
	case absolute:
		unit = unitAtSeconds
	}
	return func(x *keyed, db *service.DB) error {
		var f expireFlags
		for _, a := range x.args[3:] {
			switch {
			case equalFold(a, "nx"):
				f |= expireNX
			case equalFold(a, "xx"):
				f |= expireXX
			case equalFold(a, "gt"):
				f |= expireGT
			case equalFold(a, "lt"):
				f |= expireLT
			default:
				return errf("Unsupported option %s", a)
			}
		}
		if f&expireNX != 0 && f&(expireXX|expireGT|expireLT) != 0 {
			return errExpireNXXX
		}
		if f&expireGT != 0 && f&expireLT != 0 {
			return errExpireGTLT
		}
		ms, err := expireMillis(x.args[2], unit, nowMillis(db), name)
		if err != nil {
			return err
		}
		key := x.args[1]
		cur, ok := db.Expiry(key)
		at := expiryAt(db, ms, unit)
		switch {
		case !ok,
			f&expireNX != 0 && cur != 0,
			f&expireXX != 0 && cur == 0,
			f&expireGT != 0 && (cur == 0 || at <= cur),
			f&expireLT != 0 && cur != 0 && at >= cur:
			x.out.Integer(0) // no key, or the condition is not met
			return nil
		}
		if at <= db.Now() {
			db.Delete(key) // an instant in the past deletes the key
		} else {
			db.SetExpiry(key, at)
		}
		x.out.Integer(1)
		return nil
	}
}

// execTTL runs TTL (whole seconds, rounded to nearest as Redis does) or PTTL
// (milliseconds): −2 for a missing key, −1 for one without an expiry.
func execTTL(millis bool) func(x *keyed, db *service.DB) error {
	return func(x *keyed, db *service.DB) error {
		at, ok := db.Expiry(x.args[1])
		switch {
		case !ok:
			x.out.Integer(-2)
		case at == 0:
			x.out.Integer(-1)
		case millis:
			x.out.Integer(ceilMillis(at - db.Now()))
		default:
			x.out.Integer((ceilMillis(at-db.Now()) + 500) / 1000)
		}
		return nil
	}
}

func execPersist(x *keyed, db *service.DB) error {
	if at, ok := db.Expiry(x.args[1]); ok && at != 0 {
		db.SetExpiry(x.args[1], 0)
		x.out.Integer(1)
		return nil
	}
	x.out.Integer(0)
	return nil
}

func execType(x *keyed, db *service.DB) error {
	x.out.Simple(typeName(db.Get(x.args[1])))
	return nil
}

// typeName is TYPE's answer for a value (nil: a missing key).
func typeName(v service.Value) string {
	switch v.(type) {
	case nil:
		return "none"
	case *service.String:
		return "string"
	case *values.Hash:
		return "hash"
	case *values.List:
		return "list"
	case *values.ZSet:
		return "zset"
	}
	return "none"
}

// execDel runs DEL and UNLINK key [key ...], and execExists EXISTS key
// [key ...]: every key is handled in one atomic step, across shards too.
func execDel(x *keyed, db *service.DB) error {
	var n int64
	for _, k := range x.args[1:] {
		if db.Delete(k) {
			n++
		}
	}
	x.out.Integer(n)
	return nil
}

func execExists(x *keyed, db *service.DB) error {
	var n int64
	for _, k := range x.args[1:] {
		if db.Get(k) != nil {
			n++
		}
	}
	x.out.Integer(n)
	return nil
}

// cmdFlushAll handles FLUSHALL and FLUSHDB [ASYNC|SYNC]: every plain key
// and all limiter state are dropped (rules stay).
func cmdFlushAll(c *session, args [][]byte) error {
	if len(args) > 2 || (len(args) == 2 && !equalFold(args[1], "async") && !equalFold(args[1], "sync")) {
		return errSyntax
	}
	c.handle().Flush()
	c.out.OK()
	return nil
}

// always is valueReply for commands whose reply is a stored value (GET).
func always([][]byte) bool { return true }

// setWithGet is SET's valueReply: with GET, the reply is the old value.
func setWithGet(args [][]byte) bool {
	for _, a := range args[3:] {
		if equalFold(a, "get") {
			return true
		}
	}
	return false
}
