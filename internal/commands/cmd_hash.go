package commands

import (
	"github.com/rlserver/rlserver/internal/service"
	"github.com/rlserver/rlserver/internal/values"
)

// The hash commands, over values.Hash, with Redis 7.0's semantics and
// words. Each runs on the shard owning its key (or the transaction's DB).

var (
	keysDelete       = []string{"RW", "delete"}
	keysAccessDelete = []string{"RW", "access", "delete"}
)

// hashCommands returns the hash commands.
func hashCommands() []*command {
	return []*command{
		&command{name: "hset", arity: -4, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysUpdate,
			group: groupHash, since: "2.0.0",
			summary: "Set hash fields: HSET key field value [field value ...]; returns how many were new.",
			exec:    execHSet(false)},
		&command{name: "hmset", arity: -4, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysUpdate,
			group: groupHash, since: "2.0.0",
			summary: "HSET, replying OK.", exec: execHSet(true)},
		&command{name: "hsetnx", arity: 4, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysReadWriteIns,
			group: groupHash, since: "2.0.0",
			summary: "Set a hash field only if it does not exist; returns 1 if set.", exec: execHSetNX},
		&command{name: "hget", arity: 3, flags: flagReadonly | flagFast, keys: oneKey, keyFlags: keysRead,
			group: groupHash, since: "2.0.0",
			summary: "A hash field's value.", exec: execHGet, valueReply: always},
		&command{name: "hmget", arity: -3, flags: flagReadonly | flagFast, keys: oneKey, keyFlags: keysRead,
			group: groupHash, since: "2.0.0",
			summary: "The values of the hash fields given.", exec: execHMGet, valueReply: always},
		&command{name: "hincrby", arity: 4, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysReadWrite,
			group: groupHash, since: "2.0.0",
			summary: "Add an integer to a hash field.", exec: execHIncrBy},
		&command{name: "hincrbyfloat", arity: 4, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysReadWrite,
			group: groupHash, since: "2.6.0",
			summary: "Add a floating-point increment to a hash field, in Redis's long double arithmetic.",
			exec:    execHIncrByFloat},
		&command{name: "hdel", arity: -3, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysDelete,
			group: groupHash, since: "2.0.0",
			summary: "Delete hash fields; returns how many existed.", exec: execHDel},
		&command{name: "hexists", arity: 3, flags: flagReadonly | flagFast, keys: oneKey, keyFlags: keysReadNoData,
			group: groupHash, since: "2.0.0",
			summary: "Whether a hash field exists.", exec: execHExists},
		&command{name: "hlen", arity: 2, flags: flagReadonly | flagFast, keys: oneKey, keyFlags: keysReadNoData,
			group: groupHash, since: "2.0.0",
			summary: "The number of fields in a hash.", exec: execHLen},
		&command{name: "hstrlen", arity: 3, flags: flagReadonly | flagFast, keys: oneKey, keyFlags: keysReadNoData,
			group: groupHash, since: "3.2.0",
			summary: "The length of a hash field's value.", exec: execHStrlen},
		&command{name: "hgetall", arity: 2, flags: flagReadonly, keys: oneKey, keyFlags: keysRead,
			group: groupHash, since: "2.0.0",
			summary: "Every field and value of a hash, in the order fields were first added.",
			exec:    execHGetAll(true, true), valueReply: always},
		&command{name: "hkeys", arity: 2, flags: flagReadonly, keys: oneKey, keyFlags: keysRead,
			group: groupHash, since: "2.0.0",
			summary: "Every field of a hash.", exec: execHGetAll(true, false), valueReply: always},
		&command{name: "hvals", arity: 2, flags: flagReadonly, keys: oneKey, keyFlags: keysRead,
			group: groupHash, since: "2.0.0",
			summary: "Every value of a hash.", exec: execHGetAll(false, true), valueReply: always},
	}
}

// hashForWrite returns key's hash, or a new one (not yet stored) if the key
// is missing, and whether the key existed.
func hashForWrite(db *service.DB, key []byte) (*values.Hash, bool, error) {
	h, ok, err := lookupValue[*values.Hash](db, key)
	if err == nil && !ok {
		h = values.NewHash()
	}
	return h, ok, err
}

// execHSet runs HSET key field value [field value ...] and, with ok, HMSET,
// which replies OK instead of the count of new fields.
func execHSet(ok bool) func(x *keyed, db *service.DB) error {
	return func(x *keyed, db *service.DB) error {
		if len(x.args)%2 != 0 {
			return errArity(x.cmd.name)
		}
		h, existed, err := hashForWrite(db, x.args[1])
		if err != nil {
			return err
		}
		added, err := h.Set(valueLimits(db), x.args[2:])
		if err != nil {
			return err
		}
		if err := store(db, x.args[1], h, existed, h.Len()); err != nil {
			return err
		}
		if ok {
			x.out.OK()
		} else {
			x.out.Integer(int64(added))
		}
		return nil
	}
}

func execHSetNX(x *keyed, db *service.DB) error {
	h, existed, err := hashForWrite(db, x.args[1])
	if err != nil {
		return err
	}
	set, err := h.SetNX(valueLimits(db), x.args[2], x.args[3])
	if err != nil {
		return err
	}
	if set {
		if err := store(db, x.args[1], h, existed, h.Len()); err != nil {
			return err
		}
	}
	x.out.Integer(int64(boolInt(set)))
	return nil
}

func execHGet(x *keyed, db *service.DB) error {
	h, _, err := lookupValue[*values.Hash](db, x.args[1])
	if err != nil {
		return err
	}
	writeField(x, h, x.args[2])
	return nil
}

// writeField writes h's field's value, or null when h (nil: a missing key)
// has no such field.
func writeField(x *keyed, h *values.Hash, field []byte) {
	if h != nil {
		if v, ok := h.Get(field); ok {
			x.out.Bulk(v)
			return
		}
	}
	x.out.Null()
}

func execHMGet(x *keyed, db *service.DB) error {
	h, _, err := lookupValue[*values.Hash](db, x.args[1])
	if err != nil {
		return err
	}
	x.out.Array(len(x.args) - 2)
	for _, f := range x.args[2:] {
		writeField(x, h, f)
	}
	return nil
}

func execHIncrBy(x *keyed, db *service.DB) error {
	incr, ok := parseInt(x.args[3])
	if !ok {
		return errNotInteger
	}
	h, existed, err := hashForWrite(db, x.args[1])
	if err != nil {
		return err
	}
	n, err := h.IncrBy(valueLimits(db), x.args[2], incr)
	if err != nil {
		return err
	}
	if err := store(db, x.args[1], h, existed, h.Len()); err != nil {
		return err
	}
	x.out.Integer(n)
	return nil
}

func execHIncrByFloat(x *keyed, db *service.DB) error {
	incr, err := values.ParseFloatIncrement(x.args[3])
	if err != nil {
		return err
	}
	h, existed, err := hashForWrite(db, x.args[1])
	if err != nil {
		return err
	}
	text, err := h.IncrByFloat(valueLimits(db), x.args[2], incr)
	if err != nil {
		return err
	}
	// Stored before the reply is written: a refusal is then the only reply.
	if err := store(db, x.args[1], h, existed, h.Len()); err != nil {
		return err
	}
	x.out.Bulk(text)
	return nil
}

func execHDel(x *keyed, db *service.DB) error {
	return execRemove(x, db, (*values.Hash).Del, (*values.Hash).Len)
}

func execHExists(x *keyed, db *service.DB) error {
	h, ok, err := lookupValue[*values.Hash](db, x.args[1])
	if err != nil {
		return err
	}
	x.out.Integer(int64(boolInt(ok && h.Exists(x.args[2]))))
	return nil
}

func execHLen(x *keyed, db *service.DB) error { return execCount(x, db, (*values.Hash).Len) }

func execHStrlen(x *keyed, db *service.DB) error {
	h, ok, err := lookupValue[*values.Hash](db, x.args[1])
	if err != nil {
		return err
	}
	n := 0
	if ok {
		v, _ := h.Get(x.args[2])
		n = len(v)
	}
	x.out.Integer(int64(n))
	return nil
}

// execHGetAll runs HGETALL (fields and values: a map in RESP3), HKEYS
// (fields) and HVALS (values).
func execHGetAll(fields, vals bool) func(x *keyed, db *service.DB) error {
	return func(x *keyed, db *service.DB) error {
		h, ok, err := lookupValue[*values.Hash](db, x.args[1])
		if err != nil {
			return err
		}
		n := 0
		if ok {
			n = h.Len()
		}
		if fields && vals {
			x.out.Map(n)
		} else {
			x.out.Array(n)
		}
		if n == 0 {
			return nil
		}
		for f, v := range h.All() {
			if fields {
				x.out.BulkString(f)
			}
			if vals {
				x.out.Bulk(v)
			}
		}
		return nil
	}
}
