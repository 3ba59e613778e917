package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// HeaderStyle selects the response fields SetHeaders writes; combine with |.
type HeaderStyle uint8

const (
	// DraftHeaders writes the RateLimit-Policy and RateLimit fields of
	// draft-ietf-httpapi-ratelimit-headers-11, one list item per decision:
	//
	//	RateLimit-Policy: "burst";q=100;w=60
	//	RateLimit: "burst";r=50;t=30
	//
	// The item's name is the decision's Rule; q is Limit and w is Window
	// in seconds (left out when Window is unknown or not a whole number of
	// seconds); r is Remaining, and t is the seconds until the key is full
	// again (ResetAfter) or, when denied, the Retry-After figure, so that
	// Retry-After never points earlier than the end of t.
	DraftHeaders HeaderStyle = 1 << iota
	// LegacyHeaders writes X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset for the decision that binds (the denied one with
	// the longest wait, else the one with the fewest remaining). Reset is
	// the same seconds as the draft's t, as a delta from now.
	LegacyHeaders
	// UnixReset, with LegacyHeaders, writes X-RateLimit-Reset as a Unix
	// time in seconds (now + the delta) instead.
	UnixReset
)

// Headers returns the fields a client of an HTTP API reads for d:
// the draft's RateLimit-Policy and RateLimit, the legacy X-RateLimit-*
// (delta seconds), and, when d denied, Retry-After. Copy them onto a
// response with e.g. maps.Copy(w.Header(), d.Headers()).
func (d Decision) Headers() http.Header {
	h := make(http.Header, 6)
	SetHeaders(h, DraftHeaders|LegacyHeaders, time.Now(), d)
	return h
}

// SetHeaders sets on h the fields style selects for the decisions that
// applied to one request, and Retry-After when any of them denied: whole
// seconds, rounded up and never 0 (max(1, ⌈RetryAfter⌉) of the longest
// wait among the denied). now is used only for UnixReset. It allocates
// twice whatever it writes: the values share one string and one slice.
func SetHeaders(h http.Header, style HeaderStyle, now time.Time, ds ...Decision) {
	if len(ds) == 0 {
		return
	}
	// The values are written into one buffer and set as substrings of one
	// string, with one slice of values between them.
	var stack [256]byte
	b := stack[:0]
	var keys [6]string // canonical names
	var ends [6]int    // where each value ends in b
	n := 0
	end := func(key string) {
		keys[n], ends[n] = key, len(b)
		n++
	}
	if style&DraftHeaders != 0 {
		for i, d := range ds {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendSFString(b, policyName(d.Rule))
			b = append(b, ";q="...)
			b = strconv.AppendInt(b, d.Limit, 10)
			if d.Window > 0 && d.Window%time.Second == 0 {
				b = append(b, ";w="...)
				b = strconv.AppendInt(b, int64(d.Window/time.Second), 10)
			}
		}
		end("Ratelimit-Policy")
		for i, d := range ds {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendSFString(b, policyName(d.Rule))
			b = append(b, ";r="...)
			b = strconv.AppendInt(b, d.Remaining, 10)
			b = append(b, ";t="...)
			b = strconv.AppendInt(b, windowSeconds(d), 10)
		}
		end("Ratelimit")
	}
	bind := binding(ds)
	if style&LegacyHeaders != 0 {
		reset := windowSeconds(bind)
		if style&UnixReset != 0 {
			reset += now.Unix()
		}
		b = strconv.AppendInt(b, bind.Limit, 10)
		end("X-Ratelimit-Limit")
		b = strconv.AppendInt(b, bind.Remaining, 10)
		end("X-Ratelimit-Remaining")
		b = strconv.AppendInt(b, reset, 10)
		end("X-Ratelimit-Reset")
	}
	if !bind.Allowed {
		b = strconv.AppendInt(b, RetryAfterSeconds(bind.RetryAfter), 10)
		end("Retry-After")
	}
	if n == 0 {
		return
	}
	all := string(b)
	vals := make([]string, n)
	start := 0
	for i := range n {
		vals[i] = all[start:ends[i]]
		h[keys[i]] = vals[i : i+1 : i+1]
		start = ends[i]
	}
}

// RetryAfterSeconds is the Retry-After value for a wait: whole seconds,
// rounded up, and at least 1 (a 0 would invite an immediate retry that is
// denied again).
func RetryAfterSeconds(wait time.Duration) int64 {
	return max(1, ceilSeconds(wait))
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// windowSeconds is the draft's t for d: the seconds within which the
// client can use no more than Remaining.
func windowSeconds(d Decision) int64 {
	if !d.Allowed {
		return RetryAfterSeconds(d.RetryAfter)
	}
	return ceilSeconds(d.ResetAfter)
}

// binding picks the decision the legacy fields and Retry-After describe:
// among denied decisions the one with the longest wait, else the one with
// the fewest units remaining (the first on ties).
func binding(ds []Decision) Decision {
	best := -1
	for i, d := range ds {
		if !d.Allowed && (best < 0 || d.RetryAfter > ds[best].RetryAfter) {
			best = i
		}
	}
	if best >= 0 {
		return ds[best]
	}
	best = 0
	for i, d := range ds {
		if d.Remaining < ds[best].Remaining {
			best = i
		}
	}
	return ds[best]
}

func policyName(rule string) string {
	if rule == "" {
		return "default"
	}
	return rule
}

// appendSFString appends s as a Structured Field String (RFC 9651): in
// double quotes, with " and \ escaped. A String holds printable ASCII only;
// any other byte is replaced by '?' (rule names never contain one).
func appendSFString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '?')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// problemType is the RFC 9457 problem type the draft registers for a
// request refused because a quota is exhausted.
const problemType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// Problem is an RFC 9457 problem details object for a refused request,
// with the draft's violated-policies member and the wait in whole seconds.
type Problem struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies"`
	RetryAfter       int64    `json:"retry-after,omitempty"`
}

// QuotaExceeded returns the problem for a denial: the draft's
// quota-exceeded type, status 429, the denied rules in violated-policies
// and the wait in retry-after (whole seconds, as Retry-After). ds are the
// decisions that applied to the request; only the denied ones are named.
func QuotaExceeded(ds ...Decision) Problem {
	names := []string{}
	for _, d := range ds {
		if !d.Allowed {
			names = append(names, policyName(d.Rule))
		}
	}
	wait := RetryAfterSeconds(binding(ds).RetryAfter)
	return Problem{
		Type:             problemType,
		Title:            "Quota Exceeded",
		Status:           http.StatusTooManyRequests,
		Detail:           fmt.Sprintf("rate limit exceeded for %s; retry after %d s", strings.Join(names, ", "), wait),
		ViolatedPolicies: names,
		RetryAfter:       wait,
	}
}

// JSON returns p as an application/problem+json body, newline-terminated.
func (p Problem) JSON() []byte {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // strings and integers always marshal
	}
	return append(b, '\n')
}
