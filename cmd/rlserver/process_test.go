package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"

	"github.com/rlserver/rlserver/internal/snapshot"
)

// These tests run the real binary as a separate process, to check what
// survives kill -9 and SIGTERM, and what an operator sees on the command
// line.

// The binary is built once per test process, exactly as the Dockerfile
// builds it (TestDockerfileBuild checks the command is the same), in the
// background while the in-process tests run. TEST_RLSERVER_BINARY names a
// binary to test instead (an older build, to see a test fail on it).
var testBinary struct {
	path  string
	err   error
	built chan struct{} // closed when path or err is set
}

// dockerBuildFlags are the Dockerfile's go build flags, with the version
// the tests expect.
var dockerBuildFlags = []string{"-trimpath", "-ldflags", "-s -w -X main.version=test-docker"}

func TestMain(m *testing.M) {
	testBinary.built = make(chan struct{})
	dir, err := os.MkdirTemp("", "rlserver-bin")
	if err != nil {
		panic(err)
	}
	if p := os.Getenv("TEST_RLSERVER_BINARY"); p != "" {
		testBinary.path = p
		close(testBinary.built)
	} else {
		go func() {
			defer close(testBinary.built)
			path := filepath.Join(dir, "rlserver")
			build := exec.Command("go", append(append([]string{"build"}, dockerBuildFlags...), "-o", path, ".")...)
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := build.CombinedOutput(); err != nil {
				testBinary.err = fmt.Errorf("building rlserver: %v\n%s", err, out)
				return
			}
			testBinary.path = path
		}()
	}
	code := m.Run()
	<-testBinary.built // the build's goroutine ends before the process does
	os.RemoveAll(dir)
	os.Exit(code)
}

// binary returns the path of the rlserver binary, waiting for its build.
func binary(t testing.TB) string {
	t.Helper()
	<-testBinary.built
	if testBinary.err != nil {
		t.Fatal(testBinary.err)
	}
	return testBinary.path
}

type process struct {
	cmd     *exec.Cmd
	addr    string // RESP
	metrics string // "" when off
	out     *syncBuffer
	exited  chan struct{} // closed when the process has exited
	err     error         // its exit status, once exited is closed
}

var metricsInLog = regexp.MustCompile(`metrics=(127\.0\.0\.1:\d+)`)

// testEnv is the environment processes get: the test's, without RLSERVER_
// variables, plus env.
func testEnv(env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RLSERVER_") {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

// spawn starts the binary on 127.0.0.1:0 and waits for its start-up line.
func spawn(t *testing.T, args ...string) *process {
	t.Helper()
	return spawnEnv(t, nil, append([]string{"--addr", "127.0.0.1:0"}, args...)...)
}

// spawnEnv starts the binary with args and the variables env (and nothing
// else of RLSERVER_), waits for its start-up line, and kills it when the
// test ends.
func spawnEnv(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = testEnv(env...)
	cmd.Dir = t.TempDir() // where a default ./data would go
	p := &process{cmd: cmd, out: &syncBuffer{wrote: make(chan struct{}, 1)}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
	})
	timeout := time.After(20 * time.Second)
	for {
		if m := startedLine.FindStringSubmatch(p.out.String()); m != nil {
			p.addr = m[1]
			if m := metricsInLog.FindStringSubmatch(p.out.String()); m != nil {
				p.metrics = m[1]
			}
			return p
		}
		select {
		case <-p.out.wrote:
		case <-p.exited:
			t.Fatalf("exited before serving (%v):\n%s", p.err, p.out.String())
		case <-timeout:
			t.Fatalf("no start-up line:\n%s", p.out.String())
		}
	}
}

func (p *process) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(20 * time.Second):
		t.Fatal("process did not exit")
		return nil
	}
}

func (p *process) client(t *testing.T) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: p.addr, Protocol: 2, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

func writeRules(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	// A day-long window: the seconds a test takes refill nothing.
	os.WriteFile(path, []byte("rules:\n  - {name: day, algorithm: token_bucket, limit: 10, window: 24h}\n"), 0o644)
	return path
}

func remaining(t *testing.T, c *redis.Client, cmd string, cost int) int64 {
	t.Helper()
	v, err := c.Do(context.Background(), cmd, "user:1", "day", cost).Slice()
	if err != nil {
		t.Fatal(err)
	}
	return v[2].(int64)
}

func TestKill9AfterSaveKeepsTheBudget(t *testing.T) {
	t.Parallel()
	data, rulesPath := t.TempDir(), writeRules(t)
	p := spawn(t, "--data-dir", data, "--rules", rulesPath, "--snapshot-interval", "0")
	c := p.client(t)
	if r := remaining(t, c, "RL.ALLOW", 7); r != 3 {
		t.Fatalf("remaining %d after spending 7", r)
	}
	c.Do(context.Background(), "RL.RULE", "SET", "runtime", "fixed_window", "5", "24h")
	if err := c.Do(context.Background(), "SAVE").Err(); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(unix.SIGKILL)
	p.wait(t)

	p2 := spawn(t, "--data-dir", data, "--rules", rulesPath)
	c2 := p2.client(t)
	if r := remaining(t, c2, "RL.PEEK", 1); r != 3 {
		t.Fatalf("after kill -9 and restart: %d remaining, want 3", r)
	}
	if err := c2.Do(context.Background(), "RL.RULE", "GET", "runtime").Err(); err != nil {
		t.Fatalf("a rule created at run time was not restored: %v", err)
	}
}

func TestSigtermWritesAFinalSnapshot(t *testing.T) {
	t.Parallel()
	for _, loops := range []string{"0", "1"} {
		t.Run("event-loops="+loops, func(t *testing.T) {
			t.Parallel()
			data, rulesPath := t.TempDir(), writeRules(t)
			p := spawn(t, "--data-dir", data, "--rules", rulesPath, "--snapshot-interval", "0", "--event-loops", loops)
			c := p.client(t)
			remaining(t, c, "RL.ALLOW", 4)
			info, _ := c.Do(context.Background(), "RL.INFO").Text()
			if !strings.Contains(info, "rl_event_loops:"+loops+"\r\n") {
				t.Fatalf("RL.INFO does not report --event-loops %s:\n%s", loops, info)
			}
			p.cmd.Process.Signal(unix.SIGTERM)
			if err := p.wait(t); err != nil {
				t.Fatalf("exit after SIGTERM: %v\n%s", err, p.out.String())
			}
			if !strings.Contains(p.out.String(), "final snapshot written") {
				t.Fatalf("no final snapshot:\n%s", p.out.String())
			}
			p2 := spawn(t, "--data-dir", data, "--rules", rulesPath, "--event-loops", loops)
			if r := remaining(t, p2.client(t), "RL.PEEK", 1); r != 6 {
				t.Fatalf("after SIGTERM and restart: %d remaining, want 6", r)
			}
		})
	}
}

func TestShutdownCommand(t *testing.T) {
	t.Parallel()
	data, rulesPath := t.TempDir(), writeRules(t)
	p := spawn(t, "--data-dir", data, "--rules", rulesPath, "--snapshot-interval", "0")
	c := p.client(t)
	remaining(t, c, "RL.ALLOW", 2)
	c.Do(context.Background(), "SHUTDOWN", "NOSAVE") // no reply: the connection closes
	if err := p.wait(t); err != nil {
		t.Fatalf("exit after SHUTDOWN NOSAVE: %v", err)
	}
	if _, err := os.Stat(filepath.Join(data, snapshot.FileName)); !os.IsNotExist(err) {
		t.Fatalf("SHUTDOWN NOSAVE wrote a snapshot: %v", err)
	}
	p2 := spawn(t, "--data-dir", data, "--rules", rulesPath, "--snapshot-interval", "0")
	c2 := p2.client(t)
	remaining(t, c2, "RL.ALLOW", 5)
	c2.Do(context.Background(), "SHUTDOWN")
	p2.wait(t)
	p3 := spawn(t, "--data-dir", data, "--rules", rulesPath)
	if r := remaining(t, p3.client(t), "RL.PEEK", 1); r != 5 {
		t.Fatalf("after SHUTDOWN: %d remaining, want 5", r)
	}
}

func TestCorruptSnapshotRefusesToStart(t *testing.T) {
	t.Parallel()
	data, rulesPath := t.TempDir(), writeRules(t)
	p := spawn(t, "--data-dir", data, "--rules", rulesPath, "--snapshot-interval", "0")
	c := p.client(t)
	remaining(t, c, "RL.ALLOW", 1)
	c.Do(context.Background(), "SAVE")
	p.cmd.Process.Signal(unix.SIGKILL)
	p.wait(t)

	path := filepath.Join(data, snapshot.FileName)
	b, _ := os.ReadFile(path)
	b[len(b)/2] ^= 0x40
	os.WriteFile(path, b, 0o644)
	cmd := exec.Command(binary(t), "--addr", "127.0.0.1:0", "--data-dir", data)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("started on a corrupt snapshot:\n%s", out)
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), path) || !strings.Contains(string(out), "checksum mismatch") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}
