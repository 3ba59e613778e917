package commands

import (
	"github.com/rlserver/rlserver/internal/service"
	"github.com/rlserver/rlserver/internal/values"
)

// The rest of Redis's string commands, and the generic key commands over
// every type (RENAME, TOUCH, EXPIRETIME), with Redis 7.0's semantics and
// words. Commands over several keys run holding the shards of all their
// keys (or on the transaction's DB), so each is one atomic step.

var (
	keysInsert       = []string{"OW", "insert"}
	keysReadWriteIns = []string{"RW", "insert"}
	keysReadDelete   = []string{"RW", "access", "delete"}
	// keysRenameAll are RENAME's flags over both keys, for the one
	// specification Redis's legacy triple stands for; keySpecs gives
	// each key its own.
	keysRenameAll = []string{"RW", "OW", "access", "update", "insert", "delete"}
	everyOtherKey = keyRange{1, -1, 2}
	twoKeys       = keyRange{1, 2, 1}
	secondKey     = keyRange{2, 2, 1}
	renameSpecs   = []keySpec{{oneKey, keysReadDelete}, {secondKey, keysOverwrite}}
	renameNXSpecs = []keySpec{{oneKey, keysReadDelete}, {secondKey, keysInsert}}

	errNoSuchKey   = replyError("ERR no such key")
	errNotFloat    = replyError("ERR value is not a valid float")
	errMSetArity   = errArity("mset")
	errMSetNXArity = errArity("msetnx")
)

// stringMoreCommands returns the string commands beyond GET, SET and the
// INCR family, and the generic commands that move or inspect any key.
func stringMoreCommands() []*command {
	return []*command{
		&command{name: "setnx", arity: 3, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysInsert,
			group: groupString, since: "1.0.0",
			summary: "Set a key's value only if the key does not exist; returns 1 if set.", exec: execSetNX},
		&command{name: "getset", arity: 3, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysReadWrite,
			group: groupString, since: "1.0.0",
			summary: "Set a string key's value and return the old one (SET key value GET).",
			exec:    execGetSet, valueReply: always},
		&command{name: "getdel", arity: 2, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysReadDelete,
			group: groupString, since: "6.2.0",
			summary: "Return a string key's value and delete the key.", exec: execGetDel, valueReply: always},
		&command{name: "getex", arity: -2, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysReadWrite,
			group: groupString, since: "6.2.0",
			summary: "Return a string key's value and change its TTL: [EX s|PX ms|EXAT s|PXAT ms|PERSIST].",
			exec:    execGetEx, valueReply: always},
		&command{name: "mget", arity: -2, flags: flagReadonly | flagFast, keys: everyKey, keyFlags: keysRead,
			group: groupString, since: "1.0.0",
			summary: "The values of the keys given (null for a missing key or one of another type).", exec: execMGet},
		&command{name: "mset", arity: -3, flags: flagWrite, keys: everyOtherKey, keyFlags: keysOverwrite,
			group: groupString, since: "1.0.1",
			summary: "Set several keys' values as one step.", exec: execMSet(false)},
		&command{name: "msetnx", arity: -3, flags: flagWrite, keys: everyOtherKey, keyFlags: keysInsert,
			group: groupString, since: "1.0.1",
			summary: "Set several keys' values as one step, only if none of them exists; returns 1 if set.",
			exec:    execMSet(true)},
		&command{name: "append", arity: 3, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysReadWriteIns,
			group: groupString, since: "2.0.0",
			summary: "Append to a string key's value; returns the new length.", exec: execAppend},
		&command{name: "strlen", arity: 2, flags: flagReadonly | flagFast, keys: oneKey, keyFlags: keysReadNoData,
			group: groupString, since: "2.2.0",
			summary: "The length of a string key's value (0 when missing).", exec: execStrlen},
		&command{name: "incrbyfloat", arity: 3, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysReadWrite,
			group: groupString, since: "2.6.0",
			summary: "Add a floating-point increment to a string key's number, in Redis's long double arithmetic.",
			exec:    execIncrByFloat},
		&command{name: "rename", arity: 3, flags: flagWrite, keys: twoKeys, keyFlags: keysRenameAll, keySpecs: renameSpecs,
			group: groupGeneric, since: "1.0.0",
			summary: "Rename a key, replacing the destination; its value and TTL move with it.", exec: execRename(false)},
		&command{name: "renamenx", arity: 3, flags: flagWrite | flagFast, keys: twoKeys, keyFlags: keysRenameAll,
			keySpecs: renameNXSpecs, group: groupGeneric, since: "1.0.0",
			summary: "Rename a key only if the destination does not exist; returns 1 if renamed.", exec: execRename(true)},
		&command{name: "touch", arity: -2, flags: flagReadonly | flagFast, keys: everyKey, keyFlags: keysReadNoData,
			group: groupGeneric, since: "3.2.1",
			summary: "Count the keys given that exist.", exec: execExists},
		&command{name: "expiretime", arity: 2, flags: flagReadonly | flagFast, keys: oneKey, keyFlags: keysRead,
			group: groupGeneric, since: "7.0.0",
			summary: "The unix time in seconds a key expires (-2 missing, -1 none).", exec: execExpireTime(false)},
		&command{name: "pexpiretime", arity: 2, flags: flagReadonly | flagFast, keys: oneKey, keyFlags: keysRead,
			group: groupGeneric, since: "7.0.0",
			summary: "The unix time in milliseconds a key expires (-2 missing, -1 none).", exec: execExpireTime(true)},
	}
}

func execSetNX(x *keyed, db *service.DB) error {
	if db.Get(x.args[1]) != nil {
		x.out.Integer(0)
		return nil
	}
	if err := db.CheckSize(len(x.args[2])); err != nil {
		return err
	}
	if err := db.SetString(x.args[1], x.args[2]); err != nil {
		return err
	}
	x.out.Integer(1)
	return nil
}

func execGetSet(x *keyed, db *service.DB) error {
	return set(x, db, x.args[1], x.args[2], setGet, 0)
}

func execGetDel(x *keyed, db *service.DB) error {
	b, ok, err := stringValue(db, x.args[1])
	switch {
	case err != nil:
		return err
	case !ok:
		x.out.Null()
		return nil
	}
	x.out.Bulk(b) // written before the key goes
	db.Delete(x.args[1])
	return nil
}

// execGetEx runs GETEX key [EX s|PX ms|EXAT s|PXAT ms|PERSIST], parsed as
// Redis 7.0 parses it: one expiry option at most, PERSIST alone; the
// expiry read as SET's, once the key is found to hold a string. An instant already past deletes the key, after its
// value is read.
func execGetEx(x *keyed, db *service.DB) error {
	var unit expiryUnit
	var word []byte
	persist := false
	for i := 2; i < len(x.args); i++ {
		a := x.args[i]
		u := setExpiryOption(a)
		switch {
		case equalFold(a, "persist") && unit == 0:
			persist = true
		case u != 0 && (unit == 0 || unit == u) && !persist && i+1 < len(x.args):
			unit, word = u, x.args[i+1]
			i++
		default:
			return errSyntax
		}
	}
	key := x.args[1]
	b, ok, err := stringValue(db, key)
	switch {
	case err != nil:
		return err
	case !ok:
		x.out.Null()
		return nil
	}
	// Redis validates the expiry only once it has found the string.
	at := int64(0)
	if word != nil {
		ms, err := setExpiryMillis(word, unit, nowMillis(db), "getex")
		if err != nil {
			return err
		}
		at = expiryAt(db, ms, unit)
	}
	x.out.Bulk(b)
	switch {
	case persist:
		db.SetExpiry(key, 0)
	case word != nil:
		db.SetExpiry(key, at) // an instant already past deletes the key
	}
	return nil
}

func execMGet(x *keyed, db *service.DB) error {
	keys := x.args[1:]
	x.out.Array(len(keys))
	for _, k := range keys {
		if s, ok := db.Get(k).(*service.String); ok {
			x.out.Bulk(s.B)
		} else {
			x.out.Null()
		}
	}
	return nil
}

// execMSet runs MSET key value [key value ...] and, with nx, MSETNX. Every
// value's size is checked before any is stored; each key set loses its
// TTL, as SET's does.
func execMSet(nx bool) func(x *keyed, db *service.DB) error {
	return func(x *keyed, db *service.DB) error {
		pairs := x.args[1:]
		if len(pairs)%2 != 0 {
			if nx {
				return errMSetNXArity
			}
			return errMSetArity
		}
		for i := 1; i < len(pairs); i += 2 {
			if err := db.CheckSize(len(pairs[i])); err != nil {
				return err
			}
		}
		if nx {
			for i := 0; i < len(pairs); i += 2 {
				if db.Get(pairs[i]) != nil {
					x.out.Integer(0)
					return nil
				}
			}
		}
		for i := 0; i < len(pairs); i += 2 {
			if err := db.SetString(pairs[i], pairs[i+1]); err != nil {
				return err
			}
			db.SetExpiry(pairs[i], 0)
		}
		if nx {
			x.out.Integer(1)
		} else {
			x.out.OK()
		}
		return nil
	}
}

func execAppend(x *keyed, db *service.DB) error {
	key, tail := x.args[1], x.args[2]
	s, ok, err := lookupValue[*service.String](db, key)
	switch {
	case err != nil:
		return err
	case !ok:
		if err := db.CheckSize(len(tail)); err != nil {
			return err
		}
		if err := db.SetString(key, tail); err != nil {
			return err
		}
		x.out.Integer(int64(len(tail)))
		return nil
	}
	if err := db.CheckSize(len(s.B) + len(tail)); err != nil {
		return err
	}
	// In place, so a key appended to repeatedly grows amortised.
	s.B = append(s.B, tail...)
	if err := db.Put(key, s); err != nil {
		return err
	}
	x.out.Integer(int64(len(s.B)))
	return nil
}

func execStrlen(x *keyed, db *service.DB) error {
	b, _, err := stringValue(db, x.args[1])
	if err != nil {
		return err
	}
	x.out.Integer(int64(len(b)))
	return nil
}

// execIncrByFloat runs INCRBYFLOAT key increment: the sum is computed in
// the long double arithmetic Redis uses and stored as Redis prints it
// (values.AppendLongDouble), keeping the key's TTL.
func execIncrByFloat(x *keyed, db *service.DB) error {
	key := x.args[1]
	old, exists, err := stringValue(db, key)
	if err != nil {
		return err // Redis checks the type, then the value, then the increment
	}
	var cur values.LongDouble
	ok := true
	if exists {
		if cur, ok = values.ParseLongDouble(old); !ok {
			return errNotFloat
		}
	}
	incr, ok := values.ParseLongDouble(x.args[2])
	if !ok {
		return errNotFloat
	}
	sum, ok := cur.Add(incr)
	if !ok {
		return values.ErrResultNaNOrInf
	}
	x.scratch = values.AppendLongDouble(x.scratch[:0], sum)
	if err := db.SetString(key, x.scratch); err != nil {
		return err
	}
	x.out.Bulk(x.scratch)
	return nil
}

// execRename runs RENAME src dst and, with nx, RENAMENX: the value and its
// TTL move to dst, replacing what dst held (RENAME) or only if dst does
// not exist (RENAMENX). dst is written before src is deleted, so a dst the
// key limit refuses leaves src as it was.
func execRename(nx bool) func(x *keyed, db *service.DB) error {
	return func(x *keyed, db *service.DB) error {
		src, dst := x.args[1], x.args[2]
		v := db.Get(src)
		if v == nil {
			return errNoSuchKey
		}
		if string(src) == string(dst) {
			if nx {
				x.out.Integer(0)
			} else {
				x.out.OK()
			}
			return nil
		}
		if nx && db.Get(dst) != nil {
			x.out.Integer(0)
			return nil
		}
		at, _ := db.Expiry(src)
		if err := db.Put(dst, v); err != nil {
			return err
		}
		db.SetExpiry(dst, at)
		db.Delete(src)
		if nx {
			x.out.Integer(1)
		} else {
			x.out.OK()
		}
		return nil
	}
}

// execExpireTime runs EXPIRETIME (unix seconds) and PEXPIRETIME (unix
// milliseconds): −2 for a missing key, −1 for one without an expiry.
func execExpireTime(millis bool) func(x *keyed, db *service.DB) error {
	return func(x *keyed, db *service.DB) error {
		at, ok := db.Expiry(x.args[1])
		switch {
		case !ok:
			x.out.Integer(-2)
		case at == 0:
			x.out.Integer(-1)
		case millis:
			x.out.Integer(at / nsPerMs)
		default:
			x.out.Integer(at / nsPerSec)
		}
		return nil
	}
}
