package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/resp"
	"github.com/rlserver/rlserver/internal/testserver"
)

// Process-level tests run a real server in a child process — this test
// binary, re-executed with childEnv set — so that its memory (RSS from
// /proc) and CPU time are its own, and a server that spins or balloons
// cannot hide inside the test process.

const childEnv = "RLSERVER_RESP_TEST_CHILD"

// childConfig is what a child server is started with.
type childConfig struct {
	EventLoops int
	Password   string
	Idle       time.Duration
	Limits     resp.Limits
}

// runChildIfAsked turns this process into a child server when childEnv is
// set: it serves until its standard input closes, printing its address
// first. It is called from TestMain before any test runs.
func runChildIfAsked() {
	spec := os.Getenv(childEnv)
	if spec == "" {
		return
	}
	var cfg childConfig
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	ts, stop, err := testserver.New(testserver.Options{Shards: 2, Model: true, EventLoops: cfg.EventLoops,
		Password: cfg.Password, Idle: cfg.Idle, Limits: cfg.Limits,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	fmt.Printf("ADDR %s\n", ts.Addr)
	io.Copy(io.Discard, os.Stdin) // until the parent closes it, or dies
	stop()
	os.Exit(0)
}

// child is a server in a child process.
type child struct {
	addr string
	pid  int
}

// startChild starts a child server with cfg and environment env (such as
// GOMAXPROCS=1); it is stopped when the test ends.
func startChild(t *testing.T, cfg childConfig, env ...string) *child {
	t.Helper()
	if cfg.Limits == (resp.Limits{}) {
		cfg.Limits = resp.DefaultLimits
	}
	spec, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+string(spec)), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ADDR ")
	if err != nil || !ok {
		t.Fatalf("child server did not start: %q %v", line, err)
	}
	return &child{addr: addr, pid: cmd.Process.Pid}
}

// memory returns the child's resident set size and its peak (VmRSS and
// VmHWM), in bytes.
func (ch *child) memory(t *testing.T) (rss, peak int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", ch.pid))
	if err != nil {
		t.Fatal(err)
	}
	field := func(name string) int64 {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, name+":"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
				return kb << 10
			}
		}
		t.Fatalf("/proc/%d/status has no %s", ch.pid, name)
		return 0
	}
	return field("VmRSS"), field("VmHWM")
}

// cpu returns the CPU time the child has used (user and system).
func (ch *child) cpu(t *testing.T) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", ch.pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from the last ')'. utime and stime are fields 14 and 15.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ, 100 on every Linux this runs on
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

// needsProc skips a process-level test where /proc is not Linux's.
func needsProc(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs Linux's /proc")
	}
}
