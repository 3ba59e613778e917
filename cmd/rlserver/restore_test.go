package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// restoreKeys is how many keys TestRestoreCost builds: enough that the
// keyspace dominates the process's memory, small enough for CI. Set
// RLSERVER_RESTORE_KEYS (e.g. 1350000) to measure at a larger scale.
func restoreKeys(t *testing.T) int {
	if s := os.Getenv("RLSERVER_RESTORE_KEYS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("RLSERVER_RESTORE_KEYS=%q", s)
		}
		return n
	}
	return 200_000
}

// procStatus reads a field of /proc/PID/status in bytes (VmRSS: resident
// now; VmHWM: the peak resident).
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", field, line)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// fill spends one unit on each of n keys under rule "day", in pipelines.
func fill(t *testing.T, c *redis.Client, n int) {
	t.Helper()
	ctx := context.Background()
	const batch = 10_000
	for i := 0; i < n; i += batch {
		p := c.Pipeline()
		for j := i; j < min(i+batch, n); j++ {
			p.Do(ctx, "RL.ALLOW", fmt.Sprintf("user:%09d", j), "day")
		}
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func mb(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/(1<<20)) }

// TestRestoreCost builds keys live in one process, snapshots them, and
// loads the snapshot in another, comparing resident memory (from /proc) and
// time, and checks that --maxkeys holds while loading under both policies.
func TestRestoreCost(t *testing.T) {
	n := restoreKeys(t)
	data, rulesPath := t.TempDir(), writeRules(t)
	ctx := context.Background()

	live := spawn(t, "--data-dir", data, "--rules", rulesPath, "--snapshot-interval", "0")
	c := live.client(t)
	fill(t, c, n)
	liveRSS := procStatus(t, live.cmd.Process.Pid, "VmRSS")
	start := time.Now()
	if err := c.Do(ctx, "SAVE").Err(); err != nil {
		t.Fatal(err)
	}
	save := time.Since(start)
	live.cmd.Process.Signal(syscall.SIGKILL)
	live.wait(t)

	start = time.Now()
	loaded := spawn(t, "--data-dir", data, "--rules", rulesPath, "--snapshot-interval", "0")
	load := time.Since(start)
	pid := loaded.cmd.Process.Pid
	loadedRSS, loadedPeak := procStatus(t, pid, "VmRSS"), procStatus(t, pid, "VmHWM")
	if got, _ := loaded.client(t).Do(ctx, "RL.PEEK", fmt.Sprintf("user:%09d", n-1), "day").Slice(); got == nil || got[2].(int64) != 9 {
		t.Fatalf("the last key was not restored: %v", got)
	}
	t.Logf("%d keys: built live %s resident; saved in %v; loaded in %v (to serving), %s resident, peak %s",
		n, mb(liveRSS), save.Round(time.Millisecond), load.Round(time.Millisecond), mb(loadedRSS), mb(loadedPeak))
	if float64(loadedRSS) > 1.2*float64(liveRSS) {
		t.Errorf("resident after loading %s, more than 1.2 × the %s of the same keys built live", mb(loadedRSS), mb(liveRSS))
	}
	if float64(loadedPeak) > 1.2*float64(liveRSS) {
		t.Errorf("peak resident while loading %s, more than 1.2 × the %s of the same keys built live", mb(loadedPeak), mb(liveRSS))
	}
	loaded.cmd.Process.Signal(syscall.SIGKILL)
	loaded.wait(t)

	// --maxkeys below what the snapshot holds. evict: the load keeps the
	// limit as it goes, never holding much more than it.
	half := n / 2
	evict := spawn(t, "--data-dir", data, "--rules", rulesPath, "--snapshot-interval", "0", "--maxkeys", strconv.Itoa(half))
	peak := procStatus(t, evict.cmd.Process.Pid, "VmHWM")
	keys, err := evict.client(t).Do(ctx, "RL.INFO").Text()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("--maxkeys %d (evict): peak %s", half, mb(peak))
	held := infoInt(t, keys, "rl_keys")
	if held > half || held < half*9/10 {
		t.Errorf("evict: holding %d keys after loading %d under --maxkeys %d", held, n, half)
	}
	if float64(peak) > 1.2*float64(liveRSS) {
		t.Errorf("evict: peak resident while loading %s, more than 1.2 × the %s of all %d keys built live", mb(peak), mb(liveRSS), n)
	}
	evict.cmd.Process.Signal(syscall.SIGKILL)
	evict.wait(t)

	// reject: a snapshot holding more than --maxkeys is refused, naming the
	// counts, rather than loaded over the limit or cut arbitrarily.
	cmd := exec.Command(binary(t), "--addr", "127.0.0.1:0", "--data-dir", data, "--rules", rulesPath, "--maxkeys", strconv.Itoa(half), "--maxkeys-policy", "reject")
	out, err := runFor(cmd, 60*time.Second)
	if err == nil || !strings.Contains(out, "--maxkeys "+strconv.Itoa(half)) || !strings.Contains(out, strconv.Itoa(n)) {
		t.Errorf("reject: a snapshot of %d keys under --maxkeys %d: %v\n%s", n, half, err, out)
	}
}

// infoInt returns the integer field name of an RL.INFO reply.
func infoInt(t *testing.T, info, name string) int {
	t.Helper()
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: %q", name, line)
			}
			return n
		}
	}
	t.Fatalf("no %s in:\n%s", name, info)
	return 0
}

// runFor runs cmd to completion and returns its combined output; a process
// still running after limit is killed (and reported as started).
func runFor(cmd *exec.Cmd, limit time.Duration) (string, error) {
	var out strings.Builder
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		return "", err
	}
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "rlserver started") {
				cmd.Process.Kill()
			}
		}
	}()
	timer := time.AfterFunc(limit, func() { cmd.Process.Kill() })
	defer timer.Stop()
	<-lines
	err := cmd.Wait()
	if strings.Contains(out.String(), "rlserver started") {
		return out.String(), nil
	}
	return out.String(), err
}
