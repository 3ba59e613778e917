// Command harness runs rlserver and redis-server side by side on loopback,
// drives both with redis-benchmark, measures memory per key, and prints a
// table (also written to bench/results/). Run it through bench/run.sh.
//
// It is a benchmark, not a test: it asserts nothing about timings. Ratios
// are measured in one run, on one machine, with one load generator, which is
// what makes them comparable; absolute figures drift with the machine's load.
package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	quick   = flag.Bool("quick", false, "smoke run: tiny counts, one run each, 10k keys for memory")
	runs    = flag.Int("runs", 3, "runs per measurement; the median is reported")
	seconds = flag.Float64("seconds", 6, "approximate length of each run")
	clients = flag.Int("c", 50, "redis-benchmark connections")
	keys    = flag.Int("keys", 100_000, "random key space for throughput runs (__rand_int__)")
	memKeys = flag.Int("mem-keys", 1_000_000, "distinct keys loaded per algorithm to measure memory")
	only    = flag.String("only", "", "run only benchmarks whose name contains this")
	nshards = flag.Int("shards", 0, "rlserver --shards (0: its default)")
	memOnly = flag.Bool("memory-only", false, "measure memory per key only, skipping the throughput tables")
	// scriptsOnly runs only the library-scripts section (scripts.go), which
	// a full run includes last, after the memory section.
	scriptsOnly = flag.Bool("scripts-only", false, "run only the library scripts (EVALSHA of each rate-limiter library's own script on redis-server and rlserver)")
	// baseline runs a second build of rlserver beside the current one, for
	// before/after comparisons measured in the same run.
	baseline = flag.String("baseline", "", "path to another rlserver binary (an earlier build) to measure side by side as \"baseline\"")
)

// bench is one line of the throughput table.
type bench struct {
	server string // "rlserver" or "redis"
	name   string
	args   []string // redis-benchmark's command, after the flags
	vs     string   // for rlserver lines: the Redis line it is compared with
}

type result struct {
	rps, p50, p99 float64 // req/s, ms, ms
}

func main() {
	flag.Parse()
	if *quick {
		*runs, *seconds, *memKeys = 1, 0.5, 10_000
	}
	if *baseline != "" {
		// The library scripts beside the earlier build, out of the box.
		scriptServers = append(scriptServers, "baseline")
	}
	do := run
	switch {
	case *clusterCompare:
		do = runClusterCompare // cluster.go
	case *tail:
		do = runTail // tail.go
	}
	if err := do(); err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
}

func run() error {
	tmp, err := os.MkdirTemp("", "rlbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	addrs, stop, err := startServers(tmp)
	defer stop()
	if err != nil {
		return err
	}
	ctx := context.Background()
	rlc := redis.NewClient(&redis.Options{Addr: addrs["rlserver"], Protocol: 2})
	rl1c := redis.NewClient(&redis.Options{Addr: addrs["rlserver 1 core"], Protocol: 2})
	rdc := redis.NewClient(&redis.Options{Addr: addrs["redis"], Protocol: 2})
	shas, err := loadScripts(ctx, rdc)
	if err != nil {
		return err
	}
	rv, _ := rdc.Info(ctx, "server").Result()
	describe := func(c *redis.Client, procs string) string {
		info, _ := c.Do(ctx, "RL.INFO").Text()
		return fmt.Sprintf("GOMAXPROCS=%s, %s shards, %s event loops", procs, infoField(info, "rl_shards"), infoField(info, "rl_event_loops"))
	}
	config := fmt.Sprintf("\"rlserver\": %s; \"rlserver 1 core\": %s", describe(rlc, strconv.Itoa(runtime.NumCPU())), describe(rl1c, "1"))
	if *baseline != "" {
		config += fmt.Sprintf("; \"baseline\" (%s) likewise on every core and on one", *baseline)
	}
	fmt.Printf("redis-server %s; %s; %d connections, %d random keys, median of %d interleaved runs of ~%.0fs\n\n",
		infoField(rv, "redis_version"), config, *clients, *keys, *runs, *seconds)

	benches := benchmarks(shas)
	results := map[string]map[int]result{}
	if !*memOnly && !*scriptsOnly {
		if results, err = measureAll(benches, addrs, false); err != nil {
			return err
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "# rlserver vs redis-server %s — %s\n\n", infoField(rv, "redis_version"), time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&out, "`bench/run.sh %s` on %s: redis-benchmark -c %d, %d random keys, median of %d interleaved runs of ~%.0f s each; all servers on loopback, persistence off; %s.\n\n",
		strings.Join(os.Args[1:], " "), hostInfo(), *clients, *keys, *runs, *seconds, config)
	if !*memOnly && !*scriptsOnly {
		writeTables(&out, benches, results)
	}
	if *only == "" && !*scriptsOnly {
		var blc *redis.Client // nil without --baseline
		if *baseline != "" {
			blc = redis.NewClient(&redis.Options{Addr: addrs["baseline"], Protocol: 2})
		}
		mem, err := memory(ctx, rlc, blc, rdc, shas)
		if err != nil {
			return err
		}
		out.WriteString(mem)
	}
	// The scripts come after the memory section: their keys expire for
	// seconds after their runs, which would shrink used_memory while the
	// memory section measures its growth.
	if !*memOnly {
		clients := map[string]*redis.Client{"redis": rdc, "rlserver": rlc, "rlserver 1 core": rl1c}
		if *baseline != "" {
			clients["baseline"] = redis.NewClient(&redis.Options{Addr: addrs["baseline"], Protocol: 2})
		}
		if err := measureScripts(ctx, &out, clients, addrs); err != nil {
			return err
		}
	}
	return report(out.String())
}

// startServers starts the servers measured — rlserver on Go's default
// GOMAXPROCS (every core) and on one core (as Redis executes commands on one
// thread, which leaves the load generator a core of its own on a two-core
// machine), redis-server, and with --baseline the earlier build likewise —
// and waits until each answers. It returns their addresses by name and a
// function that stops them all (to call even on error).
func startServers(tmp string) (map[string]string, func(), error) {
	var procs []*exec.Cmd
	stop := func() {
		for _, p := range procs {
			p.Process.Kill()
			p.Wait()
		}
	}
	bin := filepath.Join(tmp, "rlserver")
	if out, err := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/rlserver").CombinedOutput(); err != nil {
		return nil, stop, fmt.Errorf("building rlserver: %v\n%s", err, out)
	}
	rlserver := func(path, addr string, env ...string) *exec.Cmd {
		args := []string{"--addr", addr, "--data-dir", "", "--rules", "bench/rules.yaml", "--log-level", "warn"}
		if *nshards > 0 {
			args = append(args, "--shards", strconv.Itoa(*nshards))
		}
		cmd := exec.Command(path, args...)
		cmd.Stderr = os.Stderr
		cmd.Env = append(os.Environ(), env...)
		return cmd
	}
	addrs := map[string]string{"redis": freeAddr(), "rlserver": freeAddr(), "rlserver 1 core": freeAddr()}
	_, redisPort, _ := net.SplitHostPort(addrs["redis"])
	procs = append(procs, rlserver(bin, addrs["rlserver"]), rlserver(bin, addrs["rlserver 1 core"], "GOMAXPROCS=1"),
		exec.Command("redis-server", "--port", redisPort, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--daemonize", "no", "--logfile", "", "--loglevel", "warning", "--dir", tmp))
	if *baseline != "" {
		addrs["baseline"], addrs["baseline 1 core"] = freeAddr(), freeAddr()
		procs = append(procs, rlserver(*baseline, addrs["baseline"]), rlserver(*baseline, addrs["baseline 1 core"], "GOMAXPROCS=1"))
	}
	for i, p := range procs {
		if err := p.Start(); err != nil {
			procs = procs[:i]
			return nil, stop, err
		}
	}
	for i, name := range []string{"rlserver", "rlserver 1 core", "redis", "baseline", "baseline 1 core"}[:len(procs)] {
		serverPID[name] = procs[i].Process.Pid // the order procs were built in
	}
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
		err := waitUp(context.Background(), c)
		c.Close()
		if err != nil {
			return nil, stop, fmt.Errorf("%s: %w", addr, err)
		}
	}
	return addrs, stop, nil
}

// loadScripts loads Redis's Lua limiters and returns their SHA1s by name.
func loadScripts(ctx context.Context, rdc *redis.Client) (map[string]string, error) {
	shas := map[string]string{}
	for _, name := range []string{"token_bucket", "sliding_counter", "sliding_log", "gcra"} {
		src, err := os.ReadFile(filepath.Join("bench", "lua", name+".lua"))
		if err != nil {
			return nil, err
		}
		if shas[name], err = rdc.ScriptLoad(ctx, string(src)).Result(); err != nil {
			return nil, fmt.Errorf("loading %s.lua: %w", name, err)
		}
	}
	return shas, nil
}

// benchmarks lists every line of the throughput tables: Redis's, then
// rlserver's (each compared with a Redis line), repeated for rlserver on one
// core and for the baseline.
func benchmarks(shas map[string]string) []bench {
	benches := []bench{
		{"redis", "PING", []string{"PING"}, ""},
		{"redis", "INCR", []string{"INCR", "k:__rand_int__"}, ""},
		{"redis", "EVALSHA token_bucket", []string{"EVALSHA", shas["token_bucket"], "1", "tb:__rand_int__", "1000", "1000", "1"}, ""},
		{"redis", "EVALSHA sliding_counter", []string{"EVALSHA", shas["sliding_counter"], "1", "sc:__rand_int__", "1000", "1000", "1"}, ""},
		{"redis", "EVALSHA sliding_log", []string{"EVALSHA", shas["sliding_log"], "1", "sl:__rand_int__", "1000", "1000", "1"}, ""},
		{"redis", "EVALSHA gcra", []string{"EVALSHA", shas["gcra"], "1", "gc:__rand_int__", "999", "1000", "1", "1"}, ""},
		{"rlserver", "PING", []string{"PING"}, "PING"},
		{"rlserver", "INCR", []string{"INCR", "k:__rand_int__"}, "INCR"},
		{"rlserver", "RL.ALLOW token_bucket", []string{"RL.ALLOW", "tb:__rand_int__", "token_bucket"}, "EVALSHA token_bucket"},
		{"rlserver", "RL.ALLOW leaky_bucket", []string{"RL.ALLOW", "lb:__rand_int__", "leaky_bucket"}, "EVALSHA token_bucket"},
		{"rlserver", "RL.ALLOW fixed_window", []string{"RL.ALLOW", "fw:__rand_int__", "fixed_window"}, "INCR"},
		{"rlserver", "RL.ALLOW sliding_log", []string{"RL.ALLOW", "sl:__rand_int__", "sliding_log"}, "EVALSHA sliding_log"},
		{"rlserver", "RL.ALLOW sliding_counter", []string{"RL.ALLOW", "sc:__rand_int__", "sliding_counter"}, "EVALSHA sliding_counter"},
		{"rlserver", "CL.THROTTLE (GCRA)", []string{"CL.THROTTLE", "gc:__rand_int__", "999", "1000", "1"}, "EVALSHA gcra"},
	}
	for _, b := range benches {
		if b.server != "rlserver" {
			continue
		}
		variants := []string{"rlserver 1 core"}
		if *baseline != "" {
			variants = append(variants, "baseline", "baseline 1 core")
		}
		for _, v := range variants {
			b.server = v
			benches = append(benches, b)
		}
	}
	return benches
}

// writeTables writes one throughput table per pipeline depth, with each
// rlserver line's ratios to Redis's line, to its own PING and to the
// baseline's same line.
func writeTables(out *strings.Builder, benches []bench, results map[string]map[int]result) {
	for _, pipeline := range []int{1, 16} {
		fmt.Fprintf(out, "## Pipeline %d (-P %d)\n\n", pipeline, pipeline)
		fmt.Fprintf(out, "| server | command | req/s | p50 ms | p99 ms | compared with Redis's | ratio req/s | ratio vs own PING | ratio vs baseline |\n|---|---|---:|---:|---:|---|---:|---:|---:|\n")
		for _, b := range benches {
			r, ok := results[b.server+" "+b.name][pipeline]
			if !ok {
				continue
			}
			ratio, vsPing, vsBase := "", "", ""
			if base, ok := results[strings.Replace(b.server, "rlserver", "baseline", 1)+" "+b.name][pipeline]; ok && strings.HasPrefix(b.server, "rlserver") && base.rps > 0 {
				vsBase = fmt.Sprintf("%.2f×", r.rps/base.rps)
			}
			if b.vs != "" {
				if base, ok := results["redis "+b.vs][pipeline]; ok && base.rps > 0 {
					ratio = fmt.Sprintf("%.2f×", r.rps/base.rps)
				}
				if ping, ok := results[b.server+" PING"][pipeline]; ok && b.name != "PING" {
					vsPing = fmt.Sprintf("%.2f×", r.rps/ping.rps)
				}
			}
			fmt.Fprintf(out, "| %s | %s | %.0f | %.3f | %.3f | %s | %s | %s | %s |\n", b.server, b.name, r.rps, r.p50, r.p99, b.vs, ratio, vsPing, vsBase)
		}
		out.WriteString("\n")
	}
}

// report prints the results and writes them to bench/results/ (a partial
// run, --quick, --only or --memory-only, to the temporary directory
// instead).
func report(text string) error {
	fmt.Println(text)
	name := filepath.Join("bench", "results", time.Now().UTC().Format("2006-01-02T150405Z")+".md")
	if *quick || *only != "" || *memOnly { // --scripts-only is a full run of its section
		name = filepath.Join(os.TempDir(), "rlbench-partial.md") // not a full run: keep it out of bench/results
	}
	if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
		return err
	}
	fmt.Println("written to", name)
	return nil
}

// measureAll runs each benchmark *runs times at -P 1 and -P 16, each run
// sized to last about *seconds, and returns the median of each figure, keyed
// by "server name" and pipeline. The runs are interleaved — every benchmark
// once, then every benchmark again — so a machine that speeds up or slows
// down during the session moves every line alike and the ratios hold.
//
// With sameCount, the lines of one name (the same command on each server)
// run the same number of requests: the mean of their probes' rates times
// *seconds, so each key sees as many requests on either server and the
// scripts' state (counters, list lengths) grows alike; the faster server's
// run is the shorter.
func measureAll(benches []bench, addrs map[string]string, sameCount bool) (map[string]map[int]result, error) {
	type job struct {
		b        bench
		pipeline int
		n        int // requests per run, from a short calibration run
		rs       []result
	}
	var jobs []*job
	for _, pipeline := range []int{1, 16} {
		for _, b := range benches {
			if *only != "" && !strings.Contains(b.name, *only) {
				continue
			}
			probe, err := benchmark(addrs[b.server], pipeline, 2000*pipeline, b.args)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", b.server, b.name, err)
			}
			jobs = append(jobs, &job{b: b, pipeline: pipeline, n: max(int(probe.rps**seconds), 1000)})
		}
	}
	if sameCount {
		sum, lines := map[string]int{}, map[string]int{}
		for _, j := range jobs {
			k := fmt.Sprint(j.b.name, j.pipeline)
			sum[k] += j.n
			lines[k]++
		}
		for _, j := range jobs {
			k := fmt.Sprint(j.b.name, j.pipeline)
			j.n = sum[k] / lines[k]
		}
	}
	for run := range *runs {
		for _, j := range jobs {
			r, err := benchmark(addrs[j.b.server], j.pipeline, j.n, j.b.args)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", j.b.server, j.b.name, err)
			}
			j.rs = append(j.rs, r)
			fmt.Fprintf(os.Stderr, "  run %d  %-44s P%-2d %10.0f req/s  p50 %.3f ms  p99 %.3f ms\n", run+1, j.b.server+" "+j.b.name, j.pipeline, r.rps, r.p50, r.p99)
		}
	}
	results := map[string]map[int]result{}
	for _, j := range jobs {
		key := j.b.server + " " + j.b.name
		if results[key] == nil {
			results[key] = map[int]result{}
		}
		results[key][j.pipeline] = median(j.rs)
	}
	return results, nil
}

// median returns the median of each figure of rs.
func median(rs []result) result {
	med := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return result{med(func(r result) float64 { return r.rps }), med(func(r result) float64 { return r.p50 }), med(func(r result) float64 { return r.p99 })}
}

// benchmark runs redis-benchmark once and reads its CSV line:
// "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms".
func benchmark(addr string, pipeline, n int, args []string) (result, error) {
	host, port, _ := net.SplitHostPort(addr)
	cmdArgs := append([]string{"-h", host, "-p", port, "-c", strconv.Itoa(*clients), "-n", strconv.Itoa(n),
		"-P", strconv.Itoa(pipeline), "-r", strconv.Itoa(*keys), "--csv"}, args...)
	out, err := exec.Command("redis-benchmark", cmdArgs...).Output()
	if err != nil {
		return result{}, fmt.Errorf("redis-benchmark: %w", err)
	}
	rows, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	if err != nil || len(rows) < 2 || len(rows[1]) < 7 {
		return result{}, fmt.Errorf("unexpected redis-benchmark output %q", out)
	}
	f := func(i int) float64 { v, _ := strconv.ParseFloat(rows[1][i], 64); return v }
	return result{rps: f(1), p50: f(4), p99: f(6)}, nil
}

// memory loads *memKeys distinct keys per algorithm into each server and
// reports bytes per key from the growth of INFO memory's used_memory
// (rlserver's is the Go heap after a MEMORY PURGE collection).
func memory(ctx context.Context, rl, bl, rd *redis.Client, shas map[string]string) (string, error) {
	type load struct {
		server *redis.Client
		label  string
		cmd    func(i int) []any
	}
	n := *memKeys
	key := func(prefix string, i int) string { return fmt.Sprintf("%s:%012d", prefix, i) }
	loads := []load{
		{rd, "redis INCR (plain counter, no TTL)", func(i int) []any { return []any{"INCR", key("k", i)} }},
		{rd, "redis Lua token_bucket (hash + PEXPIRE)", func(i int) []any {
			return []any{"EVALSHA", shas["token_bucket"], 1, key("tb", i), 1000, 0.011574, 1}
		}},
		{rd, "redis Lua gcra (string + PX)", func(i int) []any {
			return []any{"EVALSHA", shas["gcra"], 1, key("gc", i), 999, 1000, 86400, 1}
		}},
		{rl, "rlserver INCR (plain key)", func(i int) []any { return []any{"INCR", key("k", i)} }},
		{rl, "rlserver token_bucket", func(i int) []any { return []any{"RL.ALLOW", key("tb", i), "mem_token_bucket"} }},
		{rl, "rlserver leaky_bucket", func(i int) []any { return []any{"RL.ALLOW", key("lb", i), "mem_leaky_bucket"} }},
		{rl, "rlserver fixed_window", func(i int) []any { return []any{"RL.ALLOW", key("fw", i), "mem_fixed_window"} }},
		{rl, "rlserver sliding_counter", func(i int) []any { return []any{"RL.ALLOW", key("sc", i), "mem_sliding_counter"} }},
		{rl, "rlserver sliding_log (1 entry)", func(i int) []any { return []any{"RL.ALLOW", key("sl", i), "mem_sliding_log"} }},
		{rl, "rlserver CL.THROTTLE", func(i int) []any { return []any{"CL.THROTTLE", key("gc", i), 999, 1000, 86400} }},
	}
	if bl != nil { // the earlier build, for before/after
		loads = append(loads,
			load{bl, "baseline INCR (plain key)", func(i int) []any { return []any{"INCR", key("k", i)} }},
			load{bl, "baseline token_bucket", func(i int) []any { return []any{"RL.ALLOW", key("tb", i), "mem_token_bucket"} }},
			load{bl, "baseline leaky_bucket", func(i int) []any { return []any{"RL.ALLOW", key("lb", i), "mem_leaky_bucket"} }},
			load{bl, "baseline fixed_window", func(i int) []any { return []any{"RL.ALLOW", key("fw", i), "mem_fixed_window"} }},
			load{bl, "baseline sliding_counter", func(i int) []any { return []any{"RL.ALLOW", key("sc", i), "mem_sliding_counter"} }},
			load{bl, "baseline sliding_log (1 entry)", func(i int) []any { return []any{"RL.ALLOW", key("sl", i), "mem_sliding_log"} }})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## Memory per key (%d distinct keys each)\n\n| what | bytes per key |\n|---|---:|\n", n)
	for _, l := range loads {
		per, err := growth(ctx, l.server, n, l.cmd)
		if err != nil {
			return "", fmt.Errorf("%s: %w", l.label, err)
		}
		fmt.Fprintf(&b, "| %s | %.1f |\n", l.label, per/float64(n))
		fmt.Fprintf(os.Stderr, "  memory: %-42s %.1f bytes/key\n", l.label, per/float64(n))
	}
	// Bytes per sliding-log entry: the same keys with 100 entries against 1.
	logKeys := max(n/100, 100)
	one, err := growth(ctx, rl, logKeys, func(i int) []any { return []any{"RL.ALLOW", key("l1", i), "mem_sliding_log", 1} })
	if err != nil {
		return "", err
	}
	hundred, err := growth(ctx, rl, logKeys, func(i int) []any { return []any{"RL.ALLOW", key("l100", i), "mem_sliding_log", 100} })
	if err != nil {
		return "", err
	}
	rdOne, err := growth(ctx, rd, logKeys, func(i int) []any {
		return []any{"EVALSHA", shas["sliding_log"], 1, key("l1", i), 1000, 86400000, 1}
	})
	if err != nil {
		return "", err
	}
	rdHundred, err := growth(ctx, rd, logKeys, func(i int) []any {
		return []any{"EVALSHA", shas["sliding_log"], 1, key("l100", i), 1000, 86400000, 100}
	})
	if err != nil {
		return "", err
	}
	perEntry := func(a, b float64) float64 { return (b - a) / float64(99*logKeys) }
	fmt.Fprintf(&b, "\n## Sliding log: bytes per stored entry (%d keys, 100 entries against 1)\n\n| server | bytes per entry |\n|---|---:|\n", logKeys)
	fmt.Fprintf(&b, "| rlserver | %.1f |\n| redis Lua (sorted set) | %.1f |\n", perEntry(one, hundred), perEntry(rdOne, rdHundred))
	return b.String(), nil
}

// growth loads n keys with cmd (pipelined) and returns used_memory's growth.
func growth(ctx context.Context, c *redis.Client, n int, cmd func(i int) []any) (float64, error) {
	before, err := usedMemory(ctx, c)
	if err != nil {
		return 0, err
	}
	const batch = 1000
	for i := 0; i < n; i += batch {
		p := c.Pipeline()
		for j := i; j < min(i+batch, n); j++ {
			p.Do(ctx, cmd(j)...)
		}
		cmds, err := p.Exec(ctx)
		if err != nil {
			return 0, fmt.Errorf("loading keys: %w (%v)", err, cmds[0].Args())
		}
	}
	after, err := usedMemory(ctx, c)
	return after - before, err
}

func usedMemory(ctx context.Context, c *redis.Client) (float64, error) {
	c.Do(ctx, "MEMORY", "PURGE") // rlserver: collect garbage first; Redis: release dirty pages
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(infoField(info, "used_memory"), 64)
}

func infoField(info, name string) string {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitUp(ctx context.Context, c *redis.Client) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(ctx).Err()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond) // a server starting up, polled with a deadline
	}
}

func hostInfo() string {
	cpu := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	out, _ := exec.Command("nproc").Output()
	return fmt.Sprintf("%s cores of %s", strings.TrimSpace(string(out)), cpu)
}
