package scripting

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// patternProbe runs every pattern function on pairs of (subject, pattern)
// from ARGV, each under pcall, and returns one line of results per pair.
const patternProbe = `
local out = {}
local function add(r, ...)
  local t = {}
  for j = 1, select('#', ...) do t[j] = tostring((select(j, ...))) end
  r[#r+1] = table.concat(t, ',')
end
for i = 1, #ARGV, 2 do
  local s, p = ARGV[i], ARGV[i+1]
  local r = {}
  add(r, pcall(string.find, s, p))
  add(r, pcall(string.find, s, p, 2))
  add(r, pcall(string.find, s, p, -3, true))
  add(r, pcall(string.match, s, p))
  add(r, pcall(string.match, s, p, 3))
  add(r, pcall(string.gsub, s, p, '<%0>'))
  add(r, pcall(string.gsub, s, p, '%1-%%', 2))
  add(r, pcall(string.gsub, s, p, function(a, b) if a == 'a' then return false end return '{' .. tostring(a) .. tostring(b) .. '}' end))
  add(r, pcall(string.gsub, s, p, {a = 'A', b = 1.5}))
  add(r, pcall(function()
    local t = {}
    for a, b in string.gmatch(s, p) do
      t[#t+1] = tostring(a) .. '/' .. tostring(b)
      if #t > 40 then break end
    end
    return table.concat(t, ';')
  end))
  out[#out+1] = table.concat(r, '|')
end
return out
`

// randomPattern builds a pattern from the pieces Lua patterns are made of,
// malformed ones included.
func randomPattern(rng *rand.Rand) string {
	pieces := []string{"a", "b", "c", ".", "%a", "%d", "%s", "%w", "%p", "%l", "%u", "%x", "%c", "%A", "%S", "%%",
		"%.", "[ab]", "[^a]", "[a-c]", "[%d%s]", "[]]", "[^]a]", "[a-]", "%b()", "%b[]", "%f[%w]", "%f[%s]", "(",
		")", "()", "%1", "%2", "*", "+", "-", "?", "$", "^", "[", "%", "%z", "0", " "}
	common := []string{"a", "b", ".", "%a", "(", ")", "*", "+", "-", "?", "[ab]"}
	var b strings.Builder
	if rng.IntN(4) == 0 {
		b.WriteByte('^')
	}
	for n := rng.IntN(5); n >= 0; n-- {
		if rng.IntN(2) == 0 {
			b.WriteString(common[rng.IntN(len(common))])
		} else {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
	}
	return b.String()
}

func randomSubject(rng *rand.Rand) string {
	const alphabet = "abababcab01 ()[].%-\tXZ"
	b := make([]byte, rng.IntN(12))
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

// TestPatternsMatchRedis compares string.find, match, gmatch and gsub with
// Redis's C Lua on random subjects and patterns, errors included.
func TestPatternsMatchRedis(t *testing.T) {
	h := newDiffHarness(t)
	rng := rand.New(rand.NewPCG(1, 2))
	script, err := h.cache.Load([]byte(patternProbe))
	if err != nil {
		t.Fatal(err)
	}
	for batch := 0; batch < 20; batch++ {
		var argv []string
		for i := 0; i < 100; i++ {
			argv = append(argv, randomSubject(rng), randomPattern(rng))
		}
		want := h.client[2].do(append([]string{"EVAL", patternProbe, "0"}, argv...)...)
		got, err := h.engine.Run(context.Background(), script, nil, bytesOf(argv), 2, h.caller.Call, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(want, got) {
			continue
		}
		wv, _, _ := parseTestReply(want)
		gv, _, _ := parseTestReply(got)
		wl, gl := wv.([]any), gv.([]any)
		for i := range wl {
			if i >= len(gl) || wl[i] != gl[i] {
				t.Errorf("subject %q pattern %q:\nredis:  %v\nengine: %v", argv[2*i], argv[2*i+1], wl[i], gl[i])
			}
		}
	}
}

// TestPatternsAreInterruptible: a backtracking match that would run for
// hours stops when the run is killed, and gsub's cost is linear.
func TestPatternsAreInterruptible(t *testing.T) {
	clock := newTestClock()
	e := New(Options{Now: clock.Now, TimeLimit: time.Second})
	s := mustLoad(t, "return string.find(string.rep('a', 5000), '.-.-.-.-.-b')")
	done := make(chan error, 1)
	go func() {
		_, err := e.Run(context.Background(), s, nil, nil, 2, newFakeRedis(clock.Now()).Call, false, nil)
		done <- err
	}()
	waitRunning(t, e)
	clock.Advance(2 * time.Second)
	if err := e.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "Script killed by user with SCRIPT KILL") {
			t.Fatalf("killed match: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a killed pattern match kept running")
	}

	// gopher-lua's gsub copied the subject per match: this took minutes.
	s = mustLoad(t, "local s = string.rep('a', 200000); local r, n = s:gsub('a', 'bc'); return {#r, n}")
	start := time.Now()
	out, err := e.Run(context.Background(), s, nil, nil, 2, newFakeRedis(clock.Now()).Call, false, nil)
	if err != nil || string(out) != "*2\r\n:400000\r\n:200000\r\n" {
		t.Fatalf("gsub: %q %v", out, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("gsub over 200 000 bytes took %v", d)
	}
}
