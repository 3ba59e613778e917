package envoy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/envoy"
	"github.com/rlserver/rlserver/internal/rules"
)

func limitConfig(n int) string {
	return fmt.Sprintf("domain: r\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: %d}\n", n)
}

// watch starts the loader's watcher and returns its outcomes.
func (h *harness) watch() <-chan error {
	h.t.Helper()
	ch := make(chan error, 64)
	envoy.SetOnLoad(h.loader, ch)
	if err := h.loader.Watch(); err != nil {
		h.t.Fatal(err)
	}
	return ch
}

// waitLoad waits (up to 20 s) for a load with the outcome wanted: a nil
// error after which ok reports the new configuration, or an error
// containing wantErr. Loads in between (an editor's intermediate states)
// are skipped.
func (h *harness) waitLoad(loads <-chan error, wantErr string, ok func() bool) {
	h.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case err := <-loads:
			switch {
			case wantErr == "" && err == nil && ok():
				return
			case wantErr != "" && err != nil && strings.Contains(err.Error(), wantErr):
				return
			}
		case <-deadline:
			h.t.Fatalf("no load with the outcome wanted (error %q) within 20 s; logs:\n%s", wantErr, h.logs)
		}
	}
}

func (h *harness) limitIs(domain string, n uint32) func() bool {
	return func() bool {
		cfg, _ := h.svc.Config()
		d := cfg.Domains[domain]
		if d == nil {
			return false
		}
		leaf, _ := d.Match(desc("k", "v").Entries, nil)
		return leaf != nil && leaf.Limit.RequestsPerUnit == n
	}
}

// TestReloadOnFileChange: an edited file is reloaded; a changed limit keeps
// the budget spent; a broken file keeps the configuration in force, logs
// why and counts the failure.
func TestReloadOnFileChange(t *testing.T) {
	h := newHarness(t, limitConfig(5))
	loads := h.watch()
	for i := 0; i < 3; i++ {
		h.call(request("r", desc("k", "v")))
	}
	h.writeConfig("config.yaml", limitConfig(10)) // in place, as an editor may
	h.waitLoad(loads, "", h.limitIs("r", 10))
	h.run([]step{{0, request("r", desc("k", "v")), "OK [OK 10/HOUR rem=6 reset=1h0m0s]"}})

	h.writeConfig("config.yaml", "domain: r\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	h.waitLoad(loads, "invalid rate limit unit 'fortnight'", nil)
	h.run([]step{{0, request("r", desc("k", "v")), "OK [OK 10/HOUR rem=5 reset=1h0m0s]"}})
	if !strings.Contains(h.logs.String(), "Envoy configuration not loaded; keeping the current one") {
		t.Errorf("logs:\n%s", h.logs)
	}
	if n := h.counter("rl_envoy_config_load_errors_total"); n < 1 {
		t.Errorf("load errors %v", n)
	}
	if h.loader.LastError() == nil {
		t.Error("LastError is nil after a failed load")
	}

	// A new file in the directory is read too.
	h.writeConfig("second.yaml", "domain: second\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 3}\n")
	h.writeConfig("config.yaml", limitConfig(10))
	h.waitLoad(loads, "", h.limitIs("second", 3))
	h.run([]step{{0, request("second", desc("k", "v")), "OK [OK 3/HOUR rem=2 reset=1h0m0s]"}})
}

// configMap lays dir out as kubelet writes a ConfigMap volume: the files in
// a timestamped directory, ..data linking to it, and each file linking
// through ..data. It returns a function that removes the previous
// timestamped directory, as kubelet does next; the tests call it only after
// the reload, so the swap of ..data alone must trigger it.
func configMap(t *testing.T, dir string, version int, files map[string]string) (removeOld func()) {
	t.Helper()
	ts := fmt.Sprintf("..2026_01_01_00_00_%02d.%d", version, version)
	if err := os.Mkdir(filepath.Join(dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, ts, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The atomic swap: a new link, renamed over ..data.
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := os.Symlink(ts, filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	return func() {
		if old != "" {
			if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestReloadConfigMapSwap: a ConfigMap update (the ..data symlink swapped)
// is reloaded, whether the loader reads the volume's directory or one file
// in it.
func TestReloadConfigMapSwap(t *testing.T) {
	for _, target := range []string{"directory", "file"} {
		t.Run(target, func(t *testing.T) {
			h := newHarness(t, "", func(o *harnessOpts) {
				o.layout = func(dir string) string {
					configMap(t, dir, 1, map[string]string{"ratelimit.yaml": limitConfig(5)})
					if target == "file" {
						return filepath.Join(dir, "ratelimit.yaml")
					}
					return dir
				}
			})
			loads := h.watch()
			h.call(request("r", desc("k", "v")))
			removeOld := configMap(t, h.dir, 2, map[string]string{"ratelimit.yaml": limitConfig(7)})
			h.waitLoad(loads, "", h.limitIs("r", 7))
			removeOld()
			h.run([]step{{0, request("r", desc("k", "v")), "OK [OK 7/HOUR rem=5 reset=1h0m0s]"}})
			// And again: the watch follows the new timestamped directory.
			removeOld = configMap(t, h.dir, 3, map[string]string{"ratelimit.yaml": limitConfig(9)})
			h.waitLoad(loads, "", h.limitIs("r", 9))
			removeOld()
			if strings.Contains(h.logs.String(), "duplicate domain") {
				t.Errorf("a ConfigMap file was read twice:\n%s", h.logs)
			}
		})
	}
}

// TestReloadUnderLoad: reloads that change limits, move and remove
// descriptors while requests run never fail a request.
func TestReloadUnderLoad(t *testing.T) {
	configs := []string{
		"domain: r\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1000}\n  - key: gone\n    rate_limit: {unit: hour, requests_per_unit: 1000}\n",
		"domain: r\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 2000, algorithm: sliding_counter}\n",
		"domain: r\ndescriptors:\n  - key: x\n    descriptors:\n      - key: k\n        rate_limit: {unit: minute, requests_per_unit: 50}\n",
	}
	h := newHarness(t, configs[0])
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	stop := make(chan struct{})
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 2000; j++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := h.do(request("r", desc("k", "v"), desc("gone", "v"))); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 0; i < 30; i++ {
		h.writeConfig("config.yaml", configs[i%len(configs)])
		if err := h.loader.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a request failed during reloads: %v", err)
	}
}

// hookLimiter runs a function once, at the first SetRules or Decide after
// it is armed, to interleave a reload with a request deterministically.
type hookLimiter struct {
	envoy.Limiter
	mu              sync.Mutex
	onSet, onDecide func()
}

func (l *hookLimiter) take(f *func()) func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := *f
	*f = nil
	return g
}

func (l *hookLimiter) SetRules(defs []rules.Def) error {
	err := l.Limiter.SetRules(defs)
	if f := l.take(&l.onSet); f != nil {
		f()
	}
	return err
}

func (l *hookLimiter) Decide(ctx context.Context, reqs []envoy.Request, all bool) ([]algorithms.Decision, error) {
	if f := l.take(&l.onDecide); f != nil {
		f()
	}
	return l.Limiter.Decide(ctx, reqs, all)
}

// TestReloadBetweenMatchAndDecide: a request matched against the old
// configuration still finds its rule while the new one is published, and
// one whose rule was deleted after it matched is decided again under the
// new configuration: neither fails.
func TestReloadBetweenMatchAndDecide(t *testing.T) {
	hook := &hookLimiter{}
	const before = "domain: r\ndescriptors:\n  - key: gone\n    rate_limit: {unit: hour, requests_per_unit: 5}\n"
	const after = "domain: r\ndescriptors:\n  - key: other\n    rate_limit: {unit: hour, requests_per_unit: 5}\n"
	h := newHarness(t, before, func(o *harnessOpts) { hook.Limiter = o.svc.Limiter; o.svc.Limiter = hook })
	var inner string
	var innerErr error

	// A request arrives while the new rules are being published, before
	// the switch: it matches the old configuration.
	hook.mu.Lock()
	hook.onSet = func() {
		var resp *rlsv3.RateLimitResponse
		resp, innerErr = h.do(request("r", desc("gone", "x")))
		if innerErr == nil {
			inner = show(resp)
		}
	}
	hook.mu.Unlock()
	h.writeConfig("config.yaml", after)
	if err := h.loader.Reload(); err != nil {
		t.Fatal(err)
	}
	if innerErr != nil || inner != "OK [OK 5/HOUR rem=4 reset=1h0m0s]" {
		t.Errorf("a request during publication: %q %v", inner, innerErr)
	}

	// A request matched before a reload and decided after the switch:
	// the rules the new configuration drops stay until it is done, so it
	// is decided under the configuration it matched.
	h.writeConfig("config.yaml", before)
	if err := h.loader.Reload(); err != nil {
		t.Fatal(err)
	}
	reloaded := make(chan error, 1)
	hook.mu.Lock()
	hook.onDecide = func() {
		old, _ := h.svc.Config()
		h.writeConfig("config.yaml", after)
		go func() { reloaded <- h.loader.Reload() }()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if cfg, _ := h.svc.Config(); cfg != old {
				return // switched; the old rules wait for this request
			}
			if time.Now().After(deadline) {
				t.Error("the new configuration never took over")
				return
			}
		}
	}
	hook.mu.Unlock()
	h.run([]step{{0, request("r", desc("gone", "x")), "OK [OK 5/HOUR rem=4 reset=1h0m0s]"}})
	if err := <-reloaded; err != nil {
		t.Fatal(err)
	}
	if got := h.call(request("r", desc("gone", "x"))); got != "OK [OK]" {
		t.Errorf("after the reload: %s", got)
	}
}
