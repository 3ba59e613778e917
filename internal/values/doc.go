// Package values holds the Redis data types a plain key may hold besides a
// string: Hash, List and ZSet (sorted set), as plain data structures with
// the operations Redis's commands perform on them, their memory bounds and
// their snapshot encodings. It parses no commands and writes no replies;
// the command layer calls these operations and writes what they return.
//
// Semantics are Redis 7.0's, checked against redis-server 7.0.15: index
// clamping, LREM's count sign, ZADD's option rules, score parsing (C's
// strtod grammar) and printing ("%.17g"), HINCRBYFLOAT's long double
// arithmetic and its "%.17Lf" printing. Errors carry Redis's text without
// the "ERR " prefix, which the protocol layer adds.
//
// Ownership: a value belongs to the goroutine that owns its key (a shard
// of the keyspace) and is not safe for concurrent use. Byte slices a value
// returns alias its storage until its next change; strings are immutable.
//
// Sizes and limits: every type implements the keyspace's Value interface
// (Size, in bytes, O(1)): its elements' bytes plus a fixed per-element
// overhead measured from the Go heap (see limits.go and
// docs/datatypes.md). Operations that grow a value take Limits and check
// them before any change, so a refused operation changes nothing.
//
// Empty values: Redis deletes a key whose hash, list or sorted set becomes
// empty, and never stores an empty one. The operations leave that to the
// caller, which checks Len (or Card) after a removal, and does not store a
// new value that an operation left empty (ZADD XX on a missing key).
package values
