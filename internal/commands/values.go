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
