package shards

import "errors"

// ErrKeyLimit is the error of an operation that would create a key in a
// shard already holding its share of Config.MaxKeys, under the reject
// policy.
var ErrKeyLimit = errors.New("max keys reached: the key limit (--maxkeys) is full and --maxkeys-policy is reject")
