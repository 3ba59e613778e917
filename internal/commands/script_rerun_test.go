package commands_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/cluster"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/testserver"
)

// countLog is a slog handler counting the messages it receives, by text: a
// script's redis.log at its start counts its runs.
type countLog struct {
	mu *sync.Mutex
	n  map[string]int
}

func newCountLog() countLog { return countLog{mu: new(sync.Mutex), n: map[string]int{}} }

func (h countLog) Enabled(context.Context, slog.Level) bool { return true }
func (h countLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.n[r.Message]++
	h.mu.Unlock()
	return nil
}
func (h countLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countLog) WithGroup(string) slog.Handler      { return h }

// take returns how often msg was logged since the last take.
func (h countLog) take(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.n[msg]
	delete(h.n, msg)
	return n
}

// TestScriptBeyondDeclaredKeys: a script reaching a key of a shard it does
// not hold, or the whole keyspace, before writing is run again holding
// every shard: the client gets one reply, of one run that saw everything.
// The script is then marked, so its next run holds every shard from the
// start (one run). One that has written first gets an error, its writes
// kept; its next run holds every shard and succeeds.
func TestScriptBeyondDeclaredKeys(t *testing.T) {
	logs := newCountLog()
	ts := testserver.Start(t, testserver.Options{Shards: 4, Logger: slog.New(logs)})
	c := dialScript(t, ts)
	other := otherShardKey(ts, "k")
	c.do("SET", other, "far")
	c.do("SET", "LIMITER/a", "1")
	c.do("SET", "LIMITER/b", "1")

	const read = "redis.log(redis.LOG_WARNING, 'read') return {redis.call('get', KEYS[1]), redis.call('get', ARGV[1])}"
	c.do("SET", "k", "near")
	for run, wantPasses := range []int{2, 1} { // the first run is rerun; the second holds every shard at once
		if got := c.do("EVAL", read, "1", "k", other); got != "*2 $4 near $3 far" {
			t.Fatalf("run %d: %q", run, got)
		}
		if n := logs.take("read"); n != wantPasses {
			t.Errorf("run %d: the script ran %d times, want %d", run, n, wantPasses)
		}
	}
	if got := c.do("EVALSHA", sha(read), "1", "k", other); got != "*2 $4 near $3 far" || logs.take("read") != 1 {
		t.Errorf("EVALSHA of the marked script: %q", got)
	}

	// limits' storage.reset(): KEYS with the pattern as KEYS[1], then DEL of
	// what it found, caught by nothing (the pcall variant must stop too).
	const clear = `local keys = redis.call('keys', KEYS[1])
local res = 0
for i=1,#keys,5000 do
    res = res + redis.call('del', unpack(keys, i, math.min(i+4999, #keys)))
end
return res`
	if got := c.do("EVAL", clear, "1", "LIMITER*"); got != ":2" {
		t.Fatalf("limits' clear script: %q", got)
	}
	if got := c.do("EXISTS", "LIMITER/a", "LIMITER/b", other); got != ":1" {
		t.Fatalf("after the clear script: EXISTS %q", got)
	}
	if got := c.do("EVAL", "local ok, n = pcall(redis.call, 'dbsize') return n", "1", "k"); got != ":2" {
		t.Fatalf("DBSIZE under pcall: %q", got)
	}

	// Written first: the error, the write kept, the undeclared SET not run.
	const writeFirst = "redis.log(redis.LOG_WARNING, 'w') redis.call('set', KEYS[1], 'written') return redis.call('set', ARGV[1], 'set')"
	got := c.do("EVAL", writeFirst, "1", "k", other)
	if want := "-ERR Script attempted to access key '" + other + "' with 'set', which is not declared in KEYS, after it had written; its writes stay."; !strings.HasPrefix(got, want) {
		t.Fatalf("write, then an undeclared key: %q, want %q...", got, want)
	}
	if got := c.do("MGET", "k", other); got != "*2 $7 written $3 far" || logs.take("w") != 1 {
		t.Fatalf("after the failed script: MGET %q", got)
	}
	// Its next run holds every shard from the start.
	if got := c.do("EVALSHA", sha(writeFirst), "1", "k", other); got != "+OK" || logs.take("w") != 1 {
		t.Fatalf("the failed script's next run: %q", got)
	}
	if got := c.do("GET", other); got != "$3 set" {
		t.Fatalf("the failed script's next run did not write: %q", got)
	}
	c.do("SCRIPT", "FLUSH")
	if got := c.do("EVAL", writeFirst, "1", "k", "elsewhere"+other); !strings.HasPrefix(got, "-ERR Script attempted to access key") {
		t.Fatalf("the mark outlived SCRIPT FLUSH: %q", got)
	}
}

// TestScriptBeyondDeclaredKeysInCluster: in cluster mode a key a script did
// not declare may live on another node: an error, as in Redis Cluster,
// never a rerun.
func TestScriptBeyondDeclaredKeysInCluster(t *testing.T) {
	ts, _ := startClusterServer(t, cluster.On, true)
	c := dialScript(t, ts)
	mine := keyIn("k", true)
	other := ""
	for i := 0; other == ""; i++ { // a key of this node on another shard
		k := keyIn(fmt.Sprintf("o%d", i), true)
		if ts.Service.ShardOf(nil, []byte(k)) != ts.Service.ShardOf(nil, []byte(mine)) {
			other = k
		}
	}
	got := c.do("EVAL", "return redis.pcall('get', ARGV[1])", "1", mine, other)
	if !strings.HasPrefix(got, "-ERR Script attempted to access key '"+other+"' with 'get', which is not declared in KEYS and lives on a shard the script does not hold") {
		t.Errorf("undeclared key: %q", got)
	}
	got = c.do("EVAL", "return redis.pcall('dbsize')", "1", mine)
	if !strings.HasPrefix(got, "-ERR Script attempted to run 'dbsize', which needs every shard") {
		t.Errorf("dbsize: %q", got)
	}
}

// TestScriptRerunIsAtomic races a script that reads a key of another shard
// than its declared one — a new script each round, so each is stopped at
// that read and rerun holding every shard — with other clients' INCRs of
// both keys (in MULTI) and RL.ALLOW. The script checks the two keys are
// equal, then INCRs both: a client's INCR between its reads, or between its
// writes, would show as a torn pair or a lost increment.
func TestScriptRerunIsAtomic(t *testing.T) { testserver.Models(t, testScriptRerunIsAtomic) }

func testScriptRerunIsAtomic(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{Shards: 4,
		Rules: append(rules.Defaults(), testserver.Def("lim", "fixed_window", "150", "1h", ""))})
	a := "a"
	b := otherShardKey(ts, a)
	// Declares only a; reads b after a (before any write), then INCRs
	// both. %d makes each round's script new (not marked yet).
	const script = `-- round %d
local x = tonumber(redis.call('get', KEYS[1]) or '0')
local y = tonumber(redis.call('get', ARGV[1]) or '0')
if x ~= y then return redis.error_reply('torn: ' .. x .. ' ~= ' .. y) end
redis.call('incr', KEYS[1])
redis.call('incr', ARGV[1])
return redis.call('rl.allow', ARGV[1], 'lim')[1]`
	const clients, rounds = 4, 150
	var wg sync.WaitGroup
	var admitted atomic.Int64
	deadline := time.Now().Add(60 * time.Second)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := ts.Client(t, 2)
			ctx := context.Background()
			for r := range rounds {
				if time.Now().After(deadline) {
					t.Error("the race ran past its time bound")
					return
				}
				var n int64
				var err error
				if i%2 == 0 {
					n, err = c.Eval(ctx, fmt.Sprintf(script, i*rounds+r), []string{a}, b).Int64()
				} else {
					// Both in one MULTI, so scripts see them together.
					if _, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
						p.Incr(ctx, a)
						p.Incr(ctx, b)
						return nil
					}); err == nil {
						var d []int64
						d, err = c.Do(ctx, "RL.ALLOW", b, "lim").Int64Slice()
						if err == nil {
							n = d[0]
						}
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
				admitted.Add(n)
			}
		}()
	}
	wg.Wait()
	c := ts.Client(t, 2)
	ctx := context.Background()
	want := int64(clients * rounds)
	ga, _ := c.Get(ctx, a).Int64()
	gb, _ := c.Get(ctx, b).Int64()
	if ga != want || gb != want {
		t.Errorf("a = %d, b = %d, want %d each", ga, gb, want)
	}
	if got := admitted.Load(); got != 150 {
		t.Errorf("RL.ALLOW from scripts and clients admitted %d, the rule's limit is 150", got)
	}
}

// TestScriptRerunCountsOnce: a script rerun holding every shard is one
// command in rl_command_duration_seconds, and so is each command it ran
// before it was stopped (PING), not one per run.
func TestScriptRerunCountsOnce(t *testing.T) {
	durations := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "d"}, []string{"command"})
	ts := testserver.Start(t, testserver.Options{Shards: 4, CommandDuration: durations})
	c := dialScript(t, ts)
	other := otherShardKey(ts, "k")
	if got := c.do("EVAL", "redis.call('ping') return redis.call('exists', ARGV[1])", "1", "k", other); got != ":0" {
		t.Fatalf("EVAL: %q", got)
	}
	for _, name := range []string{"eval", "ping"} {
		var m dto.Metric
		if err := durations.WithLabelValues(name).(prometheus.Histogram).Write(&m); err != nil {
			t.Fatal(err)
		}
		if n := m.GetHistogram().GetSampleCount(); n != 1 {
			t.Errorf("%s observed %d times, want 1", name, n)
		}
	}
}
