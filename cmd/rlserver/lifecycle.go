package main

import (
	"context"
	"os"
	"time"

	"github.com/rlserver/rlserver/internal/commands"
)

// serveUntilStopped serves until ctx ends (SIGINT, SIGTERM) or a client
// sends SHUTDOWN, reloading the rules file and the Envoy configuration on
// every value from hup; then it
// drains, writes the final snapshot, stops everything and returns the exit
// code.
func (n *node) serveUntilStopped(ctx context.Context, hup <-chan os.Signal) int {
	mode := commands.ShutdownDefault
	failed := false
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case mode = <-n.shutdown:
			break wait
		case <-n.keys.Failed():
			// A shard panicked; the others are healthy (see
			// internal/keyspace/failure.go): save what they hold and exit
			// non-zero.
			f := n.keys.Failure()
			n.log.Error("a shard failed; saving the other shards and exiting", "err", f, "stack", string(f.Stack))
			failed = true
			break wait
		case <-hup:
			if n.cluster != nil && n.cfg.clusterConfig != "" {
				n.reloadClusterMap() // logs its outcome
			}
			if n.cfg.rulesPath == "" && n.envoy == nil {
				if n.cluster == nil || n.cfg.clusterConfig == "" {
					n.log.Warn("SIGHUP ignored: the server was started without --rules, --envoy-config or --cluster-config")
				}
				continue
			}
			if n.cfg.rulesPath != "" {
				n.reloadRules() // logs its outcome
			}
			n.reloadEnvoy() // logs its outcome
		}
	}
	code := n.stop(mode)
	if f := n.keys.Failure(); f != nil && !failed { // failed while draining
		n.log.Error("a shard failed while shutting down; the final snapshot holds the other shards", "err", f, "stack", string(f.Stack))
		failed = true
	}
	if failed {
		return exitFail
	}
	return code
}

// stop drains connections, writes the final snapshot (unless SHUTDOWN
// NOSAVE) and stops everything, within --shutdown-timeout: the drain is cut
// early enough to leave the snapshot the time it is expected to take.
func (n *node) stop(mode commands.ShutdownMode) int {
	defer n.close()
	saving := n.saver != nil && mode != commands.ShutdownNoSave
	var lastSave time.Duration
	if saving {
		lastSave = n.saver.Status().LastDuration
	}
	drain, reserve := planShutdown(n.cfg.shutdownGrace, saving, lastSave)
	n.log.Info("shutting down: draining connections", "drain_timeout", drain, "kept_for_snapshot", reserve)
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	// gRPC drains beside RESP, within the same budget.
	grpcDone := make(chan error, 1)
	if n.envoy != nil {
		go func() { grpcDone <- n.envoy.shutdown(ctx) }()
	} else {
		grpcDone <- nil
	}
	if err := n.srv.Shutdown(ctx); err != nil {
		n.log.Warn("shutdown", "err", err)
	}
	if err := <-grpcDone; err != nil {
		n.log.Warn("gRPC shutdown", "err", err)
	}
	if n.saver != nil {
		n.saver.Stop() // no periodic save may run beside the final one
	}
	if saving {
		if err := n.saver.Save(); err != nil {
			n.log.Error("final snapshot failed", "err", err)
			return exitFail
		}
		n.log.Info("final snapshot written", "path", n.saver.Path())
	}
	n.log.Info("stopped")
	return exitOK
}

// minSnapshotReserve is the least time kept for the final snapshot before
// any save has been timed.
const minSnapshotReserve = time.Second

// planShutdown splits the shutdown budget (--shutdown-timeout) between
// draining connections and the final snapshot. The snapshot is what keeps
// every client's spent budget across the restart, so it comes first: it is
// given twice the last save's duration (at least minSnapshotReserve, at
// most the whole budget), and the drain what remains. An orchestrator kills
// the process after its own grace period (docker stop: 10 s), so a budget
// below that lets the snapshot finish.
func planShutdown(budget time.Duration, saving bool, lastSave time.Duration) (drain, reserve time.Duration) {
	if !saving {
		return budget, 0
	}
	reserve = min(max(2*lastSave, minSnapshotReserve), budget)
	return budget - reserve, reserve
}
