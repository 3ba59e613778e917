package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/rlserver/rlserver/internal/rules"
)

// FuzzParse feeds arbitrary bytes to the loader: it must never panic, and
// whatever it accepts must compile to valid rules a store publishes, each
// limited descriptor naming one of them.
func FuzzParse(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join(testdata, "*", "*.yaml"))
	for _, p := range paths {
		data, _ := os.ReadFile(p)
		f.Add(data)
	}
	f.Add([]byte("domain: d\ndescriptors:\n  - &a {key: k, rate_limit: {unit: second, requests_per_unit: 1}}\n  - *a\n"))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {<<: {unit: day}, requests_per_unit: 0x10, window: 1ms, algorithm: leaky_bucket, burst: 1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz", data, Options{})
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		names := map[string]bool{}
		for _, d := range cfg.Defs {
			if err := d.Validate(); err != nil {
				t.Fatalf("accepted an invalid rule %+v: %v", d, err)
			}
			if !strings.HasPrefix(d.Name, RulePrefix) {
				t.Fatalf("rule %q lacks the prefix", d.Name)
			}
			names[d.Name] = true
		}
		if _, err := rules.NewStore(cfg.Defs); err != nil {
			t.Fatalf("accepted rules a store refuses: %v", err)
		}
		indexes := map[int]bool{}
		for _, dom := range cfg.Domains {
			dom.Walk(func(n *Node) {
				if n.Limit == nil {
					return
				}
				if indexes[n.Index] || n.Index >= cfg.Nodes {
					t.Fatalf("index %d reused or out of range (%d nodes)", n.Index, cfg.Nodes)
				}
				indexes[n.Index] = true
				if n.Limit.Rule != "" && !names[n.Limit.Rule] {
					t.Fatalf("descriptor %s names rule %s, not compiled", n.StatsKey, n.Limit.Rule)
				}
				if n.Limit.Rule == "" && !n.Limit.Unlimited && n.Limit.RequestsPerUnit != 0 {
					t.Fatalf("descriptor %s has a limit but no rule", n.StatsKey)
				}
				// Its own path finds it.
				es := entriesTo(dom, n)
				if leaf, _ := dom.Match(es, nil); es != nil && leaf != n {
					t.Fatalf("descriptor %s is not matched by its own entries %v", n.StatsKey, es)
				}
			})
		}
		if len(indexes) != cfg.Nodes {
			t.Fatalf("%d indexes for %d nodes", len(indexes), cfg.Nodes)
		}
	})
}

// entriesTo returns request entries that reach n: at each level its key
// and its value as written (its prefix for a wildcard, "" for key only), or
// nil when such an entry would reach a sibling that takes precedence (an
// earlier wildcard, a "*" before a key-only node).
func entriesTo(dom *Domain, n *Node) []*rlv3.RateLimitDescriptor_Entry {
	var path []*Node
	var find func(l *level, trail []*Node) bool
	find = func(l *level, trail []*Node) bool {
		for _, c := range l.all {
			t := append(trail[:len(trail):len(trail)], c)
			if c == n {
				path = t
				return true
			}
			if find(&c.children, t) {
				return true
			}
		}
		return false
	}
	find(&dom.root, nil)
	var es []*rlv3.RateLimitDescriptor_Entry
	lvl := &dom.root
	for _, p := range path {
		v := p.Value
		if p.Wildcard {
			v = p.Prefix
		}
		if got := lvl.find(p.Key, v); got != p {
			return nil // unreachable with the plain choice: skip
		}
		es = append(es, &rlv3.RateLimitDescriptor_Entry{Key: p.Key, Value: v})
		lvl = &p.children
	}
	return es
}

// FuzzMatch checks the matcher against a direct reading of the precedence
// rules (exact, then the first wildcard in file order, then key only, with
// no backtracking and the depth matching exactly), and that counter keys
// decode back to the descriptor they were built from.
func FuzzMatch(f *testing.F) {
	var files []File
	for _, p := range []string{"observed/precedence.yaml", "config/wildcard.yaml", "config/basic_config.yaml", "config/share_threshold.yaml"} {
		data, err := os.ReadFile(filepath.Join(testdata, p))
		if err != nil {
			f.Fatal(err)
		}
		files = append(files, File{Name: p, Data: data})
	}
	cfg, err := Build(files, Options{MergeDomains: true}) // three files are test-domain
	if err != nil {
		f.Fatal(err)
	}
	f.Add("observed", "k\x00exa")
	f.Add("test-domain", "key1\x00value1\x01subkey1\x00x")
	f.Add("test-domain", "files\x00top/a\x01files\x00nested/b")
	f.Add("observed", "a\x00x\x01b\x002")
	f.Add("ob|s=erv\\ed", "w\x00x|y=z\\")
	f.Fuzz(func(t *testing.T, domain, spec string) {
		var es []*rlv3.RateLimitDescriptor_Entry
		if spec != "" {
			for _, part := range strings.Split(spec, "\x01") {
				k, v, _ := strings.Cut(part, "\x00")
				es = append(es, &rlv3.RateLimitDescriptor_Entry{Key: k, Value: v})
			}
		}
		key := AppendKey(nil, domain, es, nil)
		gotDomain, gotEntries, ok := decodeKey(key)
		if !ok || gotDomain != domain || len(gotEntries) != len(es) {
			t.Fatalf("key %q decodes to %q %v", key, gotDomain, gotEntries)
		}
		for i := range es {
			if gotEntries[i] != [2]string{es[i].Key, es[i].Value} {
				t.Fatalf("key %q entry %d decodes to %v", key, i, gotEntries[i])
			}
		}
		dom := cfg.Domains[domain]
		if dom == nil {
			return
		}
		leaf, path := dom.Match(es, nil)
		if want := referenceMatch(dom, es); leaf != want {
			t.Fatalf("Match(%v) = %v, reference %v", es, name(leaf), name(want))
		}
		if leaf != nil {
			if len(path) != len(es) || path[len(path)-1] != leaf {
				t.Fatalf("path %d long for %d entries", len(path), len(es))
			}
			if k := AppendKey(nil, domain, es, path); !bytes.HasPrefix(k, appendEscaped(nil, domain)) {
				t.Fatalf("key %q", k)
			}
		}
	})
}

func name(n *Node) string {
	if n == nil {
		return "<none>"
	}
	return n.StatsKey
}

// referenceMatch is the precedence rules read literally, scanning each
// level in file order.
func referenceMatch(dom *Domain, es []*rlv3.RateLimitDescriptor_Entry) *Node {
	lvl := &dom.root
	for i, e := range es {
		var exact, wild, keyOnly *Node
		for _, n := range lvl.all {
			if n.Key != e.Key {
				continue
			}
			switch {
			case n.Value == "":
				keyOnly = n
			case strings.HasSuffix(n.Value, "*"):
				if wild == nil && strings.HasPrefix(e.Value, strings.TrimSuffix(n.Value, "*")) {
					wild = n
				}
			case n.Value == e.Value:
				exact = n
			}
		}
		n := exact
		if n == nil {
			n = wild
		}
		if n == nil {
			n = keyOnly
		}
		if n == nil {
			return nil
		}
		if i == len(es)-1 {
			if n.Limit != nil {
				return n
			}
			return nil
		}
		lvl = &n.children
	}
	return nil
}

// decodeKey parses a counter key back into its domain and entries.
func decodeKey(key []byte) (string, [][2]string, bool) {
	var parts []string
	var cur []byte
	var seps []byte
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case '\\':
			if i+1 == len(key) {
				return "", nil, false
			}
			i++
			cur = append(cur, key[i])
		case '|', '=':
			parts = append(parts, string(cur))
			seps = append(seps, c)
			cur = nil
		default:
			cur = append(cur, c)
		}
	}
	parts = append(parts, string(cur))
	var es [][2]string
	for i := 1; i < len(parts); i += 2 {
		if seps[i-1] != '|' || i+1 >= len(parts) || seps[i] != '=' {
			return "", nil, false
		}
		es = append(es, [2]string{parts[i], parts[i+1]})
	}
	return parts[0], es, true
}
