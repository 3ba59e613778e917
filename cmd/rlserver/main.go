// Command rlserver is a rate-limiter server that speaks the Redis protocol.
// Run it with no flags to serve the built-in rules on 127.0.0.1:6380.
//
// The program reads in three parts: configuration (settings.go, config.go,
// load.go, validate.go: every setting from flags, RLSERVER_* variables and
// a --config file, by one rule), wiring (node.go: the data directory lock,
// the rules, the keyspace, the snapshot manager and every listener) and
// lifecycle (lifecycle.go: signals, reloads, the drain and the final
// snapshot).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"

	"golang.org/x/sys/unix"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	// SIGINT and SIGTERM end ctx; the server then drains, writes a final
	// snapshot and exits 0. SIGHUP reloads the rules file.
	ctx, stop := signal.NotifyContext(context.Background(), unix.SIGINT, unix.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, unix.SIGHUP)
	os.Exit(run(ctx, hup, os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // could not start, or the final snapshot failed
	exitUsage = 2 // the settings are wrong
)

// run is main without the process: it reads the settings from args and env
// (as os.Environ returns it) and serves until ctx ends (or a client sends
// SHUTDOWN), reloading the rules on every value from hup, and returns the
// exit code, so tests can run it in-process. Help and the version go to
// stdout; every error is printed once, to stderr.
func run(ctx context.Context, hup <-chan os.Signal, args, env []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "cluster" {
		return runClusterTool(ctx, args[1:], env, stdout, stderr)
	}
	cfg, err := loadConfig(args, env)
	var usage *usageError
	switch {
	case errors.Is(err, errHelp):
		printHelp(stdout, newSettings(&config{}))
		return exitOK
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "rlserver: %v\nRun 'rlserver --help' for every flag.\n", err)
		return exitUsage
	case err != nil:
		fmt.Fprintln(stderr, "rlserver:", err)
		return exitUsage
	case cfg.version:
		fmt.Fprintln(stdout, "rlserver", version)
		return exitOK
	case cfg.ping != "":
		return ping(cfg, stdout, stderr)
	}
	if !envSet(env, "GOGC") {
		defer startGCFloor(uint64(cfg.gcMinHeap))()
	}
	log := newLogger(cfg, stderr)
	for _, w := range cfg.warnings {
		log.Warn(w)
	}
	n, err := start(cfg, log)
	if err != nil {
		// Printed once, plainly: the process has not served anything, and
		// this is the line an operator reads first.
		fmt.Fprintln(stderr, "rlserver:", err)
		return exitFail
	}
	return n.serveUntilStopped(ctx, hup)
}

func newLogger(cfg *config, w io.Writer) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(cfg.logLevel)) // a choice validated by loadConfig
	opts := &slog.HandlerOptions{Level: level}
	if cfg.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// envSet reports whether env (as os.Environ returns it) sets name.
func envSet(env []string, name string) bool {
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == name {
			return true
		}
	}
	return false
}
