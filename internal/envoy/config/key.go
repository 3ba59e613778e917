package config

import (
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// Counter keys. A request descriptor is decided on the key
//
//	<domain>|<key1>=<value1>|<key2>=<value2>…
//
// with every entry of the request descriptor in order, under the rule its
// limit compiled to — the same (key, rule) pair RESP's RL.PEEK <key> <rule>
// reads, e.g. RL.PEEK 'rl|remote_address=10.0.0.1'
// 'envoy:rl.remote_address:7c4cb8580f66e84a'. Values are the request's
// (a key-only or wildcard descriptor counts each value apart), except at a
// level matched by a wildcard with share_threshold, where the pattern as
// written replaces the value ("files=files/*"), so every value it matches
// shares one counter. A backslash, '|' or '=' inside the domain, a key or a
// value is preceded by a backslash, so distinct descriptors never share a
// key. The window is not part of the key (the rule owns time), so unlike
// envoyproxy/ratelimit's Redis keys a key lives across windows and a
// changed limit keeps the count already spent.

// AppendKey appends the counter key of entries in domain to dst and returns
// it. path holds the descriptors Match matched, one per entry, or is nil
// for a request's own limit (the values are then the request's).
func AppendKey(dst []byte, domain string, entries []*rlv3.RateLimitDescriptor_Entry, path []*Node) []byte {
	dst = appendEscaped(dst, domain)
	for i, e := range entries {
		dst = append(dst, '|')
		dst = appendEscaped(dst, e.GetKey())
		dst = append(dst, '=')
		value := e.GetValue()
		if i < len(path) && path[i].ShareThreshold && path[i].Wildcard {
			value = path[i].Value
		}
		dst = appendEscaped(dst, value)
	}
	return dst
}

func appendEscaped(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', '|', '=':
			dst = append(dst, '\\', c)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}
