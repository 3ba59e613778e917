// Command rlserver is a rate-limiter server that speaks the Redis protocol.
// Run it with no flags to serve the built-in rules on 127.0.0.1:6380.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rlserver/rlserver/internal/clock"
	"github.com/rlserver/rlserver/internal/metrics"
	"github.com/rlserver/rlserver/internal/resp"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/shards"
	"github.com/rlserver/rlserver/internal/snapshot"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// idleTick is how often each shard advances its timing wheel: idle keys
// leave within this long of becoming fresh. Short, so that each advance
// evicts little: with keys that go fresh quickly (a bucket refilled a
// millisecond after its request), 50 ms let thousands pile up per advance,
// and the advance held the shard long enough to show in p99; 10 ms measured
// +9–30% req/s and a third off p99 at P1 (docs/performance.md), for 100
// wake-ups a second per idle shard.
const idleTick = 10 * time.Millisecond

// idleGrace keeps a key for this long after its state is fresh again (see
// shards.Config.IdleGrace): a key that refills within milliseconds and is
// asked about again within a second is kept rather than dropped and
// recreated, at the cost of holding keys idle for under a second.
const idleGrace = time.Second

func main() {
	// SIGINT and SIGTERM end ctx; the server then drains, writes a final
	// snapshot and exits 0. SIGHUP reloads the rules file.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	os.Exit(run(ctx, hup, os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it serves until ctx ends (or a client
// sends SHUTDOWN), reloading the rules on every value from hup, and returns
// the exit code, so tests can run it in-process.
func run(ctx context.Context, hup <-chan os.Signal, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "rlserver:", err)
		return 2
	}
	if cfg.version {
		fmt.Fprintln(stdout, "rlserver", version)
		return 0
	}
	if cfg.ping != "" {
		return ping(cfg, stdout, stderr)
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "rlserver:", err)
		return 2
	}
	fail := func(err error) int {
		log.Error("cannot start", "err", err)
		fmt.Fprintln(stderr, "rlserver:", err)
		return 1
	}
	tlsConfig, err := serverTLS(cfg)
	if err != nil {
		return fail(err)
	}

	// Rules: the snapshot's, with the rules file applied over them; with
	// no snapshot, the file's or the built-in defaults.
	var fileDefs []rules.Def
	if cfg.rulesPath != "" {
		if fileDefs, err = rules.LoadFile(cfg.rulesPath); err != nil {
			return fail(err)
		}
	}
	var snap *snapshot.Snapshot
	if cfg.dataDir != "" {
		if snap, err = snapshot.ReadFile(filepath.Join(cfg.dataDir, snapshot.FileName)); err != nil {
			return fail(fmt.Errorf("%w; refusing to start rather than start empty (move the file away to start without it)", err))
		}
	}
	defs, source := rules.Defaults(), "built-in defaults"
	switch {
	case snap != nil && cfg.rulesPath != "":
		defs, source = snapshot.MergeRules(snap.Rules, fileDefs), "snapshot + "+cfg.rulesPath
	case snap != nil:
		defs, source = snap.Rules, "snapshot"
	case cfg.rulesPath != "":
		defs, source = fileDefs, cfg.rulesPath
	}
	store, err := rules.NewStore(defs)
	if err != nil {
		return fail(fmt.Errorf("rules from %s: %w", source, err))
	}

	clk := clock.New()
	keyspace := shards.New(shards.Config{
		Shards: cfg.shards, Clock: clk.Now, Rules: store, TickEvery: idleTick, IdleGrace: idleGrace,
		MaxKeys: cfg.maxKeys, Reject: cfg.maxKeysPolicy == "reject",
	})
	defer keyspace.Stop()
	if snap != nil {
		rs := snapshot.Restore(snap, store, keyspace, clk.Now())
		log.Info("snapshot loaded", "path", filepath.Join(cfg.dataDir, snapshot.FileName),
			"keys", rs.Loaded, "plain_keys", rs.Plain, "fresh_dropped", rs.Fresh,
			"expired_dropped", rs.Expired, "orphans_dropped", rs.Orphan)
	}
	var saver *snapshot.Manager
	if cfg.dataDir != "" {
		if saver, err = snapshot.NewManager(snapshot.Config{Dir: cfg.dataDir, Rules: store, Keys: keyspace,
			Clock: clk.Now, ServerVersion: version, Logger: log}); err != nil {
			return fail(err)
		}
		saver.Start(cfg.snapshotInterval)
		defer saver.Stop()
	}

	// reload re-reads the rules file and applies it over the current rules;
	// on any error the old rules stay.
	var reload func() error
	if cfg.rulesPath != "" {
		reload = func() error {
			defs, err := rules.LoadFile(cfg.rulesPath)
			if err == nil {
				_, err = store.Apply(defs)
			}
			if err != nil {
				log.Error("rules reload failed; keeping the current rules", "path", cfg.rulesPath, "err", err)
				return err
			}
			keyspace.Reconcile()
			set := store.Load()
			log.Info("rules reloaded", "path", cfg.rulesPath, "rules", set.Len(), "version", set.Version)
			return nil
		}
	}

	src := &metrics.Sources{Keys: keyspace, Rules: store, Snapshots: saver}
	var met *metrics.Metrics
	if cfg.metricsAddr != "" {
		met = metrics.New(src)
	}
	shutdown := make(chan resp.ShutdownMode, 1)
	srvCfg := resp.Config{
		Addr: cfg.addr, TLS: tlsConfig, Rules: store, RulesSource: source, ReloadRules: reload,
		Shards: keyspace, Clock: clk.Now, Version: version, Logger: log, Snapshots: saver,
		Password: cfg.password, MaxClients: cfg.maxClients, IdleTimeout: cfg.idleTimeout,
		EventLoops: cfg.eventLoops,
		Limits:     cfg.limits(),
		RequestShutdown: func(m resp.ShutdownMode) {
			select {
			case shutdown <- m:
			default: // one request is enough
			}
		},
	}
	if met != nil {
		srvCfg.CommandDuration = met.CommandDuration
	}
	srv := resp.New(srvCfg)
	src.Server = srv
	if err := srv.Start(); err != nil {
		return fail(err)
	}
	metricsAddr := ""
	if met != nil {
		hs, err := met.Serve(cfg.metricsAddr, log)
		if err != nil {
			srv.Shutdown(context.Background())
			return fail(fmt.Errorf("--metrics-addr: %w", err))
		}
		defer hs.Shutdown(context.Background())
		metricsAddr = hs.Addr().String()
	}
	if cfg.pprofAddr != "" {
		stop, err := servePprof(cfg.pprofAddr, log)
		if err != nil {
			srv.Shutdown(context.Background())
			return fail(fmt.Errorf("--pprof-addr: %w", err))
		}
		defer stop()
	}
	log.Info("rlserver started", "version", version, "addr", srv.Addr().String(), "tls", tlsConfig != nil,
		"auth", cfg.password != "", "rules", source, "rule_count", store.Load().Len(), "shards", keyspace.Len(),
		"event_loops", srv.EventLoops(), "data_dir", cfg.dataDir, "metrics", metricsAddr)

	mode := resp.ShutdownDefault
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case mode = <-shutdown:
			break wait
		case <-hup:
			if reload == nil {
				log.Warn("SIGHUP ignored: the server was started without --rules")
				continue
			}
			reload()
		}
	}
	log.Info("shutting down: draining connections", "timeout", cfg.shutdownGrace)
	drainCtx, cancel := context.WithTimeout(context.Background(), cfg.shutdownGrace)
	defer cancel()
	code := 0
	if err := srv.Shutdown(drainCtx); err != nil {
		log.Warn("shutdown", "err", err)
	}
	if saver != nil {
		saver.Stop()
		if mode != resp.ShutdownNoSave {
			if err := saver.Save(); err != nil {
				log.Error("final snapshot failed", "err", err)
				return 1
			}
			log.Info("final snapshot written", "path", saver.Path())
		}
	}
	log.Info("stopped")
	return code
}

func newLogger(cfg config, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %v", cfg.logLevel, err)
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}
