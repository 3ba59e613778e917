package service

import "github.com/rlserver/rlserver/internal/rules"

// ShardOf returns the index of the shard owning (rule, key), rule nil for
// a plain key, in 0..Shards()-1: for front ends that must know which shards
// a request will hold before sending it (Lua scripts).
func (s *Service) ShardOf(rule *rules.Rule, key []byte) int { return s.cfg.Keys.ShardOf(rule, key) }
