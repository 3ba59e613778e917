package httplimit

import (
	"net/http"
	"net/netip"
	"strings"
)

// ipConfig is how a request's client address is found.
type ipConfig struct {
	trusted   []netip.Prefix
	header    string // canonical header name
	forwarded bool   // RFC 7239 Forwarded rather than X-Forwarded-For
	v6bits    int    // leading bits of an IPv6 address that key it
}

// clientIP returns the address a request is keyed by, false if there is
// none (the peer is not an IP address, e.g. a Unix socket).
//
// The peer (the connection's remote address) is the client unless it is a
// trusted proxy. Then the forwarding header, read from the right (the
// entry the nearest proxy added) to the left, names each earlier hop; the
// first one that is not a trusted proxy is the client. Everything to its
// left was written by the client itself and is ignored, so sending a
// forged header from an untrusted peer changes nothing, and through a
// trusted proxy it only adds entries left of the real one. If every hop is
// trusted, the left-most is the client; an entry that cannot be read ends
// the walk at the last trusted hop.
func (c *ipConfig) clientIP(r *http.Request) (netip.Addr, bool) {
	peer, ok := parseHostPort(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, false
	}
	if c.isTrusted(peer) {
		peer = c.fromHeader(r.Header[c.header], peer)
	}
	return c.mask(peer), true
}

func (c *ipConfig) isTrusted(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// fromHeader walks the header's lines and entries from the right, as
// clientIP describes. last is the nearest trusted hop so far.
func (c *ipConfig) fromHeader(lines []string, last netip.Addr) netip.Addr {
	for i := len(lines) - 1; i >= 0; i-- {
		v := lines[i]
		for {
			j := strings.LastIndexByte(v, ',')
			item := v[j+1:]
			var a netip.Addr
			var ok bool
			if c.forwarded {
				a, ok = forwardedFor(item)
			} else {
				a, ok = parseHostPort(strings.TrimSpace(item))
			}
			if !ok {
				return last
			}
			if !c.isTrusted(a) {
				return a
			}
			last = a
			if j < 0 {
				break
			}
			v = v[:j]
		}
	}
	return last
}

// mask keeps an IPv6 address's first v6bits bits.
func (c *ipConfig) mask(a netip.Addr) netip.Addr {
	if a.Is6() && c.v6bits < 128 {
		p, err := a.Prefix(c.v6bits)
		if err == nil {
			return p.Addr()
		}
	}
	return a
}

// parseHostPort reads "1.2.3.4", "1.2.3.4:80", "::1", "[::1]" or
// "[::1]:80", as RemoteAddr and forwarding headers write addresses. An
// IPv4-mapped IPv6 address is its IPv4 address, and a zone is dropped.
func parseHostPort(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// forwardedFor reads the for= parameter of one Forwarded element
// (RFC 7239: for=192.0.2.60;proto=http, for="[2001:db8::17]:4711"). An
// element without one, or with an obfuscated or "unknown" identifier, has
// no address.
func forwardedFor(element string) (netip.Addr, bool) {
	for element != "" {
		param := element
		if j := strings.IndexByte(element, ';'); j >= 0 {
			param, element = element[:j], element[j+1:]
		} else {
			element = ""
		}
		param = strings.TrimSpace(param)
		if len(param) < 4 || !strings.EqualFold(param[:4], "for=") {
			continue
		}
		v := param[4:]
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		return parseHostPort(v)
	}
	return netip.Addr{}, false
}
