package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"go.yaml.in/yaml/v3"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/rules"
)

const testdata = "../../../testdata/envoy"

// loadFiles builds the configuration of testdata files, named by their base
// names as envoyproxy/ratelimit's tests name them.
func loadFiles(t testing.TB, opts Options, paths ...string) (*Config, error) {
	t.Helper()
	var files []File
	for _, p := range paths {
		data, err := os.ReadFile(filepath.Join(testdata, p))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, File{Name: filepath.Base(p), Data: data})
	}
	return Build(files, opts)
}

func mustParse(t testing.TB, src string) *Config {
	t.Helper()
	c, err := Parse("test.yaml", []byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func entries(pairs ...string) []*rlv3.RateLimitDescriptor_Entry {
	var out []*rlv3.RateLimitDescriptor_Entry
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, &rlv3.RateLimitDescriptor_Entry{Key: pairs[i], Value: pairs[i+1]})
	}
	return out
}

// TestEnvoyproxyErrors: every file envoyproxy/ratelimit's tests refuse is
// refused with its words.
func TestEnvoyproxyErrors(t *testing.T) {
	var cases []struct {
		Files    []string
		Merge    bool
		Error    string
		Rlserver string
	}
	readYAML(t, "errors.yaml", &cases)
	if len(cases) < 14 {
		t.Fatalf("read %d cases", len(cases))
	}
	for _, c := range cases {
		t.Run(strings.Join(c.Files, "+"), func(t *testing.T) {
			_, err := loadFiles(t, Options{MergeDomains: c.Merge}, c.Files...)
			want := c.Error
			if c.Rlserver != "" {
				want = c.Rlserver
			}
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("error %v (%T), want %q", err, err, want)
			}
			if got := e.File + ": " + e.Msg; got != want {
				t.Errorf("error\n got %q\nwant %q", got, want)
			}
		})
	}
}

func readYAML(t testing.TB, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testdata, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

type wantLimit struct {
	RequestsPerUnit *uint32 `yaml:"requests_per_unit"`
	Unit            string
	Name            string
	Unlimited       bool
	StatsKey        string `yaml:"stats_key"`
	ShadowMode      bool   `yaml:"shadow_mode"`
	DetailedMetric  bool   `yaml:"detailed_metric"`
}

// TestMatches walks testdata/envoy/matches.yaml: which limit applies to each
// request descriptor, and its counter key.
func TestMatches(t *testing.T) {
	var groups []struct {
		Configs []string
		Source  string
		Domain  string
		Cases   []struct {
			Entries [][]string
			Limit   *wantLimit
			Key     string
		}
	}
	readYAML(t, "matches.yaml", &groups)
	n := 0
	for _, g := range groups {
		cfg, err := loadFiles(t, Options{}, g.Configs...)
		if err != nil {
			t.Fatalf("%s: %v", g.Source, err)
		}
		dom := cfg.Domains[g.Domain]
		if dom == nil {
			t.Fatalf("%s: no domain %s", g.Source, g.Domain)
		}
		for _, c := range g.Cases {
			n++
			var es []*rlv3.RateLimitDescriptor_Entry
			for _, e := range c.Entries {
				entry := &rlv3.RateLimitDescriptor_Entry{Key: e[0]}
				if len(e) > 1 {
					entry.Value = e[1]
				}
				es = append(es, entry)
			}
			leaf, path := dom.Match(es, nil)
			where := g.Source + " " + strings.ReplaceAll(strings.TrimSpace(strings.Join(flatten(c.Entries), " ")), "\n", " ")
			if c.Limit == nil {
				if leaf != nil {
					t.Errorf("%s: matched %s, want no limit", where, leaf.StatsKey)
				}
				continue
			}
			if leaf == nil {
				t.Errorf("%s: no limit, want %s", where, c.Limit.StatsKey)
				continue
			}
			l := leaf.Limit
			got := wantLimit{Unlimited: l.Unlimited, Name: l.Name, StatsKey: leaf.StatsKey, ShadowMode: leaf.ShadowMode, DetailedMetric: leaf.DetailedMetric}
			if !l.Unlimited {
				rpu := l.RequestsPerUnit
				got.RequestsPerUnit, got.Unit = &rpu, unitName(l.Unit)
			}
			if !sameLimit(got, *c.Limit) {
				t.Errorf("%s: got %+v (rpu %v), want %+v (rpu %v)", where, got, deref(got.RequestsPerUnit), *c.Limit, deref(c.Limit.RequestsPerUnit))
			}
			if c.Key != "" {
				if key := string(AppendKey(nil, g.Domain, es, path)); key != c.Key {
					t.Errorf("%s: key %q, want %q", where, key, c.Key)
				}
			}
		}
	}
	if n < 50 {
		t.Fatalf("ran %d cases", n)
	}
}

func flatten(pairs [][]string) []string {
	var out []string
	for _, p := range pairs {
		out = append(out, strings.Join(p, "="))
	}
	return out
}

func deref(p *uint32) any {
	if p == nil {
		return nil
	}
	return *p
}

func sameLimit(a, b wantLimit) bool {
	return deref(a.RequestsPerUnit) == deref(b.RequestsPerUnit) && a.Unit == b.Unit && a.Name == b.Name &&
		a.Unlimited == b.Unlimited && a.StatsKey == b.StatsKey && a.ShadowMode == b.ShadowMode && a.DetailedMetric == b.DetailedMetric
}

// TestEveryFileLoads: the copied configurations that envoyproxy/ratelimit
// accepts load here too (HEAD's example with `metadata` included), and
// every rule they compile to is valid and publishable.
func TestEveryFileLoads(t *testing.T) {
	refused := map[string]bool{}
	var cases []struct{ Files []string }
	readYAML(t, "errors.yaml", &cases)
	for _, c := range cases {
		if len(c.Files) == 1 {
			refused[c.Files[0]] = true
		}
	}
	paths, _ := filepath.Glob(filepath.Join(testdata, "*", "*.yaml"))
	if len(paths) < 35 {
		t.Fatalf("found %d files", len(paths))
	}
	for _, p := range paths {
		rel, _ := filepath.Rel(testdata, p)
		if refused[rel] {
			continue
		}
		cfg, err := loadFiles(t, Options{}, rel)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		if _, err := rules.NewStore(cfg.Defs); err != nil {
			t.Errorf("%s: the rules do not publish: %v", rel, err)
		}
		if len(cfg.Warnings) != 0 {
			t.Errorf("%s: warnings %q", rel, cfg.Warnings)
		}
	}
}

// TestErrors covers every error of the format beyond envoyproxy/ratelimit's
// own tests: type errors in yaml.v2's words, and rlserver's extensions.
func TestErrors(t *testing.T) {
	const head = "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n"
	for _, c := range []struct{ name, src, msg string }{
		{"top level is a list", "- a\n", "error loading config file: yaml: unmarshal errors:\n  line 1: cannot unmarshal !!seq into map[interface {}]interface {}"},
		{"top level is a string", "hello\n", "error loading config file: yaml: unmarshal errors:\n  line 1: cannot unmarshal !!str `hello` into map[interface {}]interface {}"},
		{"bool key", "yes: 1\n", "config error, key is not of type string: true"},
		{"null key", "~: 1\n", "config error, key is not of type string: <nil>"},
		{"float leaf", head + "      unit: second\n      requests_per_unit: 1.5\n", "error checking config"},
		{"timestamp leaf", "domain: 2001-12-14\n", "error checking config"},
		{"uint64 leaf", head + "      unit: second\n      requests_per_unit: 18446744073709551615\n", "error checking config"},
		{"negative requests", head + "      unit: second\n      requests_per_unit: -1\n",
			"error loading config file: yaml: unmarshal errors:\n  line 6: cannot unmarshal !!int `-1` into uint32"},
		{"requests too large for uint32", head + "      unit: second\n      requests_per_unit: 4294967296\n",
			"error loading config file: yaml: unmarshal errors:\n  line 6: cannot unmarshal !!int `4294967296` into uint32"},
		{"quoted requests", head + "      unit: second\n      requests_per_unit: \"10\"\n",
			"error loading config file: yaml: unmarshal errors:\n  line 6: cannot unmarshal !!str `10` into uint32"},
		{"quoted bool", "domain: d\ndescriptors:\n  - key: k\n    shadow_mode: \"true\"\n",
			"error loading config file: yaml: unmarshal errors:\n  line 4: cannot unmarshal !!str `true` into bool"},
		{"domain is a list", "domain: [x]\n", "config error, yaml file contains list of type other than map: x"},
		{"domain is a map", "domain: {}\n", "error loading config file: yaml: unmarshal errors:\n  line 1: cannot unmarshal !!map into string"},
		{"descriptors is a string", "domain: d\ndescriptors: abc\n",
			"error loading config file: yaml: unmarshal errors:\n  line 2: cannot unmarshal !!str `abc` into []config.YamlDescriptor"},
		{"rate_limit is a number", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: 5\n",
			"error loading config file: yaml: unmarshal errors:\n  line 4: cannot unmarshal !!int `5` into config.YamlRateLimit"},
		{"replaces is a string", head + "      unit: second\n      requests_per_unit: 1\n      replaces: x\n",
			"error loading config file: yaml: unmarshal errors:\n  line 7: cannot unmarshal !!str `x` into []config.yamlReplaces"},
		{"missing unit", head + "      requests_per_unit: 1\n", "invalid rate limit unit ''"},
		{"unit unknown", head + "      unit: unknown\n      requests_per_unit: 1\n", "invalid rate limit unit 'unknown'"},
		{"share_threshold without wildcard", "domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n",
			"share_threshold can only be used with wildcard values (ending with '*'), but found key 'k_v'"},
		{"nested duplicate", "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n      - key: b\n",
			"duplicate descriptor composite key 'd.a.b'"},
		// rlserver's extensions.
		{"unit and window", head + "      unit: second\n      window: 5s\n      requests_per_unit: 1\n", "rate_limit: give unit or window, not both"},
		{"bad window", head + "      window: 5 seconds\n      requests_per_unit: 1\n",
			"invalid window '5 seconds': must be a Go duration such as 500ms, 1s, 1m or 24h, from 1ms to 366 days (8784h)"},
		{"window too long", head + "      window: 9000h\n      requests_per_unit: 1\n",
			"invalid window '9000h0m0s': must be a duration from 1ms to 366 days (8784h)"},
		{"window too short", head + "      window: 100us\n      requests_per_unit: 1\n",
			"invalid window '100µs': must be a duration from 1ms to 366 days (8784h)"},
		{"window when unlimited", head + "      unlimited: true\n      window: 1s\n", "should not specify window, algorithm or burst when unlimited"},
		{"algorithm when unlimited", head + "      unlimited: true\n      algorithm: token_bucket\n", "should not specify window, algorithm or burst when unlimited"},
		{"bad algorithm", head + "      unit: second\n      requests_per_unit: 1\n      algorithm: gcra\n",
			"invalid algorithm 'gcra': must be one of token_bucket, leaky_bucket, fixed_window, sliding_log, sliding_counter"},
		{"burst on a window", head + "      unit: second\n      requests_per_unit: 1\n      burst: 5\n",
			"invalid burst '5': only token_bucket and leaky_bucket take a burst"},
		{"burst zero", head + "      unit: second\n      requests_per_unit: 1\n      algorithm: token_bucket\n      burst: 0\n",
			"invalid burst '0': must be an integer from 1 to 1000000000"},
		{"burst drains too slowly", head + "      unit: year\n      requests_per_unit: 1\n      algorithm: token_bucket\n      burst: 1000\n",
			"invalid burst '1000': burst × window / limit (the time to refill the bucket) must be at most 878400h (about 100 years)"},
		{"burst not a number", head + "      unit: second\n      requests_per_unit: 1\n      burst: many\n",
			"error loading config file: yaml: unmarshal errors:\n  line 7: cannot unmarshal !!str `many` into int64"},
		{"limit above rlserver's", head + "      unit: second\n      requests_per_unit: 2000000000\n",
			"invalid requests_per_unit '2000000000': must be an integer from 1 to 1000000000"},
		{"sliding log too large", head + "      unit: second\n      requests_per_unit: 200000\n      algorithm: sliding_log\n",
			"invalid requests_per_unit '200000': sliding_log keeps one entry per admitted unit, so its limit must be at most 100000 (use sliding_counter for larger limits)"},
		{"bad header mode", "domain: d\nresponse_headers: draft04\n", "invalid response_headers 'draft04': must be none, draft03 or draft11"},
		{"misplaced extension", "domain: d\ndescriptors:\n  - key: k\n    algorithm: token_bucket\n",
			"error loading config file: yaml: unmarshal errors:\n  line 4: 'algorithm' belongs in rate_limit, not in a descriptor"},
		{"misplaced domain setting", head + "      unit: second\n      requests_per_unit: 1\n      all_or_nothing: true\n",
			"error loading config file: yaml: unmarshal errors:\n  line 7: 'all_or_nothing' belongs in the top level of a file, not in rate_limit"},
		{"all_or_nothing not a bool", "domain: d\nall_or_nothing: maybe\n",
			"error loading config file: yaml: unmarshal errors:\n  line 2: cannot unmarshal !!str `maybe` into bool"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(c.src), Options{})
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("error %v (%T), want %q", err, err, c.msg)
			}
			if e.Msg != c.msg {
				t.Errorf("error\n got %q\nwant %q", e.Msg, c.msg)
			}
			if e.File != "f.yaml" {
				t.Errorf("file %q", e.File)
			}
		})
	}
}

// TestAliasBomb: nested aliases that would expand to billions of nodes are
// refused after a bounded walk.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n  - &a0 {key: k}\n")
	// Each level is a descriptor whose children are the previous level
	// twice: 2^40 nodes in all.
	for i := 1; i < 40; i++ {
		fmt.Fprintf(&b, "  - &a%d {key: k%d, descriptors: [*a%d, *a%d]}\n", i, i, i-1, i-1)
	}
	start := time.Now()
	_, err := Parse("bomb.yaml", []byte(b.String()), Options{})
	if err == nil || !strings.Contains(err.Error(), "expands to more than") {
		t.Fatalf("err %v", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestYAML1Booleans: yaml.v2's YES/on/off words are booleans where a
// boolean is expected, and strings where a string is.
func TestYAML1Booleans(t *testing.T) {
	c := mustParse(t, "domain: on\ndescriptors:\n  - key: off\n    value: yes\n    shadow_mode: on\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	d := c.Domains["on"]
	if d == nil {
		t.Fatalf("domains %v", c.Domains)
	}
	leaf, _ := d.Match(entries("off", "yes"), nil)
	if leaf == nil || !leaf.ShadowMode {
		t.Fatalf("leaf %+v", leaf)
	}
}

// TestMergeKeys: YAML merge keys work as yaml.v2 applies them, a key
// written in the mapping winning over a merged one.
func TestMergeKeys(t *testing.T) {
	c := mustParse(t, `domain: d
descriptors:
  - key: a
    rate_limit: &base {unit: minute, requests_per_unit: 5}
  - key: b
    rate_limit:
      <<: *base
      requests_per_unit: 7
`)
	leaf, _ := c.Domains["d"].Match(entries("b", "x"), nil)
	if leaf == nil || leaf.Limit.RequestsPerUnit != 7 || leaf.Limit.Unit != UnitMinute {
		t.Fatalf("leaf %+v", leaf.Limit)
	}
}

// TestWarnings: a key of the format in a place where envoyproxy/ratelimit
// ignores it is ignored with a warning (a common mistake: shadow_mode inside
// rate_limit).
func TestWarnings(t *testing.T) {
	c := mustParse(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, shadow_mode: true}\n")
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "key 'shadow_mode' has no effect in rate_limit") || !strings.Contains(c.Warnings[0], "line 4") {
		t.Fatalf("warnings %q", c.Warnings)
	}
	leaf, _ := c.Domains["d"].Match(entries("k", "v"), nil)
	if leaf.ShadowMode {
		t.Fatal("shadow_mode inside rate_limit took effect")
	}
}

// TestExtensions: algorithm, window, burst, all_or_nothing and
// response_headers compile to the rule and settings they name.
func TestExtensions(t *testing.T) {
	c := mustParse(t, `domain: d
all_or_nothing: true
response_headers: draft11
descriptors:
  - key: a
    rate_limit: {algorithm: token_bucket, requests_per_unit: 60, window: 90s, burst: 10}
  - key: b
    rate_limit: {algorithm: sliding_counter, requests_per_unit: 5, unit: week}
  - key: c
    rate_limit: {requests_per_unit: 3, window: 1500ms}
  - key: z
    rate_limit: {requests_per_unit: 0, window: 5m}
`)
	d := c.Domains["d"]
	if !d.AllOrNothing || d.Headers != HeadersDraft11 {
		t.Fatalf("domain %+v", d)
	}
	want := map[string]struct {
		def        rules.Def
		unit       Unit
		multiplier uint32
	}{
		"a": {rules.Def{Algorithm: algorithms.TokenBucket, Limit: 60, Window: 90 * time.Second, Burst: 10}, UnitSecond, 90},
		"b": {rules.Def{Algorithm: algorithms.SlidingCounter, Limit: 5, Window: 7 * 24 * time.Hour}, UnitWeek, 1},
		"c": {rules.Def{Algorithm: algorithms.FixedWindow, Limit: 3, Window: 1500 * time.Millisecond}, UnitUnknown, 0},
	}
	if len(c.Defs) != 3 {
		t.Fatalf("defs %+v", c.Defs)
	}
	for key, w := range want {
		leaf, _ := d.Match(entries(key, "v"), nil)
		l := leaf.Limit
		w.def.Name = l.Rule
		var got rules.Def
		for _, def := range c.Defs {
			if def.Name == l.Rule {
				got = def
			}
		}
		if got != w.def || l.Unit != w.unit || l.Multiplier != w.multiplier {
			t.Errorf("%s: def %+v unit %v×%d, want %+v %v×%d", key, got, l.Unit, l.Multiplier, w.def, w.unit, w.multiplier)
		}
	}
	leaf, _ := d.Match(entries("z", "v"), nil)
	if leaf.Limit.Rule != "" || leaf.Limit.Window != 5*time.Minute || leaf.Limit.Unit != UnitMinute || leaf.Limit.Multiplier != 5 {
		t.Errorf("a limit of 0: %+v", leaf.Limit)
	}
}

// TestRuleNames: a rule's name is valid, depends on where its descriptor
// sits and nothing else, and tells apart paths that "key_value" strings
// would confuse.
func TestRuleNames(t *testing.T) {
	name := func(src string, es ...string) string {
		t.Helper()
		c := mustParse(t, src)
		leaf, _ := c.Domains["d"].Match(entries(es...), nil)
		if leaf == nil {
			t.Fatalf("no match in %s", src)
		}
		return leaf.Limit.Rule
	}
	a := name("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n", "k", "v")
	if a != "envoy:d.k:"+a[len(a)-16:] || len(a) != len("envoy:d.k:")+16 {
		t.Errorf("name %q", a)
	}
	same := name("domain: d\ndescriptors:\n  - key: x\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 99, algorithm: sliding_log}\n", "k", "v")
	if same != a {
		t.Errorf("numbers, algorithm or siblings changed the name: %q vs %q", same, a)
	}
	distinct := map[string]string{}
	for _, c := range []struct{ src, k, v string }{
		{"domain: d\ndescriptors:\n  - key: a_b\n    rate_limit: {unit: second, requests_per_unit: 1}\n", "a_b", ""},
		{"domain: d\ndescriptors:\n  - key: a\n    value: b\n    rate_limit: {unit: second, requests_per_unit: 1}\n", "a", "b"},
		{"domain: d\ndescriptors:\n  - key: a.b\n    rate_limit: {unit: second, requests_per_unit: 1}\n", "a.b", "x"},
		{"domain: d\ndescriptors:\n  - key: a\n    value: b*\n    rate_limit: {unit: second, requests_per_unit: 1}\n", "a", "bb"},
		{"domain: d\ndescriptors:\n  - key: a\n    value: b?\n    rate_limit: {unit: second, requests_per_unit: 1}\n", "a", "b?"},
	} {
		n := name(c.src, c.k, c.v)
		if other, dup := distinct[n]; dup {
			t.Errorf("%q and %q share the name %s", other, c.src, n)
		}
		distinct[n] = c.src
	}
	// The names docs/envoy.md and the package documentation show.
	for want, src := range map[string]string{
		"envoy:rl.remote_address:7c4cb8580f66e84a":         "domain: rl\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: second, requests_per_unit: 10}\n",
		"envoy:rl.path__api__.method_GET:22cdf919bd769ca2": "domain: rl\ndescriptors:\n  - key: path\n    value: /api/*\n    descriptors:\n      - key: method\n        value: GET\n        rate_limit: {unit: second, requests_per_unit: 10}\n",
	} {
		if got := mustParse(t, src).Defs[0].Name; got != want {
			t.Errorf("name %q, documented as %q", got, want)
		}
	}
	long := name("domain: d\ndescriptors:\n  - key: "+strings.Repeat("é", 100)+"\n    rate_limit: {unit: second, requests_per_unit: 1}\n", strings.Repeat("é", 100), "v")
	if err := (rules.Def{Name: long, Algorithm: algorithms.FixedWindow, Limit: 1, Window: time.Second}).Validate(); err != nil || len(long) != 64 {
		t.Errorf("long name %q (%d bytes): %v", long, len(long), err)
	}
}

// TestKeys: the counter key format and its escaping.
func TestKeys(t *testing.T) {
	for _, c := range []struct {
		domain string
		es     []*rlv3.RateLimitDescriptor_Entry
		want   string
	}{
		{"rl", entries("remote_address", "10.0.0.1"), "rl|remote_address=10.0.0.1"},
		{"rl", entries("path", "/a", "method", "GET"), "rl|path=/a|method=GET"},
		{"r|l", entries("a=b", `c\d|e`), `r\|l|a\=b=c\\d\|e`},
		{"rl", entries("k", ""), "rl|k="},
		{"rl", nil, "rl"},
	} {
		if got := string(AppendKey(nil, c.domain, c.es, nil)); got != c.want {
			t.Errorf("AppendKey(%q, %v) = %q, want %q", c.domain, c.es, got, c.want)
		}
	}
	// Escaping keeps keys apart that plain joining would merge.
	a := AppendKey(nil, "d", entries("a", "b|c=d"), nil)
	b := AppendKey(nil, "d", entries("a", "b", "c", "d"), nil)
	if string(a) == string(b) {
		t.Errorf("both %q", a)
	}
}

// TestUnitOf: windows are expressed in the largest unit dividing them.
func TestUnitOf(t *testing.T) {
	day := 24 * time.Hour
	for _, c := range []struct {
		w    time.Duration
		u    Unit
		mult uint32
	}{
		{time.Second, UnitSecond, 1}, {90 * time.Second, UnitSecond, 90}, {5 * time.Minute, UnitMinute, 5},
		{time.Hour, UnitHour, 1}, {36 * time.Hour, UnitHour, 36}, {2 * day, UnitDay, 2}, {14 * day, UnitWeek, 2},
		{30 * day, UnitMonth, 1}, {365 * day, UnitYear, 1}, {366 * day, UnitDay, 366},
		{1500 * time.Millisecond, UnitUnknown, 0}, {time.Millisecond, UnitUnknown, 0},
	} {
		if u, m := UnitOf(c.w); u != c.u || m != c.mult {
			t.Errorf("UnitOf(%v) = %v×%d, want %v×%d", c.w, u, m, c.u, c.mult)
		}
	}
}

// TestOverrideDef: a request's own limit becomes a fixed-window rule named
// after its numbers, or an error when no rule can hold it.
func TestOverrideDef(t *testing.T) {
	d, err := OverrideDef(Override{RequestsPerUnit: 3, Unit: UnitMinute, Multiplier: 1})
	if err != nil || d != (rules.Def{Name: "envoy:override:3:MINUTE", Algorithm: algorithms.FixedWindow, Limit: 3, Window: time.Minute}) {
		t.Errorf("def %+v, %v", d, err)
	}
	d, err = OverrideDef(Override{RequestsPerUnit: 3, Unit: UnitMinute, Multiplier: 5})
	if err != nil || d.Name != "envoy:override:3:5xMINUTE" || d.Window != 5*time.Minute || d.Validate() != nil {
		t.Errorf("def %+v, %v", d, err)
	}
	for _, o := range []Override{
		{RequestsPerUnit: 1, Unit: UnitUnknown, Multiplier: 1},
		{RequestsPerUnit: 1, Unit: UnitWeek, Multiplier: 1},
		{RequestsPerUnit: 1, Unit: UnitSecond, Multiplier: 0},
		{RequestsPerUnit: 0, Unit: UnitSecond, Multiplier: 1},
		{RequestsPerUnit: 2_000_000_000, Unit: UnitSecond, Multiplier: 1},
		{RequestsPerUnit: 1, Unit: UnitYear, Multiplier: 2},
		{RequestsPerUnit: 1, Unit: UnitYear, Multiplier: 4_000_000_000},
	} {
		if d, err := OverrideDef(o); err == nil {
			t.Errorf("OverrideDef(%+v) = %+v, want an error", o, d)
		}
	}
}

// TestParseOverrideName: every override's rule name reads back as the
// override; no other name does.
func TestParseOverrideName(t *testing.T) {
	for _, u := range []Unit{UnitSecond, UnitMinute, UnitHour, UnitDay, UnitMonth, UnitYear} {
		for _, o := range []Override{{RequestsPerUnit: 1, Unit: u, Multiplier: 1}, {RequestsPerUnit: 70, Unit: u, Multiplier: 1}} {
			if u < UnitYear {
				o2 := o
				o2.Multiplier = 3
				checkOverrideName(t, o2)
			}
			checkOverrideName(t, o)
		}
	}
	for _, name := range []string{
		"envoy:override:3:minute", "envoy:override:03:MINUTE", "envoy:override:3:1xMINUTE",
		"envoy:override:3:WEEK", "envoy:override:0:SECOND", "envoy:override:3:2xYEAR",
		"envoy:override:3", "envoy:override:-3:SECOND", "envoy:override:3:xSECOND",
		"envoy:other:3:SECOND", "override:3:SECOND", "",
	} {
		if o, ok := ParseOverrideName(name); ok {
			t.Errorf("ParseOverrideName(%q) = %+v, want false", name, o)
		}
	}
}

func checkOverrideName(t *testing.T, o Override) {
	t.Helper()
	d, err := OverrideDef(o)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := ParseOverrideName(d.Name); !ok || got != o {
		t.Errorf("ParseOverrideName(%q) = %+v %v, want %+v", d.Name, got, ok, o)
	}
}

// TestMergeDomains: with MergeDomains the files of one domain add up; they
// must agree on the domain's settings.
func TestMergeDomains(t *testing.T) {
	c, err := loadFiles(t, Options{MergeDomains: true}, "config/merge_domain_key1.yaml", "config/merge_domain_key2.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := c.Domains["test-domain"]
	for _, e := range [][]string{{"key1", "value1"}, {"key2", "value2"}} {
		if leaf, _ := d.Match(entries(e...), nil); leaf == nil {
			t.Errorf("%v: no limit", e)
		}
	}
	_, err = Build([]File{{"a", []byte("domain: d\n")}, {"b", []byte("domain: d\nall_or_nothing: true\n")}}, Options{MergeDomains: true})
	if err == nil || !strings.Contains(err.Error(), "disagree") {
		t.Errorf("err %v", err)
	}
}

// TestLoadDirectory: a directory's files are read in order, dot entries
// skipped, links followed; a ConfigMap volume loads each file once.
func TestLoadDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The layout kubelet writes for a ConfigMap volume.
	write("..2026_01_01_00_00_00.1/a.yaml", "domain: a\n")
	write("..2026_01_01_00_00_00.1/b.yaml", "domain: b\n")
	if err := os.Symlink("..2026_01_01_00_00_00.1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a.yaml", "b.yaml"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	write("sub/c.yaml", "domain: c\n")
	write(".hidden.yaml", "not: loaded\n")
	c, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Domains) != 3 || len(c.Files) != 3 || filepath.Base(c.Files[2]) != "c.yaml" {
		t.Fatalf("domains %v files %v", c.Domains, c.Files)
	}
	if _, err := Load(filepath.Join(dir, "missing"), Options{}); err == nil {
		t.Error("a missing path loaded")
	}
	one, err := Load(filepath.Join(dir, "a.yaml"), Options{})
	if err != nil || len(one.Domains) != 1 {
		t.Errorf("one file: %v %v", one, err)
	}
}
