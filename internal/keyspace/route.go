package keyspace

import "github.com/rlserver/rlserver/internal/rules"

// Routing, for work that must know in advance which shards it will need: a
// Lua script holds the shards of the keys it declares, and other clients'
// commands on those shards wait for it (or are refused while it runs past
// its time limit).

// ShardOf returns the index of the shard owning (rule, key); rule is nil
// for a plain key.
func (m *Map) ShardOf(rule *rules.Rule, key []byte) int { return m.shardOf(rule, key) }

// CoversOp reports whether db reaches (rule, key): an operation on a
// limiter key (rule not nil) or a plain key it does not cover would panic.
func (db *DB) CoversOp(rule *rules.Rule, key []byte) bool {
	return db.coversIndex(db.m.shardOf(rule, key))
}

// CoversAll reports whether db covers every shard, as whole-keyspace calls
// (Stats, Flush, Reconcile) require.
func (db *DB) CoversAll() bool { return db.all }
