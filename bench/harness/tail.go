package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The tail section (--tail): latency percentiles, server CPU per request
// and garbage-collector pauses of RL.ALLOW against Redis's INCR, with a
// keyspace of live keys loaded first, as issue 18's targets are stated
// (P1 p99 with 1M live keys, CPU per decision at P16 with and without
// them). Every server gets the same keys; each run draws keys at random
// from them, so no run creates a key.

var (
	tail      = flag.Bool("tail", false, "run only the tail section: p50/p99/p99.9, server CPU per request and GC pauses of RL.ALLOW against INCR, over --live-keys live keys")
	liveKeys  = flag.Int("live-keys", 1_000_000, "keys loaded into every server before the tail section's runs (0: none; keys are then created by the runs)")
	serverPID = map[string]int{} // by the names of startServers' addresses
)

// tailResult is one run of the tail section.
type tailResult struct {
	rps, p50, p99, p999 float64 // req/s, ms
	cpuPerReq           float64 // µs of server CPU (user + system) per request
	gcPause             float64 // ms of GC pauses during the run (rlserver)
	gcCycles            float64 // GC cycles during the run (rlserver)
}

func runTail() error {
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
	names := []string{"redis", "rlserver", "rlserver 1 core"}
	if *baseline != "" {
		names = append(names, "baseline", "baseline 1 core")
	}
	conns := map[string]*redis.Client{}
	for _, n := range names {
		conns[n] = redis.NewClient(&redis.Options{Addr: addrs[n], Protocol: 2})
	}
	keyspace := max(*liveKeys, 1)
	if *liveKeys == 0 {
		keyspace = *keys
	}
	for _, n := range names {
		start := time.Now()
		if err := loadLive(ctx, conns[n], n == "redis"); err != nil {
			return fmt.Errorf("%s: loading live keys: %w", n, err)
		}
		fmt.Fprintf(os.Stderr, "  %s: %d live keys loaded in %v\n", n, *liveKeys, time.Since(start).Round(time.Millisecond))
	}
	command := func(n string) []string {
		if n == "redis" {
			return []string{"INCR", "live:__rand_int__"}
		}
		return []string{"RL.ALLOW", "live:__rand_int__", "mem_token_bucket"}
	}
	results := map[string][]tailResult{}
	for run := range *runs {
		for _, p := range []int{1, 16} {
			for _, n := range names {
				reqs := int(*seconds * map[int]float64{1: 60_000, 16: 400_000}[p])
				if *quick {
					reqs = 2000 * p
				}
				r, err := tailRun(ctx, conns[n], addrs[n], serverPID[n], p, reqs, keyspace, command(n))
				if err != nil {
					return fmt.Errorf("%s P%d: %w", n, p, err)
				}
				k := fmt.Sprint(n, " P", p)
				results[k] = append(results[k], r)
				fmt.Fprintf(os.Stderr, "  run %d  %-16s P%-2d %9.0f req/s  p50 %.3f  p99 %.3f  p99.9 %.3f ms  cpu %.2f µs/req  gc %.1f ms in %.0f cycles\n",
					run+1, n, p, r.rps, r.p50, r.p99, r.p999, r.cpuPerReq, r.gcPause, r.gcCycles)
			}
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "# Tail latency, CPU per request and GC pauses — %s\n\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&out, "`bench/run.sh %s` on %s: %d live keys loaded into every server first (rlserver: RL.ALLOW live:N mem_token_bucket, a day-long token bucket; Redis: SET live:N 1), then redis-benchmark -c %d over them at random (RL.ALLOW on rlserver, INCR on Redis), median of %d interleaved runs. Server CPU is user + system from /proc/PID/stat over the run, divided by its requests; GC pauses are INFO memory's gc_pause_total_ns over the run (rlserver builds that report it).\n\n",
		strings.Join(os.Args[1:], " "), hostInfo(), *liveKeys, *clients, *runs)
	for _, p := range []int{1, 16} {
		fmt.Fprintf(&out, "### Pipeline %d\n\n| server | command | req/s | p50 ms | p99 ms | p99.9 ms | server CPU µs/req | GC pause ms per run | GC cycles per run | p99 / Redis's |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n", p)
		redisP99 := tailMedian(results[fmt.Sprint("redis P", p)]).p99
		for _, n := range names {
			m := tailMedian(results[fmt.Sprint(n, " P", p)])
			gc := fmt.Sprintf("%.1f | %.0f", m.gcPause, m.gcCycles)
			if m.gcPause < 0 {
				gc = "n/a | n/a"
			}
			fmt.Fprintf(&out, "| %s | %s | %.0f | %.3f | %.3f | %.3f | %.2f | %s | %.2f |\n",
				n, command(n)[0], m.rps, m.p50, m.p99, m.p999, m.cpuPerReq, gc, m.p99/redisP99)
		}
		out.WriteString("\n")
	}
	return report(out.String())
}

// loadLive loads *liveKeys keys into c: day-long token buckets on
// rlserver, strings on Redis.
func loadLive(ctx context.Context, c *redis.Client, isRedis bool) error {
	const batch = 1000
	for i := 0; i < *liveKeys; i += batch {
		p := c.Pipeline()
		for j := i; j < min(i+batch, *liveKeys); j++ {
			k := fmt.Sprintf("live:%012d", j)
			if isRedis {
				p.Set(ctx, k, 1, 0)
			} else {
				p.Do(ctx, "RL.ALLOW", k, "mem_token_bucket")
			}
		}
		if _, err := p.Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

// tailRun runs redis-benchmark once against addr and measures the server
// (pid) around it.
func tailRun(ctx context.Context, c *redis.Client, addr string, pid, pipeline, n, keyspace int, args []string) (tailResult, error) {
	pause0, cycles0 := gcCounters(ctx, c)
	cpu0, err := processCPU(pid)
	if err != nil {
		return tailResult{}, err
	}
	host, port, _ := net.SplitHostPort(addr)
	cmdArgs := append([]string{"-h", host, "-p", port, "-c", strconv.Itoa(*clients), "-n", strconv.Itoa(n),
		"-P", strconv.Itoa(pipeline), "-r", strconv.Itoa(keyspace)}, args...)
	out, err := exec.Command("redis-benchmark", cmdArgs...).Output()
	if err != nil {
		return tailResult{}, fmt.Errorf("redis-benchmark: %w", err)
	}
	cpu1, err := processCPU(pid)
	if err != nil {
		return tailResult{}, err
	}
	pause1, cycles1 := gcCounters(ctx, c)
	r, err := parseLatencies(string(out))
	if err != nil {
		return tailResult{}, err
	}
	r.cpuPerReq = (cpu1 - cpu0).Seconds() * 1e6 / float64(n)
	r.gcPause, r.gcCycles = -1, -1
	if pause0 >= 0 && pause1 >= 0 {
		r.gcPause, r.gcCycles = (pause1-pause0)/1e6, cycles1-cycles0
	}
	return r, nil
}

// gcCounters reads INFO memory's gc_pause_total_ns and gc_cycles; -1 when
// the server does not report them (Redis, an earlier build).
func gcCounters(ctx context.Context, c *redis.Client) (pauseNs, cycles float64) {
	info, err := c.Info(ctx, "memory").Result()
	p, err1 := strconv.ParseFloat(infoField(info, "gc_pause_total_ns"), 64)
	n, err2 := strconv.ParseFloat(infoField(info, "gc_cycles"), 64)
	if err != nil || err1 != nil || err2 != nil {
		return -1, -1
	}
	return p, n
}

// processCPU returns the user + system CPU time pid has used
// (/proc/PID/stat fields 14 and 15, in clock ticks of 1/100 s on Linux).
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is parenthesised and may hold spaces.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	const ticksPerSecond = 100 // USER_HZ, fixed by Linux's ABI
	return time.Duration(utime+stime) * time.Second / ticksPerSecond, nil
}

// parseLatencies reads redis-benchmark's report: requests per second from
// its summary, p50 and p99 from the summary's latency line, and p99.9 from
// the percentile distribution (the first percentile at or above 99.9).
func parseLatencies(out string) (tailResult, error) {
	var r tailResult
	var fields []string // the summary's latency figures: avg min p50 p95 p99 max
	p999 := -1.0
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "throughput summary:"):
			f := strings.Fields(line)
			if len(f) >= 3 {
				r.rps, _ = strconv.ParseFloat(f[2], 64)
			}
		case strings.HasPrefix(line, "avg") && strings.Contains(line, "p99"):
			if sc.Scan() {
				fields = strings.Fields(sc.Text())
			}
		case p999 < 0 && strings.Contains(line, "% <= "):
			pct, rest, _ := strings.Cut(line, "% <= ")
			v, err := strconv.ParseFloat(pct, 64)
			if err == nil && v >= 99.9 {
				ms, _, _ := strings.Cut(rest, " ")
				p999, _ = strconv.ParseFloat(ms, 64)
			}
		}
	}
	if r.rps == 0 || len(fields) < 6 || p999 < 0 {
		return r, fmt.Errorf("unexpected redis-benchmark output %q", out)
	}
	r.p50, _ = strconv.ParseFloat(fields[2], 64)
	r.p99, _ = strconv.ParseFloat(fields[4], 64)
	r.p999 = p999
	return r, nil
}

// tailMedian returns the median of each figure of rs.
func tailMedian(rs []tailResult) tailResult {
	med := func(f func(tailResult) float64) float64 {
		v := make([]float64, 0, len(rs))
		for _, r := range rs {
			v = append(v, f(r))
		}
		if len(v) == 0 {
			return 0
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return tailResult{
		rps:       med(func(r tailResult) float64 { return r.rps }),
		p50:       med(func(r tailResult) float64 { return r.p50 }),
		p99:       med(func(r tailResult) float64 { return r.p99 }),
		p999:      med(func(r tailResult) float64 { return r.p999 }),
		cpuPerReq: med(func(r tailResult) float64 { return r.cpuPerReq }),
		gcPause:   med(func(r tailResult) float64 { return r.gcPause }),
		gcCycles:  med(func(r tailResult) float64 { return r.gcCycles }),
	}
}
