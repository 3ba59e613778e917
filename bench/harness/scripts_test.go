package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every row's file holds its library's script byte for byte: the body's
// SHA1 is the one recorded in its header (taken from the SHA1s the
// libraries sent to a real redis-server, watched with MONITOR).
func TestLibraryScriptsIntact(t *testing.T) {
	libraryScriptDir = filepath.Join("..", "lua", "libraries")
	t.Cleanup(func() { libraryScriptDir = filepath.Join("bench", "lua", "libraries") })
	want := map[string]string{ // file → the SHA1 its library sends
		"rate-limiter-flexible.lua": "a1de965f42e177aa339706bd580f049065eca79a",
		"rate-limit-redis.lua":      "895b92e1712734e1b464999be23953485475357b",
		"limits-fixed-window.lua":   "628bd136a573a06b346879695681af12ccef300f",
		"limits-moving-window.lua":  "d19f37c18768a509dbf1310a257bfc35be65609f",
		"redis_rate-gcra.lua":       "f52a5b566060d79fd321d695df55bc918339c4aa",
		"ulule-limiter.lua":         "f74233f556d3f99c50b61169cf8aa8d5deb63fb2",
		"throttled-gcra-cas.lua":    "ebd682e30de074a6919bde872b507734c7c3ebe5",
	}
	rows := libraryScripts(time.Unix(1_800_000_000, 0))
	if len(rows) != len(want) {
		t.Errorf("%d rows, want one per file (%d)", len(rows), len(want))
	}
	for _, s := range rows {
		body, sha, err := readLibraryScript(s.file)
		if err != nil {
			t.Errorf("%s: %v", s.name, err)
			continue
		}
		if sha != want[s.file] {
			t.Errorf("%s: SHA1 %s, want %s", s.file, sha, want[s.file])
		}
		if !strings.Contains(body, "redis.call") || strings.Contains(body, scriptMarker) {
			t.Errorf("%s: body is not the script alone:\n%s", s.file, body)
		}
		if !strings.Contains(s.key, "__rand_int__") {
			t.Errorf("%s: key %q does not vary under -r", s.name, s.key)
		}
	}
}

// A file whose script changed by a byte (an editor adding a final newline)
// is refused, naming the file.
func TestLibraryScriptChangedIsRefused(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "lua", "libraries", "rate-limit-redis.lua"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	libraryScriptDir = dir
	t.Cleanup(func() { libraryScriptDir = filepath.Join("bench", "lua", "libraries") })
	for name, text := range map[string]string{
		"newline.lua":   string(src) + "\n",
		"no-marker.lua": strings.Replace(string(src), scriptMarker, "", 1),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := readLibraryScript(name); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v, want a refusal naming the file", name, err)
		}
	}
}

// The reply checks accept the admitting replies the scripts give and
// refuse error-shaped or refusing ones.
func TestScriptReplyChecks(t *testing.T) {
	for _, c := range []struct {
		name  string
		check func(any) error
		reply any
		ok    bool
	}{
		{"count and ttl", countAndTTL, []any{int64(1), int64(10000)}, true},
		{"count over the limit", countAndTTL, []any{int64(scriptLimit + 1), int64(10000)}, false},
		{"no ttl", countAndTTL, []any{int64(1), int64(-1)}, false},
		{"count", count, int64(3), true},
		{"count zero", count, int64(0), false},
		{"true", integer(1), int64(1), true},
		{"false (nil)", integer(1), nil, false},
		{"redis_rate allowed", redisRateAllowed, []any{int64(1), int64(999), "-1", "0.01"}, true},
		{"redis_rate refused", redisRateAllowed, []any{int64(0), int64(0), "0.01", "10"}, false},
		{"string", count, "1", false},
	} {
		if err := c.check(c.reply); (err == nil) != c.ok {
			t.Errorf("%s: %v gave %v, want ok=%v", c.name, c.reply, err, c.ok)
		}
	}
}
