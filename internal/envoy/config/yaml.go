package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rlserver/rlserver/internal/yamldoc"
)

// envoyproxy/ratelimit reads its files with gopkg.in/yaml.v2 in two passes:
// every key anywhere must be one of a fixed set, and every leaf a string, an
// integer, a boolean or null; then the document is decoded into its structs,
// type mismatches collected as "line N: cannot unmarshal …" errors. This
// file reproduces both passes over a go.yaml.in/yaml/v3 node tree, with
// yaml.v2's scalar rules where they differ from v3's (yes/no/on/off/y/n are
// booleans), so the same files pass and fail with the same words.

// validKeys are the keys a file may use, anywhere: envoyproxy/ratelimit's
// set, the `metadata` of its later versions, and rlserver's extensions.
var validKeys = map[string]bool{
	"domain": true, "key": true, "value": true, "descriptors": true, "rate_limit": true,
	"unit": true, "requests_per_unit": true, "unlimited": true, "shadow_mode": true,
	"quota_mode": true, "name": true, "replaces": true, "detailed_metric": true,
	"value_to_metric": true, "share_threshold": true,
	"metadata": true,
	// rlserver's extensions.
	"algorithm": true, "window": true, "burst": true, "all_or_nothing": true, "response_headers": true,
}

// extensionKeys are rlserver's own keys: misplaced, they are errors (no
// existing file can hold them), where a misplaced key of the original
// format is only a warning, as envoyproxy/ratelimit ignores it.
var extensionKeys = map[string]string{
	"algorithm": "rate_limit", "window": "rate_limit", "burst": "rate_limit",
	"all_or_nothing": "the top level of a file", "response_headers": "the top level of a file",
}

// maxNodes bounds the nodes one file may expand to through aliases, so a
// small file of nested aliases cannot make the loader walk billions of
// nodes.
const maxNodes = 1 << 20

// The documents' shapes, as decoded.
type (
	yamlRoot struct {
		domain          string
		line            int
		descriptors     []yamlDescriptor
		allOrNothing    bool
		responseHeaders string
		headersLine     int
	}
	yamlDescriptor struct {
		key, value     string
		line           int
		rateLimit      *yamlRateLimit
		descriptors    []yamlDescriptor
		shadowMode     bool
		quotaMode      bool
		detailedMetric bool
		valueToMetric  bool
		shareThreshold bool
	}
	yamlRateLimit struct {
		line            int
		requestsPerUnit uint32
		unit            string
		unlimited       bool
		name            string
		replaces        []string
		algorithm       string
		window          string
		windowLine      int
		burst           int64
		burstSet        bool
	}
)

// decoder decodes one file.
type decoder struct {
	file     string
	nodes    int      // nodes visited, bounded by maxNodes
	terrors  []string // type mismatches, as yaml.v2 words them
	warnings []string
}

// errTooLarge aborts a walk that expanded too many nodes.
type errTooLarge struct{}

// parseFile decodes one file's bytes into its root, running the same checks,
// in the same order, as envoyproxy/ratelimit.
func parseFile(file string, data []byte) (*yamlRoot, []string, error) {
	d := &decoder{file: file}
	top, err := yamldoc.Parse(data)
	if err != nil {
		return nil, nil, errorAt(file, 0, "error loading config file: yaml: %s", err)
	}
	var root *yamlRoot
	walkErr := d.guard(func() error {
		top = d.deref(top)
		if top != nil && top.Kind != yaml.MappingNode && !isNull(top) {
			d.terror(top, "map[interface {}]interface {}")
			return d.typeErrors()
		}
		if err := d.validate(top); err != nil {
			return err
		}
		root = d.root(top)
		return d.typeErrors()
	})
	if walkErr != nil {
		return nil, nil, walkErr
	}
	return root, d.warnings, nil
}

// guard runs f, turning the walk's abort on too many nodes into an error.
func (d *decoder) guard(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(errTooLarge); !ok {
				panic(r)
			}
			err = errorAt(d.file, 0, "error loading config file: the document expands to more than %d nodes (through aliases)", maxNodes)
		}
	}()
	return f()
}

// deref follows aliases and counts the node against the budget.
func (d *decoder) deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	d.nodes++
	if d.nodes > maxNodes {
		panic(errTooLarge{})
	}
	return n
}

type pair struct{ key, value *yaml.Node }

// pairs returns a mapping's key value pairs, with merge keys (<<) expanded
// as yaml.v2 expands them: a key written in the mapping wins over a merged
// one.
func (d *decoder) pairs(m *yaml.Node) []pair {
	var out, merged []pair
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			v = d.deref(v)
			switch v.Kind {
			case yaml.MappingNode:
				merged = append(merged, d.pairs(v)...)
			case yaml.SequenceNode:
				for _, item := range v.Content {
					if item = d.deref(item); item.Kind == yaml.MappingNode {
						merged = append(merged, d.pairs(item)...)
					}
				}
			}
			continue
		}
		out = append(out, pair{k, v})
	}
	for _, p := range merged {
		name, _, _ := d.keyString(p.key)
		written := false
		for _, q := range out {
			if n, _, _ := d.keyString(q.key); n == name {
				written = true
				break
			}
		}
		if !written {
			out = append(out, p)
		}
	}
	return out
}

// validate is the first pass: every key known and a string, every list a
// list of maps, every leaf a string, integer, boolean or null. The
// contents of `metadata` are free-form and skipped.
func (d *decoder) validate(n *yaml.Node) error {
	n = d.deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for _, p := range d.pairs(n) {
		k, ok, shown := d.keyString(p.key)
		if !ok {
			return errorAt(d.file, p.key.Line, "config error, key is not of type string: %s", shown)
		}
		if !validKeys[k] {
			return errorAt(d.file, p.key.Line, "config error, unknown key '%s'", k)
		}
		if k == "metadata" {
			continue
		}
		v := d.deref(p.value)
		switch v.Kind {
		case yaml.SequenceNode:
			for _, item := range v.Content {
				item = d.deref(item)
				if item.Kind != yaml.MappingNode {
					return errorAt(d.file, item.Line, "config error, yaml file contains list of type other than map: %s", d.show(item, 200))
				}
				if err := d.validate(item); err != nil {
					return err
				}
			}
		case yaml.MappingNode:
			if err := d.validate(v); err != nil {
				return err
			}
		case yaml.ScalarNode:
			switch tag := d.tag(v); tag {
			case "!!str", "!!bool", "!!null":
			case "!!int":
				if _, err := parseInt(v.Value); err != nil {
					return errorAt(d.file, v.Line, "error checking config")
				}
			default:
				return errorAt(d.file, v.Line, "error checking config")
			}
		}
	}
	return nil
}

// tag resolves a scalar as yaml.v2 would: v3's resolution, except that an
// unquoted YAML 1.1 boolean word is a boolean.
func (d *decoder) tag(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.Style == 0 { // plain: neither quoted nor explicitly tagged
		if _, ok := v2Bool(n.Value); ok {
			return "!!bool"
		}
	}
	return n.ShortTag()
}

// v2Bool reads yaml.v2's boolean words.
func v2Bool(s string) (value, ok bool) {
	switch s {
	case "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON":
		return true, true
	case "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF":
		return false, true
	}
	return false, false
}

// parseInt reads an integer as yaml.v2 does (underscores allowed, 0x, 0o,
// 0b and leading-0 octal prefixes) into an int64; a value only a uint64
// holds is an error, as yaml.v2 decodes it to a type envoyproxy/ratelimit
// rejects.
func parseInt(s string) (int64, error) {
	return strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 0, 64)
}

// keyString returns a mapping key as a string, whether it is one (as
// yaml.v2 would type it), and how yaml.v2 would print it otherwise.
func (d *decoder) keyString(k *yaml.Node) (string, bool, string) {
	k = d.deref(k)
	if k.Kind != yaml.ScalarNode {
		return "", false, d.show(k, 200)
	}
	switch d.tag(k) {
	case "!!str":
		return k.Value, true, k.Value
	case "!!bool":
		b, _ := v2Bool(k.Value)
		return "", false, strconv.FormatBool(b)
	case "!!null":
		return "", false, "<nil>"
	}
	return "", false, k.Value
}

// show renders a node roughly as Go's %v prints what yaml.v2 decoded it
// to, cut at max bytes.
func (d *decoder) show(n *yaml.Node, max int) string {
	var b strings.Builder
	var render func(n *yaml.Node)
	render = func(n *yaml.Node) {
		if b.Len() > max {
			return
		}
		n = d.deref(n)
		switch n.Kind {
		case yaml.ScalarNode:
			if d.tag(n) == "!!null" {
				b.WriteString("<nil>")
			} else {
				b.WriteString(n.Value)
			}
		case yaml.SequenceNode:
			b.WriteByte('[')
			for i, c := range n.Content {
				if i > 0 {
					b.WriteByte(' ')
				}
				render(c)
			}
			b.WriteByte(']')
		case yaml.MappingNode:
			b.WriteString("map[")
			for i := 0; i+1 < len(n.Content); i += 2 {
				if i > 0 {
					b.WriteByte(' ')
				}
				render(n.Content[i])
				b.WriteByte(':')
				render(n.Content[i+1])
			}
			b.WriteByte(']')
		}
	}
	render(n)
	s := b.String()
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// terror records a type mismatch in yaml.v2's words.
func (d *decoder) terror(n *yaml.Node, into string) {
	tag := d.tag(n)
	value := ""
	if n.Kind == yaml.ScalarNode {
		if len(n.Value) > 10 {
			value = " `" + n.Value[:7] + "...`"
		} else {
			value = " `" + n.Value + "`"
		}
	}
	d.terrors = append(d.terrors, fmt.Sprintf("line %d: cannot unmarshal %s%s into %s", n.Line, tag, value, into))
}

func (d *decoder) typeErrors() error {
	if len(d.terrors) == 0 {
		return nil
	}
	return errorAt(d.file, 0, "error loading config file: yaml: unmarshal errors:\n  %s", strings.Join(d.terrors, "\n  "))
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// fields walks a mapping's pairs for one struct of the format: set handles
// the keys the struct has; a valid key it does not have is ignored with a
// warning (as yaml.v2 ignores it), unless it is one of rlserver's own keys,
// which must be in their place.
func (d *decoder) fields(m *yaml.Node, where string, set func(k string, v *yaml.Node) bool) {
	for _, p := range d.pairs(m) {
		k, _, _ := d.keyString(p.key)
		if set(k, d.deref(p.value)) {
			continue
		}
		if place, ok := extensionKeys[k]; ok {
			d.terrors = append(d.terrors, fmt.Sprintf("line %d: '%s' belongs in %s, not in %s", p.key.Line, k, place, where))
			continue
		}
		d.warnings = append(d.warnings, fmt.Sprintf("%s: line %d: key '%s' has no effect in %s (envoyproxy/ratelimit ignores it there too)", d.file, p.key.Line, k, where))
	}
}

func (d *decoder) root(n *yaml.Node) *yamlRoot {
	r := &yamlRoot{}
	if n == nil || isNull(n) {
		return r
	}
	r.line = n.Line
	d.fields(n, "the top level", func(k string, v *yaml.Node) bool {
		switch k {
		case "domain":
			r.domain = d.str(v)
			r.line = v.Line
		case "descriptors":
			r.descriptors = d.descriptors(v)
		case "all_or_nothing":
			r.allOrNothing = d.bool(v)
		case "response_headers":
			r.responseHeaders = d.str(v)
			r.headersLine = v.Line
		default:
			return false
		}
		return true
	})
	return r
}

func (d *decoder) descriptors(n *yaml.Node) []yamlDescriptor {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		d.terror(n, "[]config.YamlDescriptor")
		return nil
	}
	out := make([]yamlDescriptor, 0, len(n.Content))
	for _, item := range n.Content {
		item = d.deref(item)
		if item.Kind != yaml.MappingNode { // validate has refused it already
			d.terror(item, "config.YamlDescriptor")
			continue
		}
		out = append(out, d.descriptor(item))
	}
	return out
}

func (d *decoder) descriptor(n *yaml.Node) yamlDescriptor {
	desc := yamlDescriptor{line: n.Line}
	d.fields(n, "a descriptor", func(k string, v *yaml.Node) bool {
		switch k {
		case "key":
			desc.key = d.str(v)
		case "value":
			desc.value = d.str(v)
		case "rate_limit":
			desc.rateLimit = d.rateLimit(v)
		case "descriptors":
			desc.descriptors = d.descriptors(v)
		case "shadow_mode":
			desc.shadowMode = d.bool(v)
		case "quota_mode":
			desc.quotaMode = d.bool(v)
		case "detailed_metric":
			desc.detailedMetric = d.bool(v)
		case "value_to_metric":
			desc.valueToMetric = d.bool(v)
		case "share_threshold":
			desc.shareThreshold = d.bool(v)
		case "metadata": // envoyproxy/ratelimit after 3fb7025: returned as dynamic metadata; rlserver ignores it
		default:
			return false
		}
		return true
	})
	return desc
}

func (d *decoder) rateLimit(n *yaml.Node) *yamlRateLimit {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		d.terror(n, "config.YamlRateLimit")
		return nil
	}
	rl := &yamlRateLimit{line: n.Line}
	d.fields(n, "rate_limit", func(k string, v *yaml.Node) bool {
		switch k {
		case "requests_per_unit":
			rl.requestsPerUnit = d.uint32(v)
		case "unit":
			rl.unit = d.str(v)
		case "unlimited":
			rl.unlimited = d.bool(v)
		case "name":
			rl.name = d.str(v)
		case "replaces":
			rl.replaces = d.replaces(v)
		case "algorithm":
			rl.algorithm = d.str(v)
		case "window":
			rl.window = d.str(v)
			rl.windowLine = v.Line
		case "burst":
			rl.burst, rl.burstSet = d.int64(v), !isNull(v)
		default:
			return false
		}
		return true
	})
	return rl
}

func (d *decoder) replaces(n *yaml.Node) []string {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		d.terror(n, "[]config.yamlReplaces")
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for _, item := range n.Content {
		item = d.deref(item)
		if item.Kind != yaml.MappingNode {
			d.terror(item, "config.yamlReplaces")
			continue
		}
		name := ""
		d.fields(item, "a replaces entry", func(k string, v *yaml.Node) bool {
			if k != "name" {
				return false
			}
			name = d.str(v)
			return true
		})
		out = append(out, name)
	}
	return out
}

// str decodes a string as yaml.v2 does: any scalar's text as written; null
// is "".
func (d *decoder) str(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		d.terror(n, "string")
		return ""
	}
	if d.tag(n) == "!!null" {
		return ""
	}
	return n.Value
}

func (d *decoder) bool(n *yaml.Node) bool {
	if n.Kind == yaml.ScalarNode {
		switch d.tag(n) {
		case "!!null":
			return false
		case "!!bool":
			if b, ok := v2Bool(n.Value); ok {
				return b
			}
		}
	}
	d.terror(n, "bool")
	return false
}

func (d *decoder) uint32(n *yaml.Node) uint32 {
	if n.Kind == yaml.ScalarNode {
		switch d.tag(n) {
		case "!!null":
			return 0
		case "!!int":
			if v, err := parseInt(n.Value); err == nil && v >= 0 && v <= math.MaxUint32 {
				return uint32(v)
			}
		}
	}
	d.terror(n, "uint32")
	return 0
}

func (d *decoder) int64(n *yaml.Node) int64 {
	if n.Kind == yaml.ScalarNode {
		switch d.tag(n) {
		case "!!null":
			return 0
		case "!!int":
			if v, err := parseInt(n.Value); err == nil {
				return v
			}
		}
	}
	d.terror(n, "int64")
	return 0
}
