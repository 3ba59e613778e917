package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/rules"
)

// File is one configuration file's name (for messages) and content.
type File struct {
	Name string
	Data []byte
}

// Build reads files in order and returns the configuration they make
// together. Any fault in any file is an error and nothing is returned: a
// configuration is published whole or not at all.
func Build(files []File, opts Options) (*Config, error) {
	b := &builder{
		cfg:   &Config{Domains: map[string]*Domain{}},
		opts:  opts,
		rules: map[string]string{},
	}
	for _, f := range files {
		if err := b.file(f); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(b.cfg.Defs, func(a, c rules.Def) int { return strings.Compare(a.Name, c.Name) })
	return b.cfg, nil
}

// Parse builds the configuration of one file.
func Parse(name string, data []byte, opts Options) (*Config, error) {
	return Build([]File{{Name: name, Data: data}}, opts)
}

type builder struct {
	cfg  *Config
	opts Options
	// rules maps each compiled rule name to the descriptor it came from,
	// to refuse the (astronomically unlikely) hash collision rather than
	// let two descriptors share a rule.
	rules map[string]string
}

func (b *builder) file(f File) error {
	root, warnings, err := parseFile(f.Name, f.Data)
	if err != nil {
		return err
	}
	b.cfg.Files = append(b.cfg.Files, f.Name)
	b.cfg.Warnings = append(b.cfg.Warnings, warnings...)
	if root.domain == "" {
		return errorAt(f.Name, 0, "config file cannot have empty domain")
	}
	headers, ok := parseHeaderMode(root.responseHeaders)
	if !ok {
		return errorAt(f.Name, root.headersLine, "invalid response_headers '%s': must be none, draft03 or draft11", root.responseHeaders)
	}
	dom := b.cfg.Domains[root.domain]
	switch {
	case dom == nil:
		dom = &Domain{Name: root.domain, AllOrNothing: root.allOrNothing, Headers: headers, File: f.Name}
		b.cfg.Domains[root.domain] = dom
	case !b.opts.MergeDomains:
		return errorAt(f.Name, root.line, "duplicate domain '%s' in config file", root.domain)
	case dom.AllOrNothing != root.allOrNothing || dom.Headers != headers:
		return errorAt(f.Name, root.line, "domain '%s' is merged from files that disagree on all_or_nothing or response_headers (%s sets all_or_nothing: %t, response_headers: %s)",
			root.domain, dom.File, dom.AllOrNothing, dom.Headers)
	}
	return b.descriptors(f.Name, dom, &dom.root, root.descriptors, root.domain+".", "", nil)
}

func parseHeaderMode(s string) (HeaderMode, bool) {
	for m, name := range headerModeNames {
		if s == name {
			return HeaderMode(m), true
		}
	}
	return HeadersNone, s == ""
}

// descriptors adds one level's descriptors under lvl, checking them in the
// order and with the words of envoyproxy/ratelimit's loader. parentKey is
// its "domain.key_value." prefix for messages; statsPrefix the StatsKey
// prefix; path the (key, value) pairs above this level.
func (b *builder) descriptors(file string, dom *Domain, lvl *level, list []yamlDescriptor, parentKey, statsPrefix string, path []entryKey) error {
	for _, yd := range list {
		if yd.key == "" {
			return errorAt(file, yd.line, "descriptor has empty key")
		}
		finalKey := yd.key
		if yd.value != "" {
			finalKey += "_" + yd.value
		}
		if lvl.has(yd.key, yd.value) {
			return errorAt(file, yd.line, "duplicate descriptor composite key '%s'", parentKey+finalKey)
		}
		n := &Node{
			Key: yd.key, Value: yd.value,
			ShadowMode: yd.shadowMode, QuotaMode: yd.quotaMode,
			DetailedMetric: yd.detailedMetric, ValueToMetric: yd.valueToMetric, ShareThreshold: yd.shareThreshold,
			StatsKey: statsPrefix + finalKey,
			File:     file, Line: yd.line,
		}
		if strings.HasSuffix(yd.value, "*") {
			n.Wildcard, n.Prefix = true, strings.TrimSuffix(yd.value, "*")
		}
		here := append(path[:len(path):len(path)], entryKey{yd.key, yd.value})
		if yd.rateLimit != nil {
			limit, err := b.limit(file, dom.Name, yd.rateLimit, here, n.StatsKey)
			if err != nil {
				return err
			}
			n.Limit = limit
			n.Index = b.cfg.Nodes
			b.cfg.Nodes++
		}
		if yd.shareThreshold && !strings.HasSuffix(finalKey, "*") {
			return errorAt(file, yd.line, "share_threshold can only be used with wildcard values (ending with '*'), but found key '%s'", finalKey)
		}
		lvl.add(n)
		if err := b.descriptors(file, dom, &n.children, yd.descriptors, parentKey+finalKey+".", n.StatsKey+".", here); err != nil {
			return err
		}
	}
	return nil
}

// limit checks a rate_limit and compiles it: the window, the algorithm and,
// unless it decides nothing, the rule.
func (b *builder) limit(file, domain string, rl *yamlRateLimit, path []entryKey, statsKey string) (*Limit, error) {
	fail := func(format string, args ...any) (*Limit, error) {
		return nil, errorAt(file, rl.line, format, args...)
	}
	unit, validUnit := unitNames[strings.ToUpper(rl.unit)]
	l := &Limit{
		Name: rl.name, Replaces: rl.replaces, Unlimited: rl.unlimited,
		RequestsPerUnit: rl.requestsPerUnit, Algorithm: algorithms.FixedWindow,
	}
	switch {
	case rl.unlimited:
		if validUnit {
			return fail("should not specify rate limit unit when unlimited")
		}
		if rl.window != "" || rl.algorithm != "" || rl.burstSet {
			return fail("should not specify window, algorithm or burst when unlimited")
		}
	case rl.window != "":
		if rl.unit != "" {
			return fail("rate_limit: give unit or window, not both")
		}
		w, err := time.ParseDuration(rl.window)
		if err != nil {
			return nil, errorAt(file, rl.windowLine, "invalid window '%s': must be a Go duration such as 500ms, 1s, 1m or 24h, from 1ms to 366 days (8784h)", rl.window)
		}
		l.Window = w
		l.Unit, l.Multiplier = UnitOf(w)
	case !validUnit:
		return fail("invalid rate limit unit '%s'", rl.unit)
	default:
		l.Window, l.Unit, l.Multiplier = unit.Duration(), unit, 1
	}
	for _, r := range rl.replaces {
		if r == "" {
			return fail("should not have an empty replaces entry")
		}
		if r == rl.name {
			return fail("replaces should not contain name of same descriptor")
		}
	}
	if rl.unlimited {
		return l, nil
	}
	if rl.algorithm != "" {
		a, ok := algorithms.ParseAlgorithm(rl.algorithm)
		if !ok {
			return fail("invalid algorithm '%s': must be one of token_bucket, leaky_bucket, fixed_window, sliding_log, sliding_counter", rl.algorithm)
		}
		l.Algorithm = a
	}
	if rl.burstSet {
		if rl.burst < 1 || rl.burst > rules.MaxLimit {
			return fail("invalid burst '%d': must be an integer from 1 to 1000000000", rl.burst)
		}
		l.Burst = rl.burst
	}
	// A limit of 0 denies everything without a rule; its other fields are
	// still checked, against a limit of 1, so that a file which is valid
	// now stays valid when the 0 is raised.
	def := rules.Def{
		Name:      ruleName(domain, path, statsKey),
		Algorithm: l.Algorithm,
		Limit:     max(int64(l.RequestsPerUnit), 1),
		Window:    l.Window,
		Burst:     l.Burst,
	}
	if err := def.Validate(); err != nil {
		var fe *rules.FieldError
		if errors.As(err, &fe) {
			switch fe.Field {
			case "limit":
				return fail("invalid requests_per_unit '%d': %s", l.RequestsPerUnit, fe.Reason)
			case "window":
				return fail("invalid window '%s': %s", l.Window, fe.Reason)
			}
			return fail("invalid %s '%s': %s", fe.Field, fe.Value, fe.Reason)
		}
		return fail("%s", err)
	}
	if l.RequestsPerUnit == 0 {
		return l, nil
	}
	if other, taken := b.rules[def.Name]; taken {
		return fail("descriptors '%s' and '%s' compile to the same rule name %s; rename one", other, statsKey, def.Name)
	}
	b.rules[def.Name] = domain + "." + statsKey
	l.Rule = def.Name
	b.cfg.Defs = append(b.cfg.Defs, def)
	return l, nil
}

func (l *level) has(key, value string) bool {
	switch {
	case value == "":
		return l.keyOnly[key] != nil
	case strings.HasSuffix(value, "*"):
		for _, n := range l.wildcard[key] {
			if n.Value == value {
				return true
			}
		}
		return false
	}
	return l.exact[entryKey{key, value}] != nil
}

func (l *level) add(n *Node) {
	l.all = append(l.all, n)
	switch {
	case n.Value == "":
		if l.keyOnly == nil {
			l.keyOnly = map[string]*Node{}
		}
		l.keyOnly[n.Key] = n
	case n.Wildcard:
		if l.wildcard == nil {
			l.wildcard = map[string][]*Node{}
		}
		l.wildcard[n.Key] = append(l.wildcard[n.Key], n)
	default:
		if l.exact == nil {
			l.exact = map[entryKey]*Node{}
		}
		l.exact[entryKey{n.Key, n.Value}] = n
	}
}

// String describes a limit for logs: "10/MINUTE fixed_window".
func (l *Limit) String() string {
	switch {
	case l.Unlimited:
		return "unlimited"
	case l.RequestsPerUnit == 0:
		return fmt.Sprintf("0 per %s (denies everything)", l.Window)
	}
	s := fmt.Sprintf("%d per %s %s", l.RequestsPerUnit, l.Window, l.Algorithm)
	if l.Burst != 0 {
		s += fmt.Sprintf(" burst %d", l.Burst)
	}
	return s
}
