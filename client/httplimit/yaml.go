package httplimit

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rlserver/rlserver/client"
	"github.com/rlserver/rlserver/internal/yamldoc"
)

// Load reads a configuration file; see Parse for the format.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("httplimit config %s: %w", path, err)
	}
	return Parse(path, data)
}

// Parse reads a configuration in YAML, with the conventions of rlserver's
// rules file: unknown keys, duplicate keys, missing and invalid values are
// errors naming source and the line at fault, and nothing is returned on
// error. source names the data in errors. Durations are Go durations
// (20ms, 1s, 1m).
//
//	timeout: 20ms                  # per-request wait for the server
//	headers: [draft, legacy]       # draft, legacy, legacy-unix, or none
//	trusted_proxies: [10.0.0.0/8]  # addresses or prefixes
//	client_ip_header: X-Forwarded-For
//	ipv6_prefix: 64
//	key_prefix: "shop:"
//	closed_retry_after: 1s
//	log_every: 1m
//	breaker: {failures: 5, backoff: 100ms, max_backoff: 10s}
//	rules:
//	  orders: {fail: closed}
//	  reads:
//	    fail: local
//	    local: {algorithm: token_bucket, limit: 100, window: 1s, burst: 20}
//	    budget: {chunk: 20, low_water: 5, max_hold: 1s, max_keys: 10000}
//	endpoints:
//	  - {match: "POST /orders", rules: [orders], scope: user}
//	  - {match: "GET /items/{id}", rules: [reads, reads.global], scope: apikey, header: X-API-Key, cost: 2}
//	  - {match: "GET /healthz", unlimited: true}
//	default: {rules: [api], scope: ip}
func Parse(source string, data []byte) (Config, error) {
	d := &decoder{source: source}
	top, err := yamldoc.Parse(data)
	if err != nil {
		return Config{}, fmt.Errorf("httplimit config %s: %w", source, err)
	}
	if top == nil {
		return Config{}, fmt.Errorf("httplimit config %s: empty; expected at least 'endpoints' or 'default'", source)
	}
	var c Config
	err = d.mapping(top, "the configuration", fields{
		"timeout":            func(v *yaml.Node) (err error) { c.Timeout, err = d.duration(v); return },
		"closed_retry_after": func(v *yaml.Node) (err error) { c.ClosedRetryAfter, err = d.duration(v); return },
		"log_every":          func(v *yaml.Node) (err error) { c.LogEvery, err = d.duration(v); return },
		"client_ip_header":   func(v *yaml.Node) (err error) { c.ClientIPHeader, err = d.str(v); return },
		"key_prefix":         func(v *yaml.Node) (err error) { c.KeyPrefix, err = d.str(v); return },
		"ipv6_prefix": func(v *yaml.Node) error {
			n, err := d.integer(v)
			c.IPv6Prefix = int(n)
			return err
		},
		"headers":         func(v *yaml.Node) error { return d.headers(v, &c) },
		"trusted_proxies": func(v *yaml.Node) (err error) { c.TrustedProxies, err = d.prefixes(v); return },
		"breaker":         func(v *yaml.Node) error { return d.breaker(v, &c.Breaker) },
		"rules":           func(v *yaml.Node) (err error) { c.Rules, err = d.rules(v); return },
		"endpoints":       func(v *yaml.Node) (err error) { c.Endpoints, err = d.endpoints(v); return },
		"default": func(v *yaml.Node) error {
			e, err := d.endpoint(v, "default", false)
			c.Default = &e
			return err
		},
	})
	if err != nil {
		return Config{}, err
	}
	check := c
	check.setDefaults()
	if err := check.validate(); err != nil {
		return Config{}, d.fail(top, "%v", err)
	}
	return c, nil
}

// decoder walks yaml.Node trees, with errors naming the source and line.
type decoder struct{ source string }

// fields maps a mapping's keys to what reads their values.
type fields map[string]func(*yaml.Node) error

func (d *decoder) fail(n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("httplimit config %s: line %d: %s", d.source, n.Line, fmt.Sprintf(format, args...))
}

// mapping reads n, a mapping, through fs: a key fs does not list, or one
// given twice, is an error.
func (d *decoder) mapping(n *yaml.Node, what string, fs fields) error {
	if n.Kind != yaml.MappingNode {
		return d.fail(n, "%s: expected a mapping", what)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		read, ok := fs[k.Value]
		if !ok {
			names := make([]string, 0, len(fs))
			for name := range fs {
				names = append(names, name)
			}
			slices.Sort(names)
			return d.fail(k, "%s: unknown field '%s' (fields are %s)", what, k.Value, strings.Join(names, ", "))
		}
		if seen[k.Value] {
			return d.fail(k, "%s: field %s given twice", what, k.Value)
		}
		seen[k.Value] = true
		if err := read(v); err != nil {
			return err
		}
	}
	return nil
}

func (d *decoder) scalar(v *yaml.Node) (string, error) {
	if v.Kind != yaml.ScalarNode {
		return "", d.fail(v, "expected a single value")
	}
	return v.Value, nil
}

func (d *decoder) str(v *yaml.Node) (string, error) { return d.scalar(v) }

func (d *decoder) integer(v *yaml.Node) (int64, error) {
	s, err := d.scalar(v)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, d.fail(v, "'%s' is not an integer", s)
	}
	return n, nil
}

func (d *decoder) boolean(v *yaml.Node) (bool, error) {
	s, err := d.scalar(v)
	if err != nil {
		return false, err
	}
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, d.fail(v, "'%s' is not true or false", s)
}

func (d *decoder) duration(v *yaml.Node) (time.Duration, error) {
	s, err := d.scalar(v)
	if err != nil {
		return 0, err
	}
	t, err := time.ParseDuration(s)
	if err != nil || t <= 0 {
		return 0, d.fail(v, "'%s' is not a positive Go duration such as 20ms, 1s or 1m", s)
	}
	return t, nil
}

// list reads a sequence of scalars; a single scalar is a list of one.
func (d *decoder) list(v *yaml.Node) ([]string, error) {
	if v.Kind == yaml.ScalarNode {
		return []string{v.Value}, nil
	}
	if v.Kind != yaml.SequenceNode {
		return nil, d.fail(v, "expected a list")
	}
	out := make([]string, 0, len(v.Content))
	for _, item := range v.Content {
		s, err := d.scalar(item)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (d *decoder) headers(v *yaml.Node, c *Config) error {
	names, err := d.list(v)
	if err != nil {
		return err
	}
	for _, name := range names {
		switch name {
		case "draft":
			c.Headers |= client.DraftHeaders
		case "legacy":
			c.Headers |= client.LegacyHeaders
		case "legacy-unix":
			c.Headers |= client.LegacyHeaders | client.UnixReset
		case "none":
			c.NoHeaders = true
		default:
			return d.fail(v, "headers: '%s' is not draft, legacy, legacy-unix or none", name)
		}
	}
	if c.NoHeaders && c.Headers != 0 {
		return d.fail(v, "headers: none together with others")
	}
	return nil
}

func (d *decoder) prefixes(v *yaml.Node) ([]netip.Prefix, error) {
	names, err := d.list(v)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Prefix, 0, len(names))
	for _, s := range names {
		p, err := parsePrefix(s)
		if err != nil {
			return nil, d.fail(v, "trusted_proxies: '%s' is not an address or a prefix such as 10.0.0.0/8", s)
		}
		out = append(out, p)
	}
	return out, nil
}

// parsePrefix reads an address (a prefix of its full length) or a prefix.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func (d *decoder) breaker(v *yaml.Node, b *client.BreakerSettings) error {
	return d.mapping(v, "breaker", fields{
		"failures": func(v *yaml.Node) error {
			n, err := d.integer(v)
			if err == nil && (n < 1 || n > 1<<20) {
				return d.fail(v, "breaker: failures %d: must be from 1 to %d", n, 1<<20)
			}
			b.Failures = uint32(n)
			return err
		},
		"backoff":     func(v *yaml.Node) (err error) { b.Backoff, err = d.duration(v); return },
		"max_backoff": func(v *yaml.Node) (err error) { b.MaxBackoff, err = d.duration(v); return },
	})
}

func (d *decoder) rules(v *yaml.Node) (map[string]Rule, error) {
	if v.Kind != yaml.MappingNode {
		return nil, d.fail(v, "rules: expected a mapping of rule names to settings")
	}
	out := make(map[string]Rule, len(v.Content)/2)
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, body := v.Content[i], v.Content[i+1]
		if _, dup := out[k.Value]; dup {
			return nil, d.fail(k, "rules: %s given twice", k.Value)
		}
		what := "rule " + k.Value
		var r Rule
		err := d.mapping(body, what, fields{
			"fail": func(v *yaml.Node) error {
				s, err := d.str(v)
				r.Fail = FailPolicy(s)
				return err
			},
			"local": func(v *yaml.Node) error {
				r.Local = &LocalLimit{}
				return d.local(v, what, r.Local)
			},
			"budget": func(v *yaml.Node) error {
				r.Budget = &Budget{}
				return d.budget(v, what, r.Budget)
			},
		})
		if err != nil {
			return nil, err
		}
		if err := r.validate(); err != nil {
			return nil, d.fail(k, "%s: %v", what, err)
		}
		out[k.Value] = r
	}
	return out, nil
}

func (d *decoder) local(v *yaml.Node, what string, l *LocalLimit) error {
	return d.mapping(v, what+": local", fields{
		"algorithm": func(v *yaml.Node) (err error) { l.Algorithm, err = d.str(v); return },
		"limit":     func(v *yaml.Node) (err error) { l.Limit, err = d.integer(v); return },
		"window":    func(v *yaml.Node) (err error) { l.Window, err = d.duration(v); return },
		"burst":     func(v *yaml.Node) (err error) { l.Burst, err = d.integer(v); return },
		"max_keys": func(v *yaml.Node) error {
			n, err := d.integer(v)
			l.MaxKeys = int(n)
			return err
		},
	})
}

func (d *decoder) budget(v *yaml.Node, what string, b *Budget) error {
	return d.mapping(v, what+": budget", fields{
		"chunk":     func(v *yaml.Node) (err error) { b.Chunk, err = d.integer(v); return },
		"low_water": func(v *yaml.Node) (err error) { b.LowWater, err = d.integer(v); return },
		"max_hold":  func(v *yaml.Node) (err error) { b.MaxHold, err = d.duration(v); return },
		"max_keys": func(v *yaml.Node) error {
			n, err := d.integer(v)
			b.MaxKeys = int(n)
			return err
		},
	})
}

func (d *decoder) endpoints(v *yaml.Node) ([]Endpoint, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, d.fail(v, "endpoints: expected a list")
	}
	out := make([]Endpoint, 0, len(v.Content))
	// Patterns are checked as ServeMux checks them, here, so an error
	// names the line.
	var m patternSet
	for i, n := range v.Content {
		e, err := d.endpoint(n, fmt.Sprintf("endpoint %d", i+1), true)
		if err != nil {
			return nil, err
		}
		if err := m.add(e.Pattern); err != nil {
			return nil, d.fail(n, "endpoint %d: %v", i+1, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// endpoint reads one endpoint; withPattern: it must have match:, else
// must not.
func (d *decoder) endpoint(n *yaml.Node, what string, withPattern bool) (Endpoint, error) {
	var e Endpoint
	fs := fields{
		"rules":     func(v *yaml.Node) (err error) { e.Rules, err = d.list(v); return },
		"scope":     func(v *yaml.Node) error { s, err := d.str(v); e.Scope = Scope(s); return err },
		"header":    func(v *yaml.Node) (err error) { e.Header, err = d.str(v); return },
		"cost":      func(v *yaml.Node) (err error) { e.Cost, err = d.integer(v); return },
		"unlimited": func(v *yaml.Node) (err error) { e.Unlimited, err = d.boolean(v); return },
	}
	if withPattern {
		fs["match"] = func(v *yaml.Node) (err error) { e.Pattern, err = d.str(v); return }
	}
	if err := d.mapping(n, what, fs); err != nil {
		return e, err
	}
	if withPattern && e.Pattern == "" {
		return e, d.fail(n, "%s: match is missing (a ServeMux pattern such as \"GET /items/{id}\")", what)
	}
	if withPattern {
		what += " (" + e.Pattern + ")"
	}
	if e.Cost == 0 && hasKey(n, "cost") {
		return e, d.fail(n, "%s: cost 0: must be at least 1", what)
	}
	if err := e.validate(); err != nil {
		return e, d.fail(n, "%s: %v", what, err)
	}
	return e, nil
}

func hasKey(n *yaml.Node, key string) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return true
		}
	}
	return false
}
