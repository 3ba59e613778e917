// Package config reads the rate-limit configuration of envoyproxy/ratelimit
// (its YAML format, so an existing file works unchanged), validates it with
// that project's own error texts, and compiles it into what rlserver runs:
// one rules.Def per limited descriptor, a descriptor tree to match Envoy's
// request descriptors against, and the counter key each match is decided on.
//
// The reference for compatibility is envoyproxy/ratelimit at commit 3fb7025
// (the version the Go module proxy serves). Its later additions are accepted
// where they do not conflict: a descriptor's `metadata` map is read and
// ignored. rlserver adds, inside a rate_limit, `algorithm`, `window` (any
// duration instead of `unit`) and `burst`; and, at the top of a file,
// `all_or_nothing` and `response_headers`. docs/envoy.md describes the format
// and every difference.
//
// A Config is immutable once built and safe for concurrent use.
package config

import (
	"time"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/rules"
)

// Config is a validated configuration: every domain of every file read.
type Config struct {
	// Domains by name.
	Domains map[string]*Domain
	// Defs are the rules the limited descriptors compile to, sorted by
	// name. Every name starts with RulePrefix.
	Defs []rules.Def
	// Files are the files read, in the order they were read.
	Files []string
	// Warnings describe keys that were read but have no effect (a key of
	// the format in a place where envoyproxy/ratelimit ignores it too), so
	// the loader can log them.
	Warnings []string
	// Nodes is the number of descriptor nodes with a rate_limit; each has a
	// distinct Node.Index below it.
	Nodes int
}

// HeaderMode selects the HTTP headers the service asks Envoy to add to the
// response (response_headers_to_add).
type HeaderMode uint8

// The header modes, as written after `response_headers:`.
const (
	// HeadersNone adds no headers (envoyproxy/ratelimit's default).
	HeadersNone HeaderMode = iota
	// HeadersDraft03 adds x-ratelimit-limit, -remaining and -reset in the
	// form Envoy's own enable_x_ratelimit_headers: DRAFT_VERSION_03
	// produces, and retry-after when over the limit.
	HeadersDraft03
	// HeadersDraft11 adds the RateLimit and RateLimit-Policy fields of
	// draft-ietf-httpapi-ratelimit-headers-11, one item per limit that
	// applied, and retry-after when over the limit.
	HeadersDraft11
)

var headerModeNames = [...]string{HeadersNone: "none", HeadersDraft03: "draft03", HeadersDraft11: "draft11"}

// String returns the name used in the file.
func (m HeaderMode) String() string {
	if int(m) < len(headerModeNames) {
		return headerModeNames[m]
	}
	return "unknown"
}

// Domain is one domain's descriptor tree and settings.
type Domain struct {
	Name string
	// AllOrNothing makes a request's limited descriptors one decision:
	// all charged, or none when any is over its limit.
	AllOrNothing bool
	// Headers is the response header mode.
	Headers HeaderMode
	// File is the file that defined the domain (the first one, when
	// domains are merged).
	File string
	root level
}

// Node is one descriptor of the configuration tree.
type Node struct {
	// Key is the descriptor entry's key; Value its value as written: ""
	// for a key-only descriptor (any value), "prefix*" for a wildcard.
	Key, Value string
	// Wildcard reports a value ending in '*'; Prefix is the value without
	// it, which a request's value must start with.
	Wildcard bool
	Prefix   string
	// Limit is the descriptor's rate_limit, nil without one.
	Limit *Limit
	// ShadowMode answers OK where the limit would deny (the decision is
	// still made and counted). QuotaMode (envoyproxy/ratelimit 3fb7025's
	// semantics) answers OK too, keeping the limit and remaining but no
	// reset. Both are set on the descriptor, beside rate_limit.
	ShadowMode, QuotaMode bool
	// DetailedMetric labels this limit's metrics with the request's values
	// instead of the configuration's; ValueToMetric does so for this
	// level only.
	DetailedMetric, ValueToMetric bool
	// ShareThreshold (wildcards only) makes every value the wildcard
	// matches share one counter: the counter key holds the pattern, not
	// the request's value.
	ShareThreshold bool
	// StatsKey names the descriptor in metrics and rule names, as
	// envoyproxy/ratelimit names its stats: the path from the domain,
	// each level written key or key_value, joined by dots
	// ("key1_value1.subkey1", "wild_foo*").
	StatsKey string
	// Index numbers the nodes with a Limit 0..Config.Nodes-1, so a caller
	// can keep per-node data in a slice.
	Index int
	// File and Line locate the descriptor, for messages.
	File string
	Line int

	children level
}

// Limit is a descriptor's rate_limit.
type Limit struct {
	// Name is the optional name (shown in current_limit, used by
	// replaces). Replaces names the limits this one replaces when both
	// apply to one request.
	Name     string
	Replaces []string
	// Unlimited answers OK with the largest remaining count and decides
	// nothing.
	Unlimited bool
	// RequestsPerUnit is the limit per window; 0 denies every request
	// (envoyproxy/ratelimit's way to ban a descriptor).
	RequestsPerUnit uint32
	// Unit and Multiplier are the window as the Envoy API reports it in
	// current_limit: Unit one of the API's units (UnitUnknown when the
	// window is not a whole number of seconds), Multiplier ≥ 1.
	Unit       Unit
	Multiplier uint32
	// Window is the window's length; Algorithm and Burst the rlserver
	// rule's (fixed_window and 0 unless the file says otherwise).
	Window    time.Duration
	Algorithm algorithms.Algorithm
	Burst     int64
	// Rule names the rules.Def this limit compiled to; "" when it decides
	// nothing (Unlimited, or RequestsPerUnit 0).
	Rule string
}

// Capacity is the most units one request may ask for and ever be admitted:
// the burst for buckets that have one, else the limit.
func (l *Limit) Capacity() int64 {
	if l.Burst != 0 {
		return l.Burst
	}
	return int64(l.RequestsPerUnit)
}

// Unit is a window unit of the Envoy API (RateLimitResponse.RateLimit.Unit:
// the numbers are the protocol's).
type Unit int32

// The units. Month and year are 30 and 365 days, as envoyproxy/ratelimit
// counts them; every window is aligned to the Unix epoch.
const (
	UnitUnknown Unit = 0
	UnitSecond  Unit = 1
	UnitMinute  Unit = 2
	UnitHour    Unit = 3
	UnitDay     Unit = 4
	UnitMonth   Unit = 5
	UnitYear    Unit = 6
	UnitWeek    Unit = 7
)

var unitNames = map[string]Unit{
	"SECOND": UnitSecond, "MINUTE": UnitMinute, "HOUR": UnitHour, "DAY": UnitDay,
	"MONTH": UnitMonth, "YEAR": UnitYear, "WEEK": UnitWeek,
}

// Duration returns the unit's length, 0 for UnitUnknown.
func (u Unit) Duration() time.Duration {
	const day = 24 * time.Hour
	switch u {
	case UnitSecond:
		return time.Second
	case UnitMinute:
		return time.Minute
	case UnitHour:
		return time.Hour
	case UnitDay:
		return day
	case UnitWeek:
		return 7 * day
	case UnitMonth:
		return 30 * day
	case UnitYear:
		return 365 * day
	}
	return 0
}

// UnitOf expresses a window as the Envoy API can: the largest unit that
// divides it, and how many of them (YEAR before MONTH before WEEK …). A
// window that is not a whole number of seconds has no unit (UnitUnknown, 0).
func UnitOf(window time.Duration) (Unit, uint32) {
	for _, u := range [...]Unit{UnitYear, UnitMonth, UnitWeek, UnitDay, UnitHour, UnitMinute, UnitSecond} {
		if d := u.Duration(); window >= d && window%d == 0 {
			return u, uint32(window / d)
		}
	}
	return UnitUnknown, 0
}

// level holds one level's descriptors, indexed for the lookups of Match.
type level struct {
	exact    map[entryKey]*Node // descriptors with a value without '*'
	wildcard map[string][]*Node // by key, in file order
	keyOnly  map[string]*Node   // descriptors without a value
	all      []*Node            // every descriptor, in file order
}

type entryKey struct{ key, value string }

// Options change how a configuration is read.
type Options struct {
	// MergeDomains merges the descriptors of files that name the same
	// domain, as envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG=true does;
	// otherwise a domain defined twice is an error.
	MergeDomains bool
}
