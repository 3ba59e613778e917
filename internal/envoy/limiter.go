// Package envoy serves Envoy's rate limit service API
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) over gRPC,
// configured by envoyproxy/ratelimit's YAML format (package config), and
// decided by rlserver through the small Limiter interface below.
//
// The pieces: Service answers ShouldRateLimit (matching, costs, replaces,
// overrides, shadow and quota modes, all-or-nothing domains, headers,
// metrics); Loader reads the configuration from a file or a directory and
// re-reads it on demand and when the files change; Server is the gRPC
// server with the health and reflection services. docs/envoy.md is the
// operator's guide.
package envoy

import (
	"context"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/service"
)

// Limiter is what the Envoy front end needs from rlserver. Implementations
// must be safe for concurrent use.
type Limiter interface {
	// SetRules publishes defs as the Envoy configuration's rules, replacing
	// the ones it published before (every name starts with
	// config.RulePrefix; no other rule has that prefix), as one change, and
	// brings existing keys up to date: a changed limit, window or burst
	// keeps the budget spent; a changed algorithm starts the rule's keys
	// fresh; a rule no longer in defs is deleted with its keys. On error
	// nothing changes.
	SetRules(defs []rules.Def) error
	// Decide decides requests at one instant and returns one Decision per
	// request, in order. With allOrNothing, every request is charged or
	// none is (RESP's RL.ALLOWALL): if any would be denied, none is
	// charged, and each Decision describes its key uncharged, with Allowed
	// saying whether that request alone would have been admitted. The
	// caller then sends at most 32 requests, none with Peek set, and no
	// (Key, Rule) pair twice. Without allOrNothing each request is decided
	// and charged on its own, in order (envoyproxy/ratelimit's behaviour).
	// An error fails the whole call (nothing was charged by an
	// allOrNothing call; some requests of another call may have been).
	// Decide keeps nothing of requests once it returns: the caller reuses
	// the slice for its next call.
	Decide(ctx context.Context, requests []Request, allOrNothing bool) ([]algorithms.Decision, error)
}

// Request is one decision for Limiter.Decide: Key is the counter key
// (config.AppendKey's format), Rule the name of a rule published by
// SetRules, Cost the units asked for, from 1 to the rule's capacity (the
// front end answers larger costs itself: they could never pass), and Peek
// decides without charging or creating state, as RL.PEEK does. It is the
// service's type, so the service's managed rules are a Limiter as they are.
type Request = service.Check

// The server's Limiter: the Envoy configuration's rules are the service's
// rules managed under config.RulePrefix.
var _ Limiter = (*service.Managed)(nil)
