package commands

import (
	"github.com/rlserver/rlserver/internal/service"
	"github.com/rlserver/rlserver/internal/values"
)

// The data types beside strings (internal/values) as plain keys hold them:
// lookups that tell a missing key from one of another type, the limits a
// growing value is checked against, and the rule that an emptied value
// deletes its key.

// lookupValue returns key's value as a T: (nil, false, nil) for a missing
// key, errWrongType for a value of another type.
func lookupValue[T service.Value](db *service.DB, key []byte) (T, bool, error) {
	var zero T
	v := db.Get(key)
	if v == nil {
		return zero, false, nil
	}
	t, ok := v.(T)
	if !ok {
		return zero, false, errWrongType
	}
	return t, true, nil
}

// valueLimits returns the bounds a value is checked against before it
// grows: --max-elements and --max-value-size.
func valueLimits(db *service.DB) values.Limits {
	elems, size := db.ValueLimits()
	return values.Limits{MaxElements: elems, MaxSize: size}
}

// execCount answers the element count of the T at key (HLEN, LLEN,
// ZCARD): 0 for a missing key, WRONGTYPE for another type.
func execCount[T service.Value](x *keyed, db *service.DB, count func(T) int) error {
	v, ok, err := lookupValue[T](db, x.args[1])
	if err != nil {
		return err
	}
	n := 0
	if ok {
		n = count(v)
	}
	x.out.Integer(int64(n))
	return nil
}

// execRemove removes the members named by the arguments after the key
// from the T at key (HDEL, ZREM), answers how many it removed, and deletes
// the key once it is empty, as Redis does.
func execRemove[T service.Value](x *keyed, db *service.DB, remove func(T, ...[]byte) int, count func(T) int) error {
	v, ok, err := lookupValue[T](db, x.args[1])
	switch {
	case err != nil:
		return err
	case !ok:
		x.out.Integer(0)
		return nil
	}
	n := remove(v, x.args[2:]...)
	if n > 0 {
		if err := store(db, x.args[1], v, true, count(v)); err != nil {
			return err
		}
	}
	x.out.Integer(int64(n))
	return nil
}

// store records key's value v after an operation left it holding n
// elements: v changed in place when the key existed, or a new value. An
// emptied value deletes the key, as Redis never keeps an empty hash, list
// or sorted set (a new empty one is simply not stored). A change in place
// was checked against valueLimits before it was made, so it is recorded
// without a second check, which could only refuse it after the fact; a new
// value is stored with Put, which may refuse a new key (--maxkeys).
func store(db *service.DB, key []byte, v service.Value, existed bool, n int) error {
	switch {
	case n == 0:
		if existed {
			db.Delete(key)
		}
		return nil
	case existed:
		db.Changed(key)
		return nil
	}
	return db.Put(key, v)
}
