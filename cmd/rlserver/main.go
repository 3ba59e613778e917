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
	"syscall"
	"time"

	"github.com/rlserver/rlserver/internal/clock"
	"github.com/rlserver/rlserver/internal/resp"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/shards"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	// SIGINT and SIGTERM end ctx; the server then shuts down and exits 0.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it serves until ctx ends and returns the
// exit code, so tests can run it in-process.
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

	defs, source := rules.Defaults(), "built-in defaults"
	if cfg.rulesPath != "" {
		if defs, err = rules.LoadFile(cfg.rulesPath); err != nil {
			fmt.Fprintln(stderr, "rlserver:", err)
			return 1
		}
		source = cfg.rulesPath
	}
	store, err := rules.NewStore(defs)
	if err != nil {
		fmt.Fprintf(stderr, "rlserver: rules from %s: %v\n", source, err)
		return 1
	}

	clk := clock.New()
	keyspace := shards.New(shards.Config{Shards: cfg.shards, Clock: clk.Now, Rules: store})
	defer keyspace.Stop()
	srv := resp.New(resp.Config{
		Addr: cfg.addr, Rules: store, RulesSource: source, Shards: keyspace,
		Clock: clk.Now, Version: version, Logger: log,
	})
	if err := srv.Start(); err != nil {
		fmt.Fprintln(stderr, "rlserver:", err)
		return 1
	}
	log.Info("rlserver started", "version", version, "addr", srv.Addr().String(),
		"rules", source, "rule_count", store.Load().Len(), "shards", keyspace.Len())

	<-ctx.Done()
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Error("shutdown", "err", err)
		return 1
	}
	return 0
}
