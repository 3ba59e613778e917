package main

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The library-scripts section: the Lua script each rate-limiter library
// sends on its atomic path (bench/lua/libraries/, copied from the
// packages), run by EVALSHA with the arguments the library sends, on
// redis-server and on rlserver (scriptServers) side by side.

// scriptMarker ends a library script's header: the script is every byte
// after it, exactly as the library sends it (so its SHA1 is the library's).
const scriptMarker = "-- script (as the library sends it, from the next byte to the end of the file):\n"

// scriptLimit is the limit every row is configured with, in requests per
// 10 s window per key. With 100,000 random keys a key sees a few requests a
// second at most, so no row is ever refused: each script takes its
// admitting path, the one that writes.
const scriptLimit = 1000

// libraryScript is one row of the section.
type libraryScript struct {
	name string // the library (and path), the row's name
	file string // under bench/lua/libraries/
	does string // what one call does with these arguments, for the table
	key  string // KEYS[1], with __rand_int__ for redis-benchmark's -r
	argv []string
	// preload, if set, is the value every key of the keyspace holds before
	// the runs (SET key value EX 3600): a script whose real work needs the
	// key to exist.
	preload string
	// check says whether a reply is the script's normal, admitting reply.
	check func(reply any) error
}

// libraryScripts lists the rows. now is the harness's start time, sent where
// a library sends the current time.
func libraryScripts(now time.Time) []libraryScript {
	limit := strconv.Itoa(scriptLimit)
	nowSeconds := strconv.FormatFloat(float64(now.UnixMicro())/1e6, 'f', 6, 64)
	tat := strconv.FormatInt(now.UnixNano(), 10) // throttled's theoretical arrival time, ns
	return []libraryScript{
		{name: "rate-limiter-flexible", file: "rate-limiter-flexible.lua", key: "rlf:__rand_int__",
			argv: []string{"1", "10", limit, "10"}, check: countAndTTL,
			does: "consume 1 point, 1000 per 10 s: SET NX EX, INCRBY, PTTL"},
		{name: "rate-limit-redis", file: "rate-limit-redis.lua", key: "rl:__rand_int__",
			argv: []string{"10000"}, check: countAndTTL,
			does: "a hit in a 10 s window: PTTL, then SET PX (new window) or INCR"},
		{name: "limits fixed window", file: "limits-fixed-window.lua", key: "LIMITER/__rand_int__/fixed-window/1000/10/second",
			argv: []string{"10", "1"}, check: count,
			does: "hit, 1000 per 10 s: INCRBY, EXPIRE on a window's first hit"},
		{name: "limits moving window", file: "limits-moving-window.lua", key: "LIMITER/__rand_int__/moving-window/1000/10/second",
			argv: []string{nowSeconds, limit, "10", "1"}, check: integer(1),
			does: "hit, 1000 per 10 s: LINDEX the 1000th entry, LPUSH now, LTRIM to 1000, EXPIRE"},
		{name: "redis_rate GCRA", file: "redis_rate-gcra.lua", key: "rate:__rand_int__",
			argv: []string{limit, limit, "10", "1"}, check: redisRateAllowed,
			does: "AllowN 1, rate and burst 1000 per 10 s: TIME, GET, SET EX"},
		{name: "ulule/limiter", file: "ulule-limiter.lua", key: "ulule:__rand_int__",
			argv: []string{"1", "10000"}, check: countAndTTL,
			does: "Increment 1, 1000 per 10 s: INCRBY, then PEXPIRE (first hit) or PTTL"},
		{name: "throttled GCRA", file: "throttled-gcra-cas.lua", key: "throttled:__rand_int__",
			argv: []string{tat, tat, "3600"}, preload: tat, check: integer(1),
			does: "compare-and-swap of a key holding the expected value (keys preloaded): GET, compare, SETEX"},
	}
}

// libraryScriptDir holds the libraries' scripts, relative to the
// repository's root (bench/run.sh runs the harness there).
var libraryScriptDir = filepath.Join("bench", "lua", "libraries")

// readLibraryScript returns the script of a bench/lua/libraries file: the
// bytes after its header, refused unless their SHA1 is the one the header
// records (the library's own).
func readLibraryScript(file string) (body, sha string, err error) {
	text, err := os.ReadFile(filepath.Join(libraryScriptDir, file))
	if err != nil {
		return "", "", err
	}
	header, script, ok := bytes.Cut(text, []byte(scriptMarker))
	if !ok {
		return "", "", fmt.Errorf("%s: no %q line", file, strings.TrimSpace(scriptMarker))
	}
	var want string
	for line := range strings.Lines(string(header)) {
		if v, ok := strings.CutPrefix(line, "-- sha1 "); ok {
			want = strings.TrimSpace(v)
		}
	}
	sum := sha1.Sum(script)
	if got := hex.EncodeToString(sum[:]); got != want {
		return "", "", fmt.Errorf("%s: the script's SHA1 is %s, the header records %q: the file no longer holds the library's script byte for byte", file, got, want)
	}
	return string(script), want, nil
}

// scriptServers are the servers the section measures, by their names in
// startServers' addresses, Redis first: rlserver out of the box (every core,
// a shard per core) and on one core (one shard), which shows what running
// the shards in parallel buys; with --baseline, the earlier build too.
var scriptServers = []string{"redis", "rlserver", "rlserver 1 core"}

// prepareScripts loads each script on every server, preloads the keys a
// row needs, and calls each script once per server, checking its reply. A
// row whose script fails anywhere is left out, with the reason in skipped
// (redis-benchmark counts error replies as requests served, so an unchecked
// row could measure errors).
func prepareScripts(ctx context.Context, clients map[string]*redis.Client, scripts []libraryScript) (benches []bench, skipped []string) {
	for _, s := range scripts {
		if *only != "" && !strings.Contains("EVALSHA "+s.name, *only) {
			continue
		}
		body, sha, err := readLibraryScript(s.file)
		args := append([]string{"EVALSHA", sha, "1", s.key}, s.argv...)
		reason := ""
		if err != nil {
			reason = err.Error()
		} else {
			reason = prepareScript(ctx, clients, s, body, sha, args)
		}
		if reason != "" {
			fmt.Fprintf(os.Stderr, "  scripts: %s left out: %s\n", s.name, reason)
			skipped = append(skipped, fmt.Sprintf("%s: %s", s.name, reason))
			continue
		}
		for _, server := range scriptServers {
			benches = append(benches, bench{server: server, name: "EVALSHA " + s.name, args: args, vs: "EVALSHA " + s.name})
		}
	}
	return benches, skipped
}

// prepareScript readies one row on every server and returns why it cannot
// be measured, or "".
func prepareScript(ctx context.Context, clients map[string]*redis.Client, s libraryScript, body, sha string, args []string) string {
	for _, server := range scriptServers {
		c := clients[server]
		got, err := c.ScriptLoad(ctx, body).Result()
		if err != nil {
			return fmt.Sprintf("SCRIPT LOAD on %s: %v", server, err)
		}
		if got != sha {
			return fmt.Sprintf("SCRIPT LOAD on %s returned SHA1 %s, not %s", server, got, sha)
		}
		if s.preload != "" {
			if err := preloadKeys(ctx, c, s.key, s.preload); err != nil {
				return fmt.Sprintf("preloading %s on %s: %v", s.key, server, err)
			}
		}
		if err := checkScript(ctx, c, s, args); err != nil {
			return fmt.Sprintf("on %s: %v", server, err)
		}
	}
	return ""
}

// checkScript runs the row's command once, on the keyspace's first key,
// and checks the reply is the script's normal one.
func checkScript(ctx context.Context, c *redis.Client, s libraryScript, args []string) error {
	cmd := make([]any, len(args))
	for i, a := range args {
		cmd[i] = strings.ReplaceAll(a, "__rand_int__", keyNumber(0))
	}
	what := fmt.Sprintf("EVALSHA of %s %s", s.file, strings.Join(args[2:], " "))
	reply, err := c.Do(ctx, cmd...).Result()
	if errors.Is(err, redis.Nil) {
		reply, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("%s replied the error %q", what, err)
	}
	if err := s.check(reply); err != nil {
		return fmt.Errorf("%s replied %v: %w", what, reply, err)
	}
	return nil
}

// keyNumber formats i as redis-benchmark replaces __rand_int__ under -r.
func keyNumber(i int) string { return fmt.Sprintf("%012d", i) }

// preloadKeys sets every key of the keyspace to value (pipelined).
func preloadKeys(ctx context.Context, c *redis.Client, key, value string) error {
	const batch = 1000
	for i := 0; i < *keys; i += batch {
		p := c.Pipeline()
		for j := i; j < min(i+batch, *keys); j++ {
			p.Set(ctx, strings.ReplaceAll(key, "__rand_int__", keyNumber(j)), value, time.Hour)
		}
		if _, err := p.Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

// checkScriptsAfter calls every measured script once more and returns a
// note per row whose reply is no longer the admitting one (a limit reached
// or a key gone during the runs would make later requests cheaper).
func checkScriptsAfter(ctx context.Context, clients map[string]*redis.Client, scripts []libraryScript, benches []bench) []string {
	var notes []string
	for _, s := range scripts {
		for _, b := range benches {
			if b.name != "EVALSHA "+s.name {
				continue
			}
			if err := checkScript(ctx, clients[b.server], s, b.args); err != nil {
				notes = append(notes, fmt.Sprintf("%s on %s after the runs: %v", s.name, b.server, err))
			}
		}
	}
	return notes
}

// count accepts a counter of admitted requests within the limit.
func count(reply any) error {
	n, ok := reply.(int64)
	if !ok || n < 1 || n > scriptLimit {
		return fmt.Errorf("want a count from 1 to %d", scriptLimit)
	}
	return nil
}

// countAndTTL accepts {count within the limit, milliseconds left > 0}.
func countAndTTL(reply any) error {
	a, ok := reply.([]any)
	if !ok || len(a) != 2 {
		return errors.New("want {count, ttl}")
	}
	if err := count(a[0]); err != nil {
		return err
	}
	if ttl, ok := a[1].(int64); !ok || ttl <= 0 {
		return errors.New("want a ttl > 0")
	}
	return nil
}

// integer accepts exactly want (Lua true is 1).
func integer(want int64) func(any) error {
	return func(reply any) error {
		if n, ok := reply.(int64); !ok || n != want {
			return fmt.Errorf("want %d", want)
		}
		return nil
	}
}

// redisRateAllowed accepts redis_rate's {allowed = cost 1, remaining,
// retry_after "-1", reset_after}.
func redisRateAllowed(reply any) error {
	a, ok := reply.([]any)
	if !ok || len(a) != 4 || a[0] != int64(1) || a[2] != "-1" {
		return errors.New("want {1, remaining, \"-1\", reset_after}: allowed")
	}
	return nil
}

// writeScriptTable writes the section's tables, one per pipeline depth: per
// script, each server's median req/s, each rlserver's ratio to Redis, and
// the p99s.
func writeScriptTable(out *strings.Builder, scripts []libraryScript, results map[string]map[int]result, skipped, after []string) {
	fmt.Fprintf(out, "## Library scripts (EVALSHA)\n\n")
	fmt.Fprintf(out, "Each library's own script (bench/lua/libraries/), by EVALSHA with the arguments it sends, limit %d per 10 s, on %d random keys. Every call was checked once per server before the runs (and again after) to return the script's normal, admitting reply. Every server ran the same number of requests per run.\n\n", scriptLimit, *keys)
	rlservers := scriptServers[1:] // after "redis"
	for _, p := range []int{1, 16} {
		fmt.Fprintf(out, "### Pipeline %d (-P %d)\n\n| script | what one call does | redis req/s |", p, p)
		for _, rl := range rlservers {
			fmt.Fprintf(out, " %s req/s | %s/redis |", rl, rl)
		}
		fmt.Fprintf(out, " p99 ms: %s |\n|---|---|---:|%s---:|\n", strings.Join(scriptServers, " / "), strings.Repeat("---:|---:|", len(rlservers)))
		for _, s := range scripts {
			rd, ok := results["redis EVALSHA "+s.name][p]
			if !ok {
				continue
			}
			p99s := []string{fmt.Sprintf("%.3f", rd.p99)}
			fmt.Fprintf(out, "| %s | %s | %.0f |", s.name, s.does, rd.rps)
			for _, rl := range rlservers {
				r := results[rl+" EVALSHA "+s.name][p]
				ratio := ""
				if rd.rps > 0 {
					ratio = fmt.Sprintf("**%.2f×**", r.rps/rd.rps)
				}
				fmt.Fprintf(out, " %.0f | %s |", r.rps, ratio)
				p99s = append(p99s, fmt.Sprintf("%.3f", r.p99))
			}
			fmt.Fprintf(out, " %s |\n", strings.Join(p99s, " / "))
		}
		out.WriteString("\n")
	}
	for _, s := range skipped {
		fmt.Fprintf(out, "Left out: %s\n\n", s)
	}
	for _, a := range after {
		fmt.Fprintf(out, "Warning: %s\n\n", a)
	}
}

// measureScripts runs the section (rows filtered by --only) and writes its
// table to out.
func measureScripts(ctx context.Context, out *strings.Builder, clients map[string]*redis.Client, addrs map[string]string) error {
	scripts := libraryScripts(time.Now())
	benches, skipped := prepareScripts(ctx, clients, scripts)
	results := map[string]map[int]result{}
	if len(benches) > 0 {
		var err error
		if results, err = measureAll(benches, addrs, true); err != nil {
			return err
		}
	}
	if len(benches) > 0 || len(skipped) > 0 {
		writeScriptTable(out, scripts, results, skipped, checkScriptsAfter(ctx, clients, scripts, benches))
	}
	return nil
}
