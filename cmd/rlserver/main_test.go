package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// syncBuffer is a bytes.Buffer safe for the server's logger and the test to
// share; wrote is signalled after every write.
type syncBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case s.wrote <- struct{}{}:
	default:
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startedLine is the start-up log line; its addr= is the RESP address.
var startedLine = regexp.MustCompile(`msg="rlserver started".* addr=(127\.0\.0\.1:\d+)`)

// startRun runs the whole program in-process on an ephemeral port and
// returns its address; the program stops when the test ends.
func startRun(t *testing.T, args ...string) string {
	t.Helper()
	addr, _ := startRunWith(t, nil, args...)
	return addr
}

func TestServesBuiltInDefaults(t *testing.T) {
	t.Parallel()
	addr := startRun(t)
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	defer c.Close()
	v, err := c.Do(context.Background(), "RL.ALLOW", "user:1", "burst").Slice()
	if err != nil {
		t.Fatal(err)
	}
	if v[0] != int64(1) || v[1] != int64(10) {
		t.Fatalf("RL.ALLOW on the built-in 'burst' rule: %v", v)
	}
}

func TestServesARulesFile(t *testing.T) {
	t.Parallel()
	addr := startRun(t, "--rules", "../../testdata/rules/good.yaml", "--shards", "8")
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	defer c.Close()
	ctx := context.Background()
	if v, err := c.Do(ctx, "RL.ALLOW", "alice", "login", "5").Slice(); err != nil || v[2] != int64(0) {
		t.Fatalf("login rule from the file: %v %v", v, err)
	}
	info, _ := c.Do(ctx, "RL.INFO").Text()
	if !strings.Contains(info, "rl_shards:8\r\n") || !strings.Contains(info, "rl_rules:3\r\n") {
		t.Fatalf("RL.INFO: %s", info)
	}
	if err := c.Do(ctx, "RL.ALLOW", "alice", "token_bucket").Err(); err == nil {
		t.Fatal("a rules file should replace the built-in rules")
	}
}

// saveAndStop starts a server on dataDir with args, lets setup talk to it,
// then stops it (a final snapshot is written) and returns its log.
func saveAndStop(t *testing.T, dataDir string, setup func(*redis.Client), args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{wrote: make(chan struct{}, 1)}
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, nil, append([]string{"--addr", "127.0.0.1:0", "--data-dir", dataDir}, args...), nil, out, out)
	}()
	waitLog(t, out, `msg="rlserver started"`)
	c := redis.NewClient(&redis.Options{Addr: startedLine.FindStringSubmatch(out.String())[1], Protocol: 2})
	setup(c)
	c.Close()
	cancel()
	if code := <-exit; code != 0 {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
	return out.String()
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRulesFileOverASnapshot: after a restart the snapshot's rules are the
// base and the file is applied over them (the log says which rule came
// from where); --rules-authoritative makes the file the whole set, at start
// and on reload.
func TestRulesFileOverASnapshot(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	saveAndStop(t, data, func(c *redis.Client) {
		c.Do(context.Background(), "RL.RULE", "SET", "runtime", "fixed_window", "5", "1h")
	})
	rulesPath := writeFile(t, "rules.yaml", "rules:\n  - {name: api, algorithm: fixed_window, limit: 9, window: 1h}\n")
	ctx := context.Background()

	// The 7 built-in rules and "runtime" come back from the snapshot;
	// "api" is the file's.
	addr, out := startRunWith(t, nil, "--data-dir", data, "--rules", rulesPath)
	waitLog(t, out, `msg=rules source="snapshot \+ `+regexp.QuoteMeta(rulesPath)+`" count=8 from_file=api from_snapshot=burst,fixed_window,leaky_bucket,runtime,sliding_counter,sliding_log,token_bucket note=`)
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1})
	defer c.Close()
	if v, err := c.Do(ctx, "RL.PEEK", "k", "api").Slice(); err != nil || v[1] != int64(9) {
		t.Fatalf("api from the file: %v %v", v, err)
	}
	c.Do(ctx, "SHUTDOWN")

	// --rules-authoritative: only the file's rule, at start...
	data2 := t.TempDir()
	saveAndStop(t, data2, func(c *redis.Client) {
		c.Do(context.Background(), "RL.RULE", "SET", "runtime", "fixed_window", "5", "1h")
	})
	addr, out = startRunWith(t, nil, "--data-dir", data2, "--rules", rulesPath, "--rules-authoritative")
	waitLog(t, out, `(?m)msg=rules source=`+regexp.QuoteMeta(rulesPath)+` count=1 from_file=api deleted=burst,fixed_window,leaky_bucket,runtime,sliding_counter,sliding_log,token_bucket$`)
	c2 := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	defer c2.Close()
	if err := c2.Do(ctx, "RL.RULE", "GET", "runtime").Err(); err == nil {
		t.Fatal("--rules-authoritative kept a rule the file does not define")
	}
	// ... and on reload.
	c2.Do(ctx, "RL.RULE", "SET", "added", "fixed_window", "5", "1h")
	if err := c2.Do(ctx, "RL.RULE", "RELOAD").Err(); err != nil {
		t.Fatal(err)
	}
	waitLog(t, out, `msg="rules reloaded".* deleted=added`)
	if n, _ := c2.Do(ctx, "RL.RULE", "LIST").Slice(); len(n) != 1 {
		t.Fatalf("after an authoritative reload: %v", n)
	}
}

func TestAnEmptyRulesFileWarns(t *testing.T) {
	t.Parallel()
	_, out := startRunWith(t, nil, "--rules", writeFile(t, "rules.yaml", "rules: []\n"))
	waitLog(t, out, `level=WARN msg="no rules: RL.ALLOW`)
}

// TestShutdownKeepsTimeForTheSnapshot: the drain's deadline is the shutdown
// budget less what the final snapshot is expected to take.
func TestShutdownKeepsTimeForTheSnapshot(t *testing.T) {
	t.Parallel()
	out := saveAndStop(t, t.TempDir(), func(*redis.Client) {}, "--shutdown-timeout", "3")
	if !strings.Contains(out, `msg="shutting down: draining connections" drain_timeout=2s kept_for_snapshot=1s`) {
		t.Fatalf("the drain took the whole budget:\n%s", out)
	}
	out = saveAndStop(t, "", func(*redis.Client) {}, "--shutdown-timeout", "3")
	if !strings.Contains(out, `drain_timeout=3s kept_for_snapshot=0s`) {
		t.Fatalf("without persistence the drain should get the whole budget:\n%s", out)
	}
}

// TestPingUsesTheServersPasswordSource: --ping reads the password as the
// server does: flag, file, RLSERVER_ variable, or config file.
func TestPingUsesTheServersPasswordSource(t *testing.T) {
	t.Parallel()
	pass := writeFile(t, "pass", "s3cret\n")
	addr, _ := startRunWith(t, nil, "--requirepass-file", pass)
	conf := writeFile(t, "rlserver.yaml", "requirepass-file: "+pass+"\n")
	for _, tt := range []struct {
		args, env []string
	}{
		{[]string{"--requirepass", "s3cret"}, nil},
		{[]string{"--requirepass-file", pass}, nil},
		{nil, []string{"RLSERVER_REQUIREPASS=s3cret"}},
		{nil, []string{"RLSERVER_REQUIREPASS_FILE=" + pass}},
		{nil, []string{"RLSERVER_CONFIG=" + conf}},
		{[]string{"--config", conf}, nil},
		// The container's variables for the server itself do not get in
		// the way of a health check.
		{nil, []string{"RLSERVER_ADDR=0.0.0.0:6380", "RLSERVER_DATA_DIR=/nonexistent", "RLSERVER_REQUIREPASS=s3cret"}},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), nil, append([]string{"--ping", addr}, tt.args...), tt.env, &stdout, &stderr); code != 0 || stdout.String() != "PONG\n" {
			t.Errorf("--ping %v with %v: exit %d, %q %q", tt.args, tt.env, code, stdout.String(), stderr.String())
		}
	}
	var stderr bytes.Buffer
	if code := run(context.Background(), nil, []string{"--ping", addr}, nil, io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), "NOAUTH Authentication required. (give --ping the password") {
		t.Errorf("--ping without a password: %d %q", code, stderr.String())
	}
}

// TestPingOfATLSPortSaysSo: a plaintext PING to a TLS port gets a closed
// connection; --ping says why.
func TestPingOfATLSPortSaysSo(t *testing.T) {
	t.Parallel()
	certs := writeCerts(t)
	addr, _ := startRunWith(t, nil, "--tls-cert", filepath.Join(certs, "server.pem"), "--tls-key", filepath.Join(certs, "server-key.pem"))
	var stderr bytes.Buffer
	if code := run(context.Background(), nil, []string{"--ping", addr}, nil, io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), "it serves TLS") {
		t.Fatalf("--ping of a TLS port: %d %q", code, stderr.String())
	}
	plain := startRun(t)
	stderr.Reset()
	code := run(context.Background(), nil, []string{"--ping", plain, "--tls-cert", filepath.Join(certs, "server.pem"), "--tls-key", filepath.Join(certs, "server-key.pem")}, nil, io.Discard, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "does not speak TLS") {
		t.Fatalf("--ping over TLS of a plaintext port: %d %q", code, stderr.String())
	}
}

// TestEveryListenerOpensBeforeAnyServes: the metrics and pprof listeners
// open before RESP's, so a bad --metrics-addr fails the start before the
// RESP port is even opened (here RESP's port is taken too, and the error is
// the metrics one).
func TestEveryListenerOpensBeforeAnyServes(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, flag := range []string{"--metrics-addr", "--pprof-addr"} {
		var stderr bytes.Buffer
		code := run(context.Background(), nil, []string{"--addr", taken.Addr().String(), "--data-dir", "", flag, taken.Addr().String()}, nil, io.Discard, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "\nrlserver: "+flag+" "+taken.Addr().String()) || strings.Contains(stderr.String(), "started") {
			t.Errorf("%s on a taken port: exit %d, %q", flag, code, stderr.String())
		}
	}
}
