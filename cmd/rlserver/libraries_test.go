package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/testskip"
)

// The rate-limiter libraries of issue 14, driven unchanged against a real
// rlserver process: each driver (testdata/clients) prints the decisions its
// library reports for limit 5 per 10 s, 7 hits, then the library's peek,
// penalty and reset calls. The test requires 5 of the 7 hits admitted, and,
// where redis-server is installed, every line the same as against Redis.

// libraryDriver is one driver program and how to run it.
type libraryDriver struct {
	name    string
	prepare func(t *testing.T) (cmd []string) // skips the test if its runtime is missing
	// admitted lists the libraries (line prefixes) that must report
	// "<prefix> admitted 5".
	admitted []string
}

var clientsDir = filepath.Join("..", "..", "testdata", "clients")

func libraryDrivers() []libraryDriver {
	return []libraryDriver{
		{name: "npm", admitted: []string{"rate-limiter-flexible", "rate-limit-redis", "redis-rate-limiter", "ratelimiter"},
			prepare: func(t *testing.T) []string {
				node, err := exec.LookPath("node")
				if err != nil {
					testskip.Skip(t, "node", "apt-get install nodejs npm")
				}
				dir := filepath.Join(clientsDir, "ratelimit")
				// A node_modules installed before the lock file gained a
				// library lacks it: skip with the command that installs it.
				for _, lib := range []string{"rate-limiter-flexible", "redis-rate-limiter", "ratelimiter"} {
					if _, err := os.Stat(filepath.Join(dir, "node_modules", lib)); err != nil {
						testskip.Skip(t, lib, "npm ci --prefix testdata/clients/ratelimit")
					}
				}
				return []string{node, filepath.Join(dir, "libs.js")}
			}},
		{name: "python-limits", admitted: []string{"fixed-window", "fixed-window-elastic", "moving-window"},
			prepare: func(t *testing.T) []string {
				py := "/usr/bin/python3"
				if err := exec.Command(py, "-c", "import limits").Run(); err != nil {
					testskip.Skip(t, "python3-limits", "apt-get install python3-limits")
				}
				return []string{py, filepath.Join(clientsDir, "limits_libs.py")}
			}},
		{name: "flask-limiter", admitted: []string{"flask-limiter fixed-window", "flask-limiter moving-window",
			"flask-limiter fixed-window-elastic-expiry"},
			prepare: func(t *testing.T) []string {
				py := "/usr/bin/python3"
				if err := exec.Command(py, "-c", "import flask_limiter").Run(); err != nil {
					testskip.Skip(t, "python3-flask-limiter", "apt-get install python3-flask-limiter")
				}
				return []string{py, filepath.Join(clientsDir, "flask_limiter_app.py")}
			}},
		{name: "go", admitted: []string{"redis_rate", "ulule", "throttled"},
			prepare: func(t *testing.T) []string {
				bin := filepath.Join(t.TempDir(), "golibs")
				build := exec.Command("go", "build", "-o", bin, ".")
				build.Dir = filepath.Join(clientsDir, "golibs")
				if out, err := build.CombinedOutput(); err != nil {
					t.Fatalf("building testdata/clients/golibs (its modules come from the module proxy): %v\n%s", err, out)
				}
				return []string{bin}
			}},
	}
}

func TestRateLimiterLibraries(t *testing.T) {
	rl := spawn(t, "--data-dir", "")
	redisAddr := startRedis(t) // "" without redis-server
	for _, d := range libraryDrivers() {
		t.Run(d.name, func(t *testing.T) {
			cmd := d.prepare(t)
			protocols := []string{""}
			if d.name == "go" {
				protocols = []string{"2", "3"} // go-redis speaks RESP3 by default
			}
			for _, proto := range protocols {
				got := runDriver(t, cmd, rl.addr, proto)
				t.Logf("against rlserver (protocol %q):\n%s", proto, got)
				for _, lib := range d.admitted {
					if !strings.Contains(got, "\n"+lib+" admitted 5\n") && !strings.HasPrefix(got, lib+" admitted 5\n") {
						t.Errorf("%s: not 5 of 7 admitted:\n%s", lib, got)
					}
				}
				if redisAddr == "" {
					testskip.Skip(t, "redis-server", "apt-get install redis-server")
				}
				if want := runDriver(t, cmd, redisAddr, proto); got != want {
					t.Errorf("rlserver and redis-server differ (protocol %q):\n--- rlserver\n%s--- redis-server\n%s", proto, got, want)
				}
			}
		})
	}
}

// runDriver flushes the server, runs the driver against it and returns its
// output. A driver that fails fails the test with its output.
func runDriver(t *testing.T, cmd []string, addr, proto string) string {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	defer c.Close()
	if err := c.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	args := append(cmd[1:len(cmd):len(cmd)], addr)
	if proto != "" {
		args = append(args, proto)
	}
	run := exec.Command(cmd[0], args...)
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("%s against %s: %v\n%s", filepath.Base(cmd[len(cmd)-1]), addr, err, out)
	}
	return string(out)
}

// startRedis starts a redis-server of the test's own on a free loopback
// port and returns its address, or "" when redis-server is not installed.
func startRedis(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return ""
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	cmd := exec.Command(path, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(testDeadline); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not start")
		}
	}
}
