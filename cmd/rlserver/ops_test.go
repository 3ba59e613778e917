package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startRunWith runs the whole program in-process on an ephemeral port,
// reloading its rules on every value sent on hup (nil: never), and returns
// its address and its log; the program stops, and must exit 0, when the
// test ends.
func startRunWith(t *testing.T, hup chan os.Signal, args ...string) (addr string, out *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{wrote: make(chan struct{}, 1)}
	exit := make(chan int, 1)
	args = append([]string{"--addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, args...)
	go func() { exit <- run(ctx, hup, args, nil, stderr, stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-exit:
			if code != 0 {
				t.Errorf("exit code %d after shutdown; output:\n%s", code, stderr.String())
			}
		case <-time.After(testDeadline):
			t.Error("server did not stop")
		}
	})
	timeout := time.After(testDeadline)
	for {
		if m := startedLine.FindStringSubmatch(stderr.String()); m != nil {
			return m[1], stderr
		}
		select {
		case <-stderr.wrote:
		case code := <-exit:
			t.Fatalf("exited with %d before serving:\n%s", code, stderr.String())
		case <-timeout:
			t.Fatalf("no start-up line:\n%s", stderr.String())
		}
	}
}

// waitLog waits for a log line matching re.
func waitLog(t *testing.T, out *syncBuffer, re string) {
	t.Helper()
	pattern := regexp.MustCompile(re)
	timeout := time.After(testDeadline)
	for !pattern.MatchString(out.String()) {
		select {
		case <-out.wrote:
		case <-timeout:
			t.Fatalf("no log line matching %q:\n%s", re, out.String())
		}
	}
}

func TestSighupReloadsRules(t *testing.T) {
	t.Parallel()
	rulesPath := filepath.Join(t.TempDir(), "rules.yaml")
	os.WriteFile(rulesPath, []byte("rules:\n  - {name: api, algorithm: fixed_window, limit: 5, window: 1h}\n"), 0o644)
	hup := make(chan os.Signal, 1)
	addr, out := startRunWith(t, hup, "--rules", rulesPath)
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	defer c.Close()
	ctx := context.Background()
	limit := func() int64 {
		v, err := c.Do(ctx, "RL.PEEK", "k", "api").Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v[1].(int64)
	}
	c.Do(ctx, "RL.ALLOW", "k", "api", 2)

	os.WriteFile(rulesPath, []byte("rules:\n  - {name: api, algorithm: fixed_window, limit: 50, window: 1h}\n"), 0o644)
	hup <- syscall.SIGHUP
	waitLog(t, out, `msg="rules reloaded".* version=2`)
	if l := limit(); l != 50 {
		t.Fatalf("limit after SIGHUP: %d", l)
	}
	if v, _ := c.Do(ctx, "RL.PEEK", "k", "api").Slice(); v[2] != int64(48) {
		t.Fatalf("the budget spent before the reload was lost: %v", v)
	}

	os.WriteFile(rulesPath, []byte("rules:\n  - {name: api, algorithm: fixed_window, limit: -1, window: 1h}\n"), 0o644)
	hup <- syscall.SIGHUP
	waitLog(t, out, `rules reload failed; keeping the current rules`)
	if l := limit(); l != 50 {
		t.Fatalf("a broken file changed the limit to %d", l)
	}
	err := c.Do(ctx, "RL.RULE", "RELOAD").Err()
	if err == nil || !strings.Contains(err.Error(), "rule 1 (api): field limit") {
		t.Fatalf("RL.RULE RELOAD of a broken file: %v", err)
	}
	os.WriteFile(rulesPath, []byte("rules:\n  - {name: api, algorithm: fixed_window, limit: 7, window: 1h}\n"), 0o644)
	if err := c.Do(ctx, "RL.RULE", "RELOAD").Err(); err != nil || limit() != 7 {
		t.Fatalf("RL.RULE RELOAD: %v, limit %d", err, limit())
	}
	info, _ := c.Do(ctx, "RL.INFO").Text()
	if !strings.Contains(info, "rl_rules_version:3\r\n") || !strings.Contains(info, "rl_rules_loaded_unix:") {
		t.Fatalf("RL.INFO after reloads:\n%s", info)
	}
}

var metricLine = regexp.MustCompile(`(?m)^(rl_[a-z_]+(?:\{[^}]*\})?) ([0-9.e+]+)$`)

func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	out := map[string]float64{}
	for _, m := range metricLine.FindAllStringSubmatch(string(body), -1) {
		out[m[1]], _ = strconv.ParseFloat(m[2], 64)
	}
	if !strings.Contains(string(body), "go_goroutines") || !strings.Contains(string(body), "process_resident_memory_bytes") {
		t.Fatal("runtime and process collectors missing")
	}
	return out
}

func TestMetricsMoveWithTraffic(t *testing.T) {
	t.Parallel()
	addr, out := startRunWith(t, nil, "--metrics-addr", "127.0.0.1:0")
	m := regexp.MustCompile(`metrics=(127\.0\.0\.1:\d+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no metrics address in:\n%s", out.String())
	}
	base := "http://" + m[1]
	if res, err := http.Get(base + "/healthz"); err != nil || res.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v", res, err)
	}
	before := scrape(t, base+"/metrics")
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	defer c.Close()
	ctx := context.Background()
	for range 12 {
		c.Do(ctx, "RL.ALLOW", "user:1", "burst")
	}
	c.Do(ctx, "RL.ALLOW", "user:2", "api")
	after := scrape(t, base+"/metrics")
	checks := []struct {
		name       string
		delta, abs float64 // want after−before == delta (abs < 0: unchecked absolute)
	}{
		{`rl_decisions_total{result="allowed",rule="burst"}`, 10, -1},
		{`rl_decisions_total{result="denied",rule="burst"}`, 2, -1},
		{`rl_decisions_total{result="allowed",rule="api"}`, 1, -1},
		{`rl_keys`, 2, -1},
		{`rl_connected_clients`, 1, -1},
		{`rl_rules`, 0, 7},
	}
	for _, ck := range checks {
		if d := after[ck.name] - before[ck.name]; d != ck.delta {
			t.Errorf("%s moved by %v, want %v (before %v, after %v)", ck.name, d, ck.delta, before[ck.name], after[ck.name])
		}
		if ck.abs >= 0 && after[ck.name] != ck.abs {
			t.Errorf("%s = %v, want %v", ck.name, after[ck.name], ck.abs)
		}
	}
	if after[`rl_command_duration_seconds_count{command="rl.allow"}`] != 13 {
		t.Errorf("command histogram counted %v RL.ALLOW", after[`rl_command_duration_seconds_count{command="rl.allow"}`])
	}
	for _, name := range []string{"rl_rules_version", "rl_idle_evictions_total", "rl_snapshot_last_success_timestamp_seconds", "rl_snapshot_last_duration_seconds"} {
		if _, ok := after[name]; !ok {
			t.Errorf("metric %s missing", name)
		}
	}
}

// writeCerts makes a CA, a server certificate for 127.0.0.1 and a client
// certificate, and returns the directory holding ca.pem, server.pem,
// server-key.pem, client.pem and client-key.pem.
func writeCerts(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) {
		f, _ := os.Create(filepath.Join(dir, name))
		pem.Encode(f, &pem.Block{Type: typ, Bytes: der})
		f.Close()
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rlserver test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, _ := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	write("ca.pem", "CERTIFICATE", caDER)
	caCert, _ := x509.ParseCertificate(caDER)
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, _ := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		write(name+".pem", "CERTIFICATE", der)
		kb, _ := x509.MarshalECPrivateKey(key)
		write(name+"-key.pem", "EC PRIVATE KEY", kb)
	}
	leaf("server", 2, x509.ExtKeyUsageServerAuth)
	leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return dir
}

func TestTLS(t *testing.T) {
	t.Parallel()
	certs := writeCerts(t)
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(filepath.Join(certs, "ca.pem"))
	pool.AppendCertsFromPEM(caPEM)
	clientCert, _ := tls.LoadX509KeyPair(filepath.Join(certs, "client.pem"), filepath.Join(certs, "client-key.pem"))
	ctx := context.Background()

	addr, _ := startRunWith(t, nil, "--tls-cert", filepath.Join(certs, "server.pem"), "--tls-key", filepath.Join(certs, "server-key.pem"))
	c := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}})
	defer c.Close()
	if v, err := c.Do(ctx, "RL.ALLOW", "k", "burst").Result(); err != nil {
		t.Fatalf("go-redis over TLS: %v %v", v, err)
	}
	plain := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second})
	defer plain.Close()
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Fatal("a plaintext client was served by a TLS server")
	}
	if cli, err := exec.LookPath("redis-cli"); err == nil {
		host, port, _ := net.SplitHostPort(addr)
		out, err := exec.Command(cli, "-h", host, "-p", port, "--tls", "--cacert", filepath.Join(certs, "ca.pem"), "PING").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "PONG" {
			t.Fatalf("redis-cli --tls: %v %q", err, out)
		}
	} else {
		t.Log("redis-cli not installed: skipping its TLS check (apt-get install redis-tools)")
	}

	// With --tls-ca, a client certificate is required.
	addr2, _ := startRunWith(t, nil, "--tls-cert", filepath.Join(certs, "server.pem"), "--tls-key", filepath.Join(certs, "server-key.pem"),
		"--tls-ca", filepath.Join(certs, "ca.pem"))
	anon := redis.NewClient(&redis.Options{Addr: addr2, MaxRetries: -1, TLSConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}})
	defer anon.Close()
	if err := anon.Ping(ctx).Err(); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	mtls := redis.NewClient(&redis.Options{Addr: addr2, TLSConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{clientCert}}})
	defer mtls.Close()
	if err := mtls.Ping(ctx).Err(); err != nil {
		t.Fatalf("a client with a certificate: %v", err)
	}
	var out bytes.Buffer
	if code := run(ctx, nil, []string{"--ping", addr2, "--tls-cert", filepath.Join(certs, "client.pem"), "--tls-key", filepath.Join(certs, "client-key.pem")}, nil, &out, &out); code != 0 {
		t.Fatalf("--ping over mutual TLS: %d %s", code, out.String())
	}
}

func TestPingMode(t *testing.T) {
	t.Parallel()
	pass := filepath.Join(t.TempDir(), "pass")
	os.WriteFile(pass, []byte("s3cret\n"), 0o600)
	addr, _ := startRunWith(t, nil, "--requirepass-file", pass)
	var out bytes.Buffer
	if code := run(context.Background(), nil, []string{"--ping", addr, "--requirepass-file", pass}, nil, &out, &out); code != 0 || out.String() != "PONG\n" {
		t.Fatalf("--ping with the password: %d %q", code, out.String())
	}
	out.Reset()
	if code := run(context.Background(), nil, []string{"--ping", addr}, nil, &out, &out); code != 1 || !strings.Contains(out.String(), "NOAUTH") {
		t.Fatalf("--ping without the password: %d %q", code, out.String())
	}
	out.Reset()
	if code := run(context.Background(), nil, []string{"--ping", "127.0.0.1:1"}, nil, &out, &out); code != 1 {
		t.Fatalf("--ping of nothing: %d %q", code, out.String())
	}
}
