package values

import (
	"errors"
	"fmt"
)

// Errors of the operations, in the words Redis 7.0 uses for them. Like the
// keyspace's errors they carry no "ERR " prefix: the protocol layer adds it
// (every one of these is an ERR reply in Redis).
var (
	// ErrSyntax is the error of score/member or field/value arguments that do
	// not come in pairs (Redis's reply to ZADD with an odd count). Callers
	// check arity first where Redis answers an arity error instead (HSET).
	ErrSyntax = valueError("syntax error")
	// ErrNotFloat is the error of a score or increment that is not a number
	// as Redis parses one (ZADD, ZINCRBY, HINCRBYFLOAT's increment).
	ErrNotFloat = valueError("value is not a valid float")
	// ErrBoundNotFloat is the error of a score range bound that does not
	// parse (ZCOUNT, ZRANGEBYSCORE, ZREMRANGEBYSCORE).
	ErrBoundNotFloat = valueError("min or max is not a float")
	// ErrHashValueNotInteger is HINCRBY's error when the field holds text
	// that is not a 64-bit integer in canonical form.
	ErrHashValueNotInteger = valueError("hash value is not an integer")
	// ErrHashValueNotFloat is HINCRBYFLOAT's error when the field holds text
	// that is not a number.
	ErrHashValueNotFloat = valueError("hash value is not a float")
	// ErrOverflow is HINCRBY's error when the sum leaves the int64 range.
	ErrOverflow = valueError("increment or decrement would overflow")
	// ErrIncrementNaNOrInf is HINCRBYFLOAT's error for an infinite
	// increment.
	ErrIncrementNaNOrInf = valueError("value is NaN or Infinity")
	// ErrResultNaNOrInf is the error of a float increment whose result
	// would be infinite (HINCRBYFLOAT, INCRBYFLOAT).
	ErrResultNaNOrInf = valueError("increment would produce NaN or Infinity")
	// ErrXXAndNX, ErrGTLTNX and ErrIncrPair are ZADD's option conflicts.
	ErrXXAndNX  = valueError("XX and NX options at the same time are not compatible")
	ErrGTLTNX   = valueError("GT, LT, and/or NX options at the same time are not compatible")
	ErrIncrPair = valueError("INCR option supports a single increment-element pair")
	// ErrScoreNaN is the error of a ZADD INCR or ZINCRBY whose result is not
	// a number (+inf plus -inf).
	ErrScoreNaN = valueError("resulting score is not a number (NaN)")
	// ErrIndexOutOfRange is LSET's error for an index outside the list.
	ErrIndexOutOfRange = valueError("index out of range")
)

// ErrLimit is wrapped by every *LimitError.
var ErrLimit = errors.New("per-key limit")

// ErrCorrupt is wrapped by every error of a decoder: the bytes are not an
// encoding AppendBinary writes.
var ErrCorrupt = errors.New("corrupt value encoding")

// valueError is an error whose text is Redis's reply without "ERR ".
type valueError string

// Error returns the error's text.
func (e valueError) Error() string { return string(e) }

// LimitError is the error of an operation refused because the value would
// then hold more than its Limits allow. The value is unchanged.
type LimitError struct {
	Type  string // "hash", "list" or "sorted set"
	What  string // "elements" or "bytes" (Size)
	Size  int    // what the value would hold
	Limit int
}

// Error says which bound the operation would cross and by how much.
func (e *LimitError) Error() string {
	if e.What == "bytes" {
		return fmt.Sprintf("%s of %d bytes exceeds the %d-byte limit (--max-value-size)", e.Type, e.Size, e.Limit)
	}
	return fmt.Sprintf("%s of %d elements exceeds the %d-element limit per key", e.Type, e.Size, e.Limit)
}

// Unwrap makes errors.Is(err, ErrLimit) hold.
func (e *LimitError) Unwrap() error { return ErrLimit }

// corrupt returns an ErrCorrupt error saying what is wrong.
func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}
