package keyspace

import (
	"errors"
	"fmt"
)

// Errors of keyspace operations. They describe what the keyspace refused;
// the protocol layer chooses how to word them to a client.
var (
	// ErrKeyLimit is the error of an operation that would create a key in a
	// shard already holding its share of Config.MaxKeys, under the reject
	// policy.
	ErrKeyLimit = errors.New("max keys reached: the key limit (--maxkeys) is full and --maxkeys-policy is reject")
	// ErrWrongKind is the error of an operation on a plain key whose value
	// is not of the kind it needs (CL.THROTTLE on a value that is not a
	// theoretical arrival time).
	ErrWrongKind = errors.New("operation against a key holding the wrong kind of value")
	// ErrShardFailed is the error of an operation on a key whose shard has
	// failed (see Map.Failed): its state can no longer be trusted, so the
	// shard answers nothing until the process restarts.
	ErrShardFailed = errors.New("the shard holding this key failed after an internal error; the server is shutting down")
	// ErrTooLarge is wrapped by every *TooLargeError.
	ErrTooLarge = errors.New("too large")
)

// TooLargeError is the error of a write that would store a key or a value
// larger than Config allows (MaxKeySize, MaxValueSize), so that nothing is
// ever held that a snapshot could not save.
type TooLargeError struct {
	What  string // "key" or "value"
	Size  int    // bytes
	Limit int    // bytes
}

// Error says what was too large, by how much, and which flag sets the limit.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s of %d bytes exceeds the %d-byte limit (--max-%s-size)", e.What, e.Size, e.Limit, e.What)
}

// Unwrap makes errors.Is(err, ErrTooLarge) hold.
func (e *TooLargeError) Unwrap() error { return ErrTooLarge }

// Errors of plain-key operations, in the words Redis uses for them.
var (
	ErrNotInteger = plainError("value is not an integer or out of range")
	ErrOverflow   = plainError("increment or decrement would overflow")
)

type plainError string

// Error returns the error's text.
func (e plainError) Error() string { return string(e) }
