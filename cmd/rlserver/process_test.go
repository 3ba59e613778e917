package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"

	"github.com/rlserver/rlserver/internal/snapshot"
	"github.com/rlserver/rlserver/internal/testskip"
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

// testDeadline bounds every wait for a process or server in these tests
// (a start-up line, an exit): generous, since a loaded 2-core machine
// running the race detector is slow, and only a failure waits it out.
const testDeadline = 30 * time.Second

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
	testskip.Report(code)
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
	timeout := time.After(testDeadline)
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
	case <-time.After(testDeadline):
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

// TestOneServerPerDataDirectory: a second server on the same data
// directory refuses to start, naming the first one's pid; once the first
// is gone (however it ended) the directory is free again.
func TestOneServerPerDataDirectory(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	first := spawn(t, "--data-dir", data)
	code, _, stderr := cli(t, nil, "--addr", "127.0.0.1:0", "--data-dir", data)
	want := fmt.Sprintf("--data-dir %s is in use by another rlserver (pid %d, per %s)", data, first.cmd.Process.Pid, filepath.Join(data, "rlserver.lock"))
	if code != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("second server: exit %d, stderr:\n%s\nwant %q", code, stderr, want)
	}
	first.cmd.Process.Signal(unix.SIGKILL)
	first.wait(t)
	spawn(t, "--data-dir", data)
}

// TestUnwritableDataDirFailsTheStart: a data directory the server cannot
// write into fails the start, naming the uid, instead of every save. Tests
// run as root here, where permissions do not bind, so the server runs as
// nobody against a root-owned directory, as a container's non-root user
// meets a root-owned volume.
func TestUnwritableDataDirFailsTheStart(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for dir := root; dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
		os.Chmod(dir, 0o755) // nobody must reach the data directory
	}
	data := filepath.Join(root, "data")
	os.Mkdir(data, 0o755)
	uid := os.Getuid()
	// A server that starts anyway is killed at testDeadline, failing the test.
	bin := binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--addr", "127.0.0.1:0", "--data-dir", data)
	cmd.Env = testEnv()
	if uid == 0 {
		uid = 65534
		// os/exec takes syscall's type; x/sys/unix has no equivalent.
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		// nobody must reach the binary.
		for dir := filepath.Dir(bin); dir != "/"; dir = filepath.Dir(dir) {
			if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&0o001 == 0 {
				os.Chmod(dir, fi.Mode().Perm()|0o005)
			}
		}
	} else {
		os.Chmod(data, 0o555)
	}
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); err == nil || code != 1 {
		t.Fatalf("started on an unwritable data directory (exit %d, %v):\n%s", code, err, out)
	}
	want := fmt.Sprintf("--data-dir %s is not writable, so no snapshot could be saved", data)
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), fmt.Sprintf("runs as uid %d", uid)) {
		t.Fatalf("output:\n%s\nwant %q and the uid", out, want)
	}
}

// TestSecretsAreNeverShown: the password given as a flag appears neither in
// /debug/pprof/cmdline nor in any log line, even at debug level.
func TestSecretsAreNeverShown(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-never-shown"
	p := spawn(t, "--data-dir", "", "--requirepass", secret, "--pprof-addr", "127.0.0.1:0", "--log-level", "debug")
	m := regexp.MustCompile(`pprof=(127\.0\.0\.1:\d+)`).FindStringSubmatch(p.out.String())
	if m == nil {
		t.Fatalf("no pprof address:\n%s", p.out.String())
	}
	res, err := http.Get("http://" + m[1] + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if strings.Contains(string(body), secret) || !strings.Contains(string(body), "--requirepass\x00***") {
		t.Fatalf("/debug/pprof/cmdline: %q", body)
	}
	wrong := redis.NewClient(&redis.Options{Addr: p.addr, Password: "wrong", Protocol: 2, MaxRetries: -1})
	wrong.Ping(context.Background())
	wrong.Close()
	c := redis.NewClient(&redis.Options{Addr: p.addr, Password: secret, Protocol: 2, MaxRetries: -1})
	defer c.Close()
	if err := c.Do(context.Background(), "SHUTDOWN", "NOSAVE").Err(); err != nil && !strings.Contains(err.Error(), "EOF") {
		t.Fatal(err)
	}
	p.wait(t)
	if strings.Contains(p.out.String(), secret) || !strings.Contains(p.out.String(), "requirepass=***") {
		t.Fatalf("the log shows the password, or not its mask:\n%s", p.out.String())
	}
}
