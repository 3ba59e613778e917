package commands

import (
	"math"

	"github.com/rlserver/rlserver/internal/service"
	"github.com/rlserver/rlserver/internal/values"
)

// The list commands, over values.List, with Redis 7.0's semantics and
// words. Blocking pops (BLPOP...) are not offered: a shard never waits.

var (
	errNotPositive  = replyError("ERR value is out of range, must be positive")
	listPushCommand = "Prepend elements to a list, creating it; returns its length."
)

// listCommands returns the list commands.
func listCommands() []*command {
	return []*command{
		&command{name: "lpush", arity: -3, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysReadWriteIns,
			group: groupList, since: "1.0.0", summary: listPushCommand, exec: execPush(true, false)},
		&command{name: "rpush", arity: -3, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysReadWriteIns,
			group: groupList, since: "1.0.0",
			summary: "Append elements to a list, creating it; returns its length.", exec: execPush(false, false)},
		&command{name: "lpushx", arity: -3, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysReadWriteIns,
			group: groupList, since: "2.2.0",
			summary: "LPUSH, only onto an existing list.", exec: execPush(true, true)},
		&command{name: "rpushx", arity: -3, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysReadWriteIns,
			group: groupList, since: "2.2.0",
			summary: "RPUSH, only onto an existing list.", exec: execPush(false, true)},
		&command{name: "lpop", arity: -2, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysAccessDelete,
			group: groupList, since: "1.0.0",
			summary: "Remove and return the first element, or the first count.", exec: execPop(true), valueReply: always},
		&command{name: "rpop", arity: -2, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysAccessDelete,
			group: groupList, since: "1.0.0",
			summary: "Remove and return the last element, or the last count.", exec: execPop(false), valueReply: always},
		&command{name: "lindex", arity: 3, flags: flagReadonly, keys: oneKey, keyFlags: keysRead,
			group: groupList, since: "1.0.0",
			summary: "The element at an index (negative: from the end).", exec: execLIndex, valueReply: always},
		&command{name: "lrange", arity: 4, flags: flagReadonly, keys: oneKey, keyFlags: keysRead,
			group: groupList, since: "1.0.0",
			summary: "The elements from start to stop, inclusive.", exec: execLRange, valueReply: always},
		&command{name: "ltrim", arity: 4, flags: flagWrite, keys: oneKey, keyFlags: keysDelete,
			group: groupList, since: "1.0.0",
			summary: "Keep only the elements from start to stop, inclusive.", exec: execLTrim},
		&command{name: "llen", arity: 2, flags: flagReadonly | flagFast, keys: oneKey, keyFlags: keysReadNoData,
			group: groupList, since: "1.0.0",
			summary: "The length of a list.", exec: execLLen},
		&command{name: "lrem", arity: 4, flags: flagWrite, keys: oneKey, keyFlags: keysDelete,
			group: groupList, since: "1.0.0",
			summary: "Remove count occurrences of an element (from the tail when negative, all when 0).",
			exec:    execLRem},
		&command{name: "lset", arity: 4, flags: flagWrite, keys: oneKey, keyFlags: keysUpdate,
			group: groupList, since: "1.0.0",
			summary: "Set the element at an index.", exec: execLSet},
	}
}

// execPush runs LPUSH and RPUSH key element [element ...] (left for
// LPUSH) and, with existing, LPUSHX and RPUSHX, which push only onto a
// list that exists.
func execPush(left, existing bool) func(x *keyed, db *service.DB) error {
	return func(x *keyed, db *service.DB) error {
		l, ok, err := lookupValue[*values.List](db, x.args[1])
		switch {
		case err != nil:
			return err
		case !ok && existing:
			x.out.Integer(0)
			return nil
		case !ok:
			l = values.NewList()
		}
		lim := valueLimits(db)
		var n int
		if left {
			n, err = l.PushLeft(lim, x.args[2:]...)
		} else {
			n, err = l.PushRight(lim, x.args[2:]...)
		}
		if err != nil {
			return err
		}
		if err := store(db, x.args[1], l, ok, l.Len()); err != nil {
			return err
		}
		x.out.Integer(int64(n))
		return nil
	}
}

// execPop runs LPOP and RPOP key [count]: one element (null for a missing
// key), or with a count an array of up to count (a null array for a
// missing key). Each element is written before the next pop can reuse its
// slot.
func execPop(left bool) func(x *keyed, db *service.DB) error {
	return func(x *keyed, db *service.DB) error {
		if len(x.args) > 3 {
			return errArity(x.cmd.name)
		}
		count, withCount := int64(1), len(x.args) == 3
		if withCount {
			n, ok := parseInt(x.args[2])
			if !ok || n < 0 {
				return errNotPositive
			}
			count = n
		}
		l, ok, err := lookupValue[*values.List](db, x.args[1])
		switch {
		case err != nil:
			return err
		case !ok && withCount:
			x.out.NullArray()
			return nil
		case !ok:
			x.out.Null()
			return nil
		}
		n := int(min(count, int64(l.Len())))
		if withCount {
			x.out.Array(n)
		}
		for range n {
			var v []byte
			if left {
				v, _ = l.PopLeft()
			} else {
				v, _ = l.PopRight()
			}
			x.out.Bulk(v)
		}
		if n > 0 {
			store(db, x.args[1], l, true, l.Len()) // a change in place: never refused
		}
		return nil
	}
}

// parseIndex reads a list index or range bound: any 64-bit integer.
func parseIndex(b []byte) (int, error) {
	n, ok := parseInt(b)
	if !ok {
		return 0, errNotInteger
	}
	return int(n), nil
}

// execLIndex runs LINDEX key index; as in Redis, the key is looked up
// before the index is read (a missing key is null whatever the index).
func execLIndex(x *keyed, db *service.DB) error {
	l, ok, err := lookupValue[*values.List](db, x.args[1])
	switch {
	case err != nil:
		return err
	case !ok:
		x.out.Null()
		return nil
	}
	i, err := parseIndex(x.args[2])
	if err != nil {
		return err
	}
	if v, found := l.Index(i); found {
		x.out.Bulk(v)
		return nil
	}
	x.out.Null()
	return nil
}

func execLRange(x *keyed, db *service.DB) error {
	start, err := parseIndex(x.args[2])
	if err != nil {
		return err
	}
	stop, err := parseIndex(x.args[3])
	if err != nil {
		return err
	}
	l, ok, err := lookupValue[*values.List](db, x.args[1])
	if err != nil {
		return err
	}
	if !ok {
		x.out.Array(0)
		return nil
	}
	lo, hi := values.IndexRange(start, stop, l.Len())
	x.out.Array(hi - lo)
	for i := lo; i < hi; i++ {
		v, _ := l.Index(i)
		x.out.Bulk(v)
	}
	return nil
}

func execLTrim(x *keyed, db *service.DB) error {
	start, err := parseIndex(x.args[2])
	if err != nil {
		return err
	}
	stop, err := parseIndex(x.args[3])
	if err != nil {
		return err
	}
	l, ok, err := lookupValue[*values.List](db, x.args[1])
	if err != nil {
		return err
	}
	if ok && l.Trim(start, stop) > 0 {
		if err := store(db, x.args[1], l, true, l.Len()); err != nil {
			return err
		}
	}
	x.out.OK()
	return nil
}

func execLLen(x *keyed, db *service.DB) error { return execCount(x, db, (*values.List).Len) }

func execLRem(x *keyed, db *service.DB) error {
	count, err := parseIndex(x.args[2])
	if err != nil {
		return err
	}
	if count == math.MinInt {
		// Its negation overflows; Redis then removes every match from
		// the tail, as the largest count from the tail does.
		count = -math.MaxInt
	}
	l, ok, err := lookupValue[*values.List](db, x.args[1])
	switch {
	case err != nil:
		return err
	case !ok:
		x.out.Integer(0)
		return nil
	}
	n := l.Rem(count, x.args[3])
	if n > 0 {
		if err := store(db, x.args[1], l, true, l.Len()); err != nil {
			return err
		}
	}
	x.out.Integer(int64(n))
	return nil
}

// execLSet runs LSET key index element; as in Redis, the key is looked up
// before the index is read.
func execLSet(x *keyed, db *service.DB) error {
	l, ok, err := lookupValue[*values.List](db, x.args[1])
	switch {
	case err != nil:
		return err
	case !ok:
		return errNoSuchKey
	}
	i, err := parseIndex(x.args[2])
	if err != nil {
		return err
	}
	if err := l.Set(valueLimits(db), i, x.args[3]); err != nil {
		return err
	}
	if err := store(db, x.args[1], l, true, l.Len()); err != nil {
		return err
	}
	x.out.OK()
	return nil
}
