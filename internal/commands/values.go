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

// storeOrDelete records a change made in place to key's value v, or a new
// value, which now holds n elements: an emptied value deletes the key, as
// Redis never keeps an empty hash, list or sorted set; any other is stored
// (again), so its size is checked and the change counted.
func storeOrDelete(db *service.DB, key []byte, v service.Value, n int) error {
	if n == 0 {
		db.Delete(key)
		return nil
	}
	return db.Put(key, v)
}
