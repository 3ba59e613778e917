package envoy

import (
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/rlserver/rlserver/internal/envoy/config"
)

// headers returns the response_headers_to_add of a domain's header mode,
// computed from the finished statuses: Envoy adds them to the upstream
// response when the call is OK and to its 429 when it is not. Names are
// lower case, as HTTP/2 sends them. With no status carrying a limit there
// is nothing to describe and no header is added.
//
// draft03 reproduces Envoy's own enable_x_ratelimit_headers:
// DRAFT_VERSION_03 (so turn that off when using this): the status with the
// least remaining (the first on ties) gives x-ratelimit-remaining,
// x-ratelimit-reset (seconds) and the first number of x-ratelimit-limit,
// which then lists every limit as "<n>;w=<window seconds>" with
// ";name=\"<name>\"" when named. Unlike Envoy, the window is the real one
// (unit × multiplier), and a window that is not whole seconds is left out.
//
// draft11 sends the fields of draft-ietf-httpapi-ratelimit-headers-11, one
// item per limit that applied (repeated limits once): RateLimit-Policy
// "<name>";q=<limit>;w=<window seconds> and RateLimit
// "<name>";r=<remaining>;t=<seconds to reset>. A limit's name is its
// rate_limit name, else its descriptor's StatsKey ("limit_override" for a
// request's own limit).
//
// Both add retry-after (whole seconds, at least 1) when the answer is
// OVER_LIMIT: the longest wait among the denials — until a request of the
// same cost would pass, or, for one that can never pass, until its window
// resets.
func headers(mode config.HeaderMode, items []item, resp *rlsv3.RateLimitResponse, retryAfter time.Duration) []*corev3.HeaderValue {
	if mode == config.HeadersNone {
		return nil
	}
	var out []*corev3.HeaderValue
	switch mode {
	case config.HeadersDraft03:
		out = draft03(items, resp.Statuses)
	case config.HeadersDraft11:
		out = draft11(items, resp.Statuses)
	}
	if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
		out = append(out, &corev3.HeaderValue{Key: "retry-after", Value: strconv.FormatInt(max(1, wholeSeconds(retryAfter)), 10)})
	}
	return out
}

func draft03(items []item, statuses []*rlsv3.RateLimitResponse_DescriptorStatus) []*corev3.HeaderValue {
	chosen := -1
	for i, st := range statuses {
		if st.CurrentLimit != nil && (chosen < 0 || st.LimitRemaining < statuses[chosen].LimitRemaining) {
			chosen = i
		}
	}
	if chosen < 0 {
		return nil
	}
	limit := strconv.FormatUint(uint64(statuses[chosen].CurrentLimit.RequestsPerUnit), 10)
	for i, st := range statuses {
		w := windowSeconds(items[i].limit)
		if st.CurrentLimit == nil || w == 0 {
			continue
		}
		limit += ", " + strconv.FormatUint(uint64(st.CurrentLimit.RequestsPerUnit), 10) + ";w=" + strconv.FormatInt(w, 10)
		if name := st.CurrentLimit.Name; name != "" {
			limit += ";name=" + sfString(name)
		}
	}
	return []*corev3.HeaderValue{
		{Key: "x-ratelimit-limit", Value: limit},
		{Key: "x-ratelimit-remaining", Value: strconv.FormatUint(uint64(statuses[chosen].LimitRemaining), 10)},
		{Key: "x-ratelimit-reset", Value: strconv.FormatInt(statuses[chosen].GetDurationUntilReset().GetSeconds(), 10)},
	}
}

func draft11(items []item, statuses []*rlsv3.RateLimitResponse_DescriptorStatus) []*corev3.HeaderValue {
	var policy, current strings.Builder
	var seen []string
	for i, st := range statuses {
		if st.CurrentLimit == nil {
			continue
		}
		name := sfString(policyName(&items[i]))
		if containsString(seen, name) {
			continue
		}
		seen = append(seen, name)
		if policy.Len() > 0 {
			policy.WriteString(", ")
			current.WriteString(", ")
		}
		policy.WriteString(name + ";q=" + strconv.FormatUint(uint64(st.CurrentLimit.RequestsPerUnit), 10))
		if w := windowSeconds(items[i].limit); w > 0 {
			policy.WriteString(";w=" + strconv.FormatInt(w, 10))
		}
		current.WriteString(name + ";r=" + strconv.FormatUint(uint64(st.LimitRemaining), 10))
		if st.DurationUntilReset != nil {
			current.WriteString(";t=" + strconv.FormatInt(st.DurationUntilReset.GetSeconds(), 10))
		}
	}
	if len(seen) == 0 {
		return nil
	}
	return []*corev3.HeaderValue{
		{Key: "ratelimit-policy", Value: policy.String()},
		{Key: "ratelimit", Value: current.String()},
	}
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func policyName(it *item) string {
	switch {
	case it.limit.Name != "":
		return it.limit.Name
	case it.node != nil:
		return it.node.StatsKey
	}
	return "limit_override"
}

// windowSeconds is a limit's window in whole seconds, 0 when it is not
// whole seconds.
func windowSeconds(l *config.Limit) int64 {
	if l == nil || l.Window%time.Second != 0 {
		return 0
	}
	return int64(l.Window / time.Second)
}

// sfString writes s as a Structured Field String (RFC 9651): quoted, with
// '"' and '\' escaped; bytes outside printable ASCII, which a String cannot
// hold, become '?'.
func sfString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
