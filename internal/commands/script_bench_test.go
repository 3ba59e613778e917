package commands_test

import (
	"fmt"
	"testing"
)

// limiterScript is rate-limiter-flexible's RateLimiterRedis script (11.4.0,
// as it sends it): the typical limiter script — SET NX EX, INCRBY, PTTL —
// returning {consumed, ttl}.
const limiterScript = "redis.call('set', KEYS[1], 0, 'EX', ARGV[2], 'NX') local consumed = redis.call('incrby', KEYS[1], ARGV[1]) local ttl = redis.call('pttl', KEYS[1]) if ttl == -1 then   redis.call('expire', KEYS[1], ARGV[2])   ttl = 1000 * ARGV[2] end return {consumed, ttl} "

// BenchmarkScriptEndToEnd compares EVALSHA of a limiter script with
// RL.ALLOW making the same kind of decision, unpipelined and as pipelines
// of 16 over 16 keys (docs/performance.md has the figures).
func BenchmarkScriptEndToEnd(b *testing.B) { bothModels(b, benchScript) }

func benchScript(b *testing.B) {
	keys := make([]string, 16)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i)
	}
	sha := sha(limiterScript)
	load := []string{"SCRIPT", "LOAD", limiterScript}
	evalsha := func(i int) []string { return []string{"EVALSHA", sha, "1", keys[i], "1", "3600", "5", "3600"} }
	allow := func(i int) []string { return []string{"RL.ALLOW", keys[i], "r"} }
	b.Run("EVALSHA/P1", func(b *testing.B) { benchRoundTripsAfter(b, load, 1, evalsha) })
	b.Run("RL.ALLOW/P1", func(b *testing.B) { benchRoundTrips(b, 1, allow) })
	b.Run("EVALSHA/P16", func(b *testing.B) { benchRoundTripsAfter(b, load, 16, evalsha) })
	b.Run("RL.ALLOW/P16", func(b *testing.B) { benchRoundTrips(b, 16, allow) })
}
