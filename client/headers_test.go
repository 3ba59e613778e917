package client

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

func TestHeadersMatchTheDraftsExamples(t *testing.T) {
	// draft-11's RateLimit-Policy example "burst";q=100;w=60 with its
	// RateLimit example r=50;t=30, for a rule named burst.
	d := Decision{Allowed: true, Limit: 100, Remaining: 50, ResetAfter: 29*time.Second + time.Millisecond, Rule: "burst", Window: time.Minute}
	h := d.Headers()
	want := http.Header{
		"Ratelimit-Policy":      {`"burst";q=100;w=60`},
		"Ratelimit":             {`"burst";r=50;t=30`},
		"X-Ratelimit-Limit":     {"100"},
		"X-Ratelimit-Remaining": {"50"},
		"X-Ratelimit-Reset":     {"30"},
	}
	equalHeaders(t, h, want)

	// The draft's throttled example: RateLimit: "default";r=0;t=5, with
	// Retry-After no earlier than the end of t.
	denied := Decision{Limit: 100, RetryAfter: 4200 * time.Millisecond, ResetAfter: 50 * time.Second, Window: 10 * time.Second}
	h = denied.Headers()
	equalHeaders(t, h, http.Header{
		"Ratelimit-Policy":      {`"default";q=100;w=10`},
		"Ratelimit":             {`"default";r=0;t=5`},
		"X-Ratelimit-Limit":     {"100"},
		"X-Ratelimit-Remaining": {"0"},
		"X-Ratelimit-Reset":     {"5"},
		"Retry-After":           {"5"},
	})
}

func TestHeadersOneItemPerRule(t *testing.T) {
	ds := []Decision{
		{Allowed: true, Limit: 50, Remaining: 49, ResetAfter: 60 * time.Second, Rule: "permin", Window: time.Minute},
		{Allowed: true, Limit: 1000, Remaining: 12, ResetAfter: 3600 * time.Second, Rule: "perhr", Window: time.Hour},
	}
	h := http.Header{}
	now := time.Unix(1_800_000_000, 0)
	SetHeaders(h, DraftHeaders|LegacyHeaders|UnixReset, now, ds...)
	equalHeaders(t, h, http.Header{
		"Ratelimit-Policy":      {`"permin";q=50;w=60, "perhr";q=1000;w=3600`},
		"Ratelimit":             {`"permin";r=49;t=60, "perhr";r=12;t=3600`},
		"X-Ratelimit-Limit":     {"1000"}, // the fewest remaining binds
		"X-Ratelimit-Remaining": {"12"},
		"X-Ratelimit-Reset":     {"1800003600"},
	})
	// Legacy only; a window that is not whole seconds leaves w out.
	h = http.Header{}
	SetHeaders(h, DraftHeaders, now, Decision{Allowed: true, Limit: 5, Remaining: 5, Rule: "fast", Window: 1500 * time.Millisecond})
	equalHeaders(t, h, http.Header{"Ratelimit-Policy": {`"fast";q=5`}, "Ratelimit": {`"fast";r=5;t=0`}})
}

func TestRetryAfterSecondsIsNeverZero(t *testing.T) {
	for _, c := range []struct {
		wait time.Duration
		want int64
	}{{0, 1}, {time.Millisecond, 1}, {time.Second, 1}, {time.Second + time.Millisecond, 2}, {59 * time.Second, 59}} {
		if got := RetryAfterSeconds(c.wait); got != c.want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", c.wait, got, c.want)
		}
	}
}

func TestQuotaExceededProblem(t *testing.T) {
	ds := []Decision{
		{Allowed: true, Limit: 10, Remaining: 3, Rule: "user"},
		{Limit: 5, RetryAfter: 2500 * time.Millisecond, Rule: "tenant"},
	}
	body := QuotaExceeded(ds...).JSON()
	want := `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded",` +
		`"status":429,"detail":"rate limit exceeded for tenant; retry after 3 s","violated-policies":["tenant"],"retry-after":3}` + "\n"
	if string(body) != want {
		t.Fatalf("body\n%s\nwant\n%s", body, want)
	}
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
}

func equalHeaders(t *testing.T, got, want http.Header) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("headers %v, want %v", got, want)
	}
	for k, v := range want {
		if g := got.Values(k); len(g) != len(v) || g[0] != v[0] {
			t.Errorf("%s: %q, want %q", k, g, v)
		}
	}
}
