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
	"github.com/rlserver/rlserver/internal/resp"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/shards"
	"github.com/rlserver/rlserver/internal/snapshot"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// idleTick is how often each shard advances its timing wheel: idle keys
// leave within this long of becoming fresh.
const idleTick = 50 * time.Millisecond

func main() {
	// SIGINT and SIGTERM end ctx; the server then drains, writes a final
	// snapshot and exits 0.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it serves until ctx ends (or a client
// sends SHUTDOWN) and returns the exit code, so tests can run it in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
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
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.logLevel)); err != nil {
		fmt.Fprintf(stderr, "rlserver: --log-level %q: %v\n", cfg.logLevel, err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	fail := func(err error) int {
		fmt.Fprintln(stderr, "rlserver:", err)
		return 1
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
		Shards: cfg.shards, Clock: clk.Now, Rules: store, TickEvery: idleTick,
		MaxKeys: cfg.maxKeys, Reject: cfg.maxKeysPolicy == "reject",
	})
	defer keyspace.Stop()
	if snap != nil {
		rs := snapshot.Restore(snap, store, keyspace, clk.Now())
		log.Info("snapshot loaded", "path", filepath.Join(cfg.dataDir, snapshot.FileName),
			"keys", rs.Loaded, "fresh_dropped", rs.Fresh, "orphans_dropped", rs.Orphan)
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

	shutdown := make(chan resp.ShutdownMode, 1)
	srv := resp.New(resp.Config{
		Addr: cfg.addr, Rules: store, RulesSource: source, Shards: keyspace,
		Clock: clk.Now, Version: version, Logger: log, Snapshots: saver,
		RequestShutdown: func(m resp.ShutdownMode) {
			select {
			case shutdown <- m:
			default: // one request is enough
			}
		},
	})
	if err := srv.Start(); err != nil {
		return fail(err)
	}
	log.Info("rlserver started", "version", version, "addr", srv.Addr().String(),
		"rules", source, "rule_count", store.Load().Len(), "shards", keyspace.Len(),
		"data_dir", cfg.dataDir)

	mode := resp.ShutdownDefault
	select {
	case <-ctx.Done():
	case mode = <-shutdown:
	}
	log.Info("shutting down")
	drainCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code := 0
	if err := srv.Shutdown(drainCtx); err != nil {
		log.Error("shutdown", "err", err)
		code = 1
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
	return code
}
