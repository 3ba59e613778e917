package main

// --cluster-compare: one node in cluster mode against a standalone one, as
// issue 17 asks ("req/s and CPU per decision of one node in cluster mode
// vs standalone within 10%"). Each server is a process of its own on
// loopback, driven in turn by the same redis-benchmark RL.ALLOW load; CPU
// per decision is the server's user + system time (/proc/PID/stat) over
// the run, divided by the requests.

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var clusterCompare = flag.Bool("cluster-compare", false,
	"compare one node in cluster mode (on, with a one-node map; emulated) with standalone ones (event loops; goroutines), RL.ALLOW req/s and CPU per decision, and nothing else")

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on
// every Linux architecture Go runs on.
const clockTicks = 100

// compared is one server of the comparison.
type compared struct {
	name string
	args []string
	addr string
	cmd  *exec.Cmd
}

// clusterServers are the servers compared: standalone as deployed (event
// loops), standalone with a goroutine per connection (what mode on does to
// connections, to tell that cost apart from routing's), emulated mode
// (slot checks, event loops), and mode on with a one-node map (slot
// checks, the hand-over gate, a goroutine per connection).
func clusterServers(tmp string) ([]*compared, error) {
	const id = "0123456789abcdef0123456789abcdef01234567"
	on := &compared{name: "cluster on (1-node map)", addr: freeAddr()}
	host, port, _ := net.SplitHostPort(on.addr)
	m := fmt.Sprintf(`{"version": 1, "nodes": [{"id": %q, "host": %q, "port": %s, "slots": [[0, 16383]]}]}`, id, host, port)
	mapPath := filepath.Join(tmp, "cluster.json")
	if err := os.WriteFile(mapPath, []byte(m), 0o644); err != nil {
		return nil, err
	}
	on.args = []string{"--cluster", "on", "--cluster-config", mapPath, "--cluster-node-id", id}
	return []*compared{
		{name: "standalone", addr: freeAddr()},
		{name: "standalone, goroutines", addr: freeAddr(), args: []string{"--event-loops", "0"}},
		{name: "cluster emulated", addr: freeAddr(), args: []string{"--cluster", "emulated"}},
		on,
	}, nil
}

// runClusterCompare is the whole --cluster-compare run.
func runClusterCompare() error {
	tmp, err := os.MkdirTemp("", "rlbench-cluster")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "rlserver")
	if out, err := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/rlserver").CombinedOutput(); err != nil {
		return fmt.Errorf("building rlserver: %v\n%s", err, out)
	}
	servers, err := clusterServers(tmp)
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range servers {
			if s.cmd != nil {
				s.cmd.Process.Kill()
				s.cmd.Wait()
			}
		}
	}()
	if err := startCompared(bin, servers); err != nil {
		return err
	}
	load := []string{"RL.ALLOW", "tb:__rand_int__", "token_bucket"}
	type cell struct {
		rs  []result
		cpu []float64 // µs per decision
	}
	cells := map[string]*cell{}
	sizes := map[string]int{}
	for _, p := range []int{1, 16} {
		for _, s := range servers {
			probe, err := benchmark(s.addr, p, 2000*p, load)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			sizes[fmt.Sprint(s.name, p)] = max(int(probe.rps**seconds), 1000)
		}
	}
	// Interleaved, as measureAll does: a machine that changes speed moves
	// every server alike.
	for run := range *runs {
		for _, p := range []int{1, 16} {
			for _, s := range servers {
				key := fmt.Sprint(s.name, p)
				n := sizes[key]
				before, err := cpuTicks(s.cmd.Process.Pid)
				if err != nil {
					return err
				}
				r, err := benchmark(s.addr, p, n, load)
				if err != nil {
					return fmt.Errorf("%s: %w", s.name, err)
				}
				after, err := cpuTicks(s.cmd.Process.Pid)
				if err != nil {
					return err
				}
				if cells[key] == nil {
					cells[key] = &cell{}
				}
				c := cells[key]
				c.rs = append(c.rs, r)
				perDecision := float64(after-before) / clockTicks * 1e6 / float64(n)
				c.cpu = append(c.cpu, perDecision)
				fmt.Fprintf(os.Stderr, "  run %d  %-26s P%-2d %10.0f req/s  p99 %.3f ms  %.2f µs CPU/decision\n", run+1, s.name, p, r.rps, r.p99, perDecision)
			}
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "# One node: cluster mode vs standalone — %s\n\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&out, "`bench/run.sh %s` on %s: `RL.ALLOW tb:__rand_int__ token_bucket`, redis-benchmark -c %d, %d random keys, median of %d interleaved runs of ~%.1f s; CPU is the server's user + system time over a run divided by its requests.\n\n",
		strings.Join(os.Args[1:], " "), hostInfo(), *clients, *keys, *runs, *seconds)
	for _, p := range []int{1, 16} {
		fmt.Fprintf(&out, "## Pipeline %d\n\n| server | req/s | p50 ms | p99 ms | CPU µs per decision | req/s vs standalone | CPU vs standalone |\n|---|---:|---:|---:|---:|---:|---:|\n", p)
		base := cells[fmt.Sprint(servers[0].name, p)]
		baseR, baseCPU := median(base.rs), medianOf(base.cpu)
		for _, s := range servers {
			c := cells[fmt.Sprint(s.name, p)]
			r, cpu := median(c.rs), medianOf(c.cpu)
			fmt.Fprintf(&out, "| %s | %.0f | %.3f | %.3f | %.2f | %.2f× | %.2f× |\n", s.name, r.rps, r.p50, r.p99, cpu, r.rps/baseR.rps, cpu/baseCPU)
		}
		out.WriteString("\n")
	}
	fmt.Println(out.String())
	name := filepath.Join("bench", "results", time.Now().UTC().Format("2006-01-02T150405Z")+"-cluster.md")
	if *quick {
		name = filepath.Join(os.TempDir(), "rlbench-cluster-partial.md")
	}
	if err := os.WriteFile(name, []byte(out.String()), 0o644); err != nil {
		return err
	}
	fmt.Println("written to", name)
	return nil
}

// startCompared starts every server compared and waits until each
// answers.
func startCompared(bin string, servers []*compared) error {
	for _, s := range servers {
		args := append([]string{"--addr", s.addr, "--data-dir", "", "--rules", "bench/rules.yaml", "--log-level", "warn"}, s.args...)
		if *nshards > 0 {
			args = append(args, "--shards", strconv.Itoa(*nshards))
		}
		s.cmd = exec.Command(bin, args...)
		s.cmd.Stderr = os.Stderr
		if err := s.cmd.Start(); err != nil {
			s.cmd = nil
			return err
		}
	}
	for _, s := range servers {
		c := redis.NewClient(&redis.Options{Addr: s.addr, Protocol: 2})
		err := waitUp(context.Background(), c)
		c.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}

// cpuTicks returns a process's user + system time, in clock ticks, from
// /proc/PID/stat (fields 14 and 15, counted after the command name, which
// may hold spaces but ends at the last ')').
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	// fields[0] is field 3 (state): utime is field 14, stime 15.
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	return utime + stime, nil
}

// medianOf is the median of v.
func medianOf(v []float64) float64 {
	rs := make([]result, len(v))
	for i, x := range v {
		rs[i].rps = x
	}
	return median(rs).rps
}
