package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/rlserver/rlserver/internal/cluster"
	"github.com/rlserver/rlserver/internal/cluster/admin"
	"github.com/rlserver/rlserver/internal/cluster/forward"
	"github.com/rlserver/rlserver/internal/commands"
)

// Files of cluster mode in the data directory: the node's id, chosen once,
// and the last map it accepted, so that a restarted node keeps both.
const (
	nodeIDFileName     = "node-id"
	clusterMapFileName = "cluster-map.json"
)

// groupCluster is --help's heading of the cluster settings.
const groupCluster = "Cluster"

// clusterSettings are the cluster-mode settings (docs/cluster.md).
func clusterSettings(c *config) settings {
	return settings{
		{name: "cluster", group: groupCluster, arg: "off|on|emulated", def: "off",
			value: choiceValue{&c.clusterMode, []string{"off", "on", "emulated"}},
			usage: "Redis Cluster mode: on serves the slots a slot map gives this node; emulated is a one-node cluster for development (docs/cluster.md)"},
		{name: "cluster-config", group: groupCluster, arg: "PATH", value: stringValue{&c.clusterConfig},
			usage: "slot map (JSON) read at start and on SIGHUP; a map pushed with RL.CLUSTER SETCONFIG and saved in --data-dir wins when newer"},
		{name: "cluster-announce-addr", group: groupCluster, arg: "HOST:PORT", value: stringValue{&c.clusterAnnounce},
			usage: "the address clients are told this node is at (emulated mode; CLUSTER NODES before a map arrives)"},
		{name: "cluster-forward", group: groupCluster, def: "true", value: boolValue{&c.clusterForward},
			usage: "relay RL.* and CL.THROTTLE for slots owned elsewhere to the owner instead of answering MOVED (clients such as ioredis cannot route them)"},
		{name: "cluster-node-id", group: groupCluster, arg: "ID", value: stringValue{&c.clusterNodeID},
			usage: "this node's id, 40 hex digits (default: kept in --data-dir's node-id file, made at first start)"},
	}
}

// validateCluster checks the cluster settings that go together.
func (c *config) validateCluster() error {
	bad := func(name, reason string) error { return fmt.Errorf("%s: %s", c.set.lookup(name).where(), reason) }
	switch {
	case c.clusterMode == "off" && (c.clusterConfig != "" || c.clusterAnnounce != "" || c.clusterNodeID != ""):
		for _, name := range []string{"cluster-config", "cluster-announce-addr", "cluster-node-id"} {
			if c.set.lookup(name).raw != "" {
				return bad(name, "needs --cluster on or emulated")
			}
		}
	case c.clusterMode == "emulated" && c.clusterConfig != "":
		return bad("cluster-config", "an emulated cluster is one node owning every slot: it takes no map (use --cluster on)")
	}
	return nil
}

// startCluster builds the node's cluster state when cluster mode is on:
// its id, the newest of --cluster-config and the map last saved, and the
// forwarding pool. It returns nil with cluster mode off.
func (n *node) startCluster(tc *tls.Config) (*commands.ClusterConfig, error) {
	mode, err := cluster.ParseMode(n.cfg.clusterMode)
	if err != nil || mode == cluster.Off {
		return nil, err
	}
	id, err := n.clusterNodeID()
	if err != nil {
		return nil, err
	}
	st, err := cluster.NewState(cluster.Config{Mode: mode, SelfID: id, Announce: n.cfg.clusterAnnounce,
		HandOver: mode == cluster.On})
	if err != nil {
		return nil, err
	}
	cc := &commands.ClusterConfig{State: st, TLS: tc != nil, Accepted: n.clusterMapAccepted}
	n.cluster = cc
	if mode == cluster.On {
		var paths []string
		if n.cfg.clusterConfig != "" {
			// A missing file is an error here (a misspelt path), while
			// the saved map may not exist yet.
			if _, err := os.Stat(n.cfg.clusterConfig); err != nil {
				return nil, fmt.Errorf("--cluster-config: %w", err)
			}
			paths = append(paths, n.cfg.clusterConfig)
		}
		if n.dir != nil {
			paths = append(paths, filepath.Join(n.dir.path, clusterMapFileName))
		}
		m, err := cluster.NewestMapFile(paths...)
		if err != nil {
			return nil, fmt.Errorf("cluster map: %w", err)
		}
		if m != nil {
			if _, err := st.Apply(m); err != nil {
				return nil, err
			}
			n.warnIfAbsent(m)
		}
		cc.Peers = forward.New(forward.Options{Password: n.cfg.password, TLS: peerTLS(tc),
			Init: [][]string{forward.PeerCommand}})
		n.undo = append(n.undo, func() { cc.Peers.Close() })
		if n.cfg.clusterForward {
			cc.Forward = cc.Peers
		}
	}
	n.log.Info("cluster mode", "mode", mode.String(), "node_id", id, "map_version", st.View().Version(),
		"forward", cc.Forward != nil)
	return cc, nil
}

// clusterNodeID is --cluster-node-id, else the id kept in the data
// directory (made on first start), else a new id for this run only.
func (n *node) clusterNodeID() (string, error) {
	switch {
	case n.cfg.clusterNodeID != "":
		return n.cfg.clusterNodeID, nil
	case n.dir != nil:
		return cluster.LoadOrCreateNodeID(filepath.Join(n.dir.path, nodeIDFileName))
	}
	n.log.Warn("cluster mode without --data-dir or --cluster-node-id: this node gets a new id at every start, so a map naming it is lost on restart")
	return cluster.NewNodeID(), nil
}

// peerTLS is the client side of TLS between nodes: the nodes' CA (the one
// clients are checked against, else the system's roots) verifies the
// peer, and this node's certificate is its client certificate.
func peerTLS(server *tls.Config) *tls.Config {
	if server == nil {
		return nil
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: server.Certificates, RootCAs: server.ClientCAs}
}

// clusterMapAccepted saves a map the node accepted (so a restart keeps it)
// and drops pooled connections to nodes it no longer lists.
func (n *node) clusterMapAccepted(m *cluster.Map) error {
	n.warnIfAbsent(m)
	if p := n.cluster.Peers; p != nil {
		keep := map[string]bool{}
		for i := range m.Len() {
			keep[m.Node(i).PeerAddr(n.cluster.TLS)] = true
		}
		p.Prune(func(addr string) bool { return keep[addr] })
	}
	if n.dir == nil {
		return nil
	}
	return cluster.WriteMapFile(filepath.Join(n.dir.path, clusterMapFileName), m)
}

// warnIfAbsent logs when a map does not name this node: it then serves no
// slot and answers MOVED for every key.
func (n *node) warnIfAbsent(m *cluster.Map) {
	if m.Index(n.cluster.State.View().SelfID()) < 0 {
		n.log.Warn("the cluster map does not list this node: it serves no slot", "node_id", n.cluster.State.View().SelfID(),
			"map_version", m.Version())
	}
}

// reloadClusterMap re-reads --cluster-config (SIGHUP) and applies it when
// it is newer than the node's map, logging the outcome.
func (n *node) reloadClusterMap() {
	m, err := cluster.ReadMapFile(n.cfg.clusterConfig)
	if err == nil {
		var changed bool
		if changed, err = n.cluster.State.Apply(m); err == nil {
			if changed {
				err = n.clusterMapAccepted(m)
			}
			n.log.Info("cluster map reloaded", "path", n.cfg.clusterConfig, "version", m.Version(), "changed", changed)
			if err == nil {
				err = n.handler.HandOver() // logs each hand-over
			}
		}
	}
	if err != nil {
		n.log.Error("cluster map reload failed; the node keeps its map", "path", n.cfg.clusterConfig,
			"version", n.cluster.State.View().Version(), "err", err)
	}
}

// clusterToolUsage is `rlserver cluster`'s synopsis.
const clusterToolUsage = "usage: " + admin.CreateUsage + "\n       " + admin.CheckUsage + `
The password and TLS settings are read as the server reads them (RLSERVER_REQUIREPASS,
RLSERVER_REQUIREPASS_FILE, RLSERVER_TLS_*, or the file RLSERVER_CONFIG names).`

// runClusterTool is `rlserver cluster create|check ...`: the operator's
// tools, which talk to running nodes as a client (docs/cluster.md).
func runClusterTool(ctx context.Context, args, env []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "create" && args[0] != "check") {
		fmt.Fprintln(stderr, clusterToolUsage)
		return exitUsage
	}
	cfg, err := loadConfig(nil, env)
	if err != nil {
		fmt.Fprintln(stderr, "rlserver cluster:", err)
		return exitUsage
	}
	tc, err := serverTLS(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "rlserver cluster:", err)
		return exitUsage
	}
	opt := admin.Options{Password: cfg.password, TLS: peerTLS(tc)}
	tool := admin.Create
	if args[0] == "check" {
		tool = admin.Check
	}
	if err := tool(ctx, args[1:], stdout, opt); err != nil {
		if !errors.Is(err, admin.ErrFailed) {
			fmt.Fprintln(stderr, "rlserver cluster "+args[0]+":", err)
		}
		return exitFail
	}
	return exitOK
}
