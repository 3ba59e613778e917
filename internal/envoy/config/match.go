package config

import (
	"strings"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// Matching. A request descriptor is a list of entries (key, value); the
// configuration is a tree whose levels hold descriptors. Entry i is looked
// up among the children of the node entry i-1 matched (the domain's top
// level for entry 0), and the first of these wins:
//
//  1. exact: a descriptor with the entry's key and exactly its value;
//  2. wildcard: a descriptor with the entry's key whose value ends in '*'
//     and whose prefix (the value without the '*') the entry's value starts
//     with — the first such descriptor in file order, not the longest
//     ("x*" listed before "xy*" wins for "xyz"); "*" matches every value,
//     the empty one included;
//  3. key only: a descriptor with the entry's key and no value.
//
// A limit applies only when the request descriptor ends exactly at a
// descriptor that has one: a limit at depth 1 does not apply to a request
// of two entries, nor a depth-2 limit to a request of one. There is no
// backtracking: once entry i matched a descriptor, entry i+1 is looked for
// under it alone, even if a less specific sibling would have matched the
// rest. This is envoyproxy/ratelimit's GetLimit, with one difference: it
// compares "key_value" strings, so a configured key "a_b" also matches the
// request entry (a, b); here keys and values are compared as the pairs they
// are. A value with a '*' elsewhere than at the end is a literal value, as
// in envoyproxy/ratelimit 3fb7025.

// Match returns the descriptor whose limit applies to entries, or nil if
// none does. The descriptor matched at each level is appended to path[:0],
// which is returned: the counter key and the metrics need them. Match does
// not allocate when path has room for len(entries) nodes.
func (d *Domain) Match(entries []*rlv3.RateLimitDescriptor_Entry, path []*Node) (*Node, []*Node) {
	path = path[:0]
	lvl := &d.root
	for i, e := range entries {
		n := lvl.find(e.GetKey(), e.GetValue())
		if n == nil {
			return nil, path
		}
		path = append(path, n)
		if i == len(entries)-1 {
			if n.Limit != nil {
				return n, path
			}
			return nil, path
		}
		lvl = &n.children
	}
	return nil, path
}

func (l *level) find(key, value string) *Node {
	if n := l.exact[entryKey{key, value}]; n != nil {
		return n
	}
	for _, n := range l.wildcard[key] {
		if strings.HasPrefix(value, n.Prefix) {
			return n
		}
	}
	return l.keyOnly[key]
}

// Walk calls fn for every descriptor of the domain, parents before their
// children, in file order.
func (d *Domain) Walk(fn func(*Node)) { d.root.walk(fn) }

func (l *level) walk(fn func(*Node)) {
	for _, n := range l.all {
		fn(n)
		n.children.walk(fn)
	}
}
