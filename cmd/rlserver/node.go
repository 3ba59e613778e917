package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"runtime/debug"
	"slices"
	"time"

	"github.com/rlserver/rlserver/internal/clock"
	"github.com/rlserver/rlserver/internal/cluster"
	"github.com/rlserver/rlserver/internal/commands"
	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/metrics"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/scripting"
	"github.com/rlserver/rlserver/internal/server"
	"github.com/rlserver/rlserver/internal/service"
	"github.com/rlserver/rlserver/internal/snapshot"
)

// idleTick is how often each shard advances its timing wheel: idle keys
// leave within this long of becoming fresh. Short, so that each advance
// evicts little and holds its shard briefly (docs/performance.md has the
// measurements), for 100 wake-ups a second per idle shard.
const idleTick = 10 * time.Millisecond

// idleGrace keeps a key for this long after its state is fresh again (see
// keyspace.Config.IdleGrace): a key that refills within milliseconds and is
// asked about again within a second is kept rather than dropped and
// recreated, at the cost of holding keys idle for under a second.
const idleGrace = time.Second

// node is one running rlserver: its parts, wired by start, and what stops
// them. Only the goroutine running serveUntilStopped uses it after start.
type node struct {
	cfg *config
	log *slog.Logger

	dir      *dataDir // nil without persistence
	clk      *clock.Clock
	rules    *rules.Store
	origin   ruleOrigin
	keys     *keyspace.Map
	saver    *snapshot.Manager // nil without persistence
	scripts  *scripting.Cache  // Lua scripts, persisted in the snapshot
	svc      *service.Service
	srv      *server.Server
	envoy    *envoyFront // nil without --grpc-addr
	http     []*endpoint // metrics and pprof: opened before RESP, served after it
	shutdown chan commands.ShutdownMode
	cluster  *commands.ClusterConfig // nil: cluster mode off
	handler  *commands.Handler

	// undo holds what to stop, newest last; close runs it backwards.
	undo []func()
}

// start wires a node: the data directory, the rules and keys (from the
// snapshot, if any), the snapshot manager, then every listener. All
// listeners are open before any serves, so a bad --metrics-addr fails the
// start without having served a thing. On error, everything started is
// stopped again.
func start(cfg *config, log *slog.Logger) (*node, error) {
	n := &node{cfg: cfg, log: log, clk: clock.New(), shutdown: make(chan commands.ShutdownMode, 1),
		scripts: scripting.NewCache(scripting.CacheLimits{})}
	n.logSettings()
	for _, step := range []func() error{n.lockDataDir, n.loadState, n.startSnapshots, n.startService, n.listenHTTP, n.listenGRPC, n.startRESP, n.serveGRPC} {
		if err := step(); err != nil {
			n.close()
			return nil, err
		}
	}
	for _, e := range n.http {
		e.serve(log)
	}
	n.logStarted()
	return n, nil
}

// close stops what start started, newest first.
func (n *node) close() {
	for _, f := range slices.Backward(n.undo) {
		f()
	}
	n.undo = nil
}

func (n *node) lockDataDir() error {
	if n.cfg.dataDir == "" {
		return nil
	}
	d, err := openDataDir(n.cfg.dataDir)
	if err != nil {
		return err
	}
	n.dir = d
	n.undo = append(n.undo, d.Release)
	return nil
}

// testHookKeyspace, when set by a test, is given the keyspace as soon as it
// exists.
var testHookKeyspace func(*keyspace.Map)

// loadState reads the snapshot, decides the rules and fills the keyspace.
func (n *node) loadState() error {
	var snap *snapshot.File
	if n.dir != nil {
		var err error
		if snap, err = snapshot.Open(filepath.Join(n.dir.path, snapshot.FileName)); err != nil {
			return fmt.Errorf("%w; refusing to start rather than start empty (move the file away to start without it)", err)
		}
		if snap != nil {
			defer snap.Close()
		}
	}
	var saved []rules.Def
	if snap != nil {
		saved = snap.Rules
	}
	origin, err := startRules(n.cfg, snap != nil, saved)
	if err != nil {
		return err
	}
	if n.rules, err = rules.NewStore(origin.defs); err != nil {
		return fmt.Errorf("rules from %s: %w", origin.source, err)
	}
	n.origin = origin
	kcfg := keyspace.Config{
		Shards: n.cfg.shards, Clock: n.clk.Now, Rules: n.rules, TickEvery: idleTick, IdleGrace: idleGrace,
		MaxKeys: n.cfg.maxKeys, Reject: n.cfg.maxKeysPolicy == "reject",
		MaxKeySize: int(n.cfg.maxKeySize), MaxValueSize: int(n.cfg.maxValueSize), MaxElements: n.cfg.maxElements,
	}
	if n.cfg.clusterMode != "off" {
		kcfg.SlotOf = cluster.KeySlot // CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT
	}
	n.keys = keyspace.New(kcfg)
	n.undo = append(n.undo, n.keys.Stop)
	if testHookKeyspace != nil {
		testHookKeyspace(n.keys)
	}
	if snap == nil {
		return nil
	}
	// The load allocates what the keyspace keeps and almost nothing else
	// (batches are reused, tables sized once; garbage is at most the logs
	// of evicted or fresh sliding-log keys, bounded by the file's size), so
	// collecting during it would only cost time (docs/persistence.md has
	// the figures). The collector is back on as soon as the load ends.
	start := time.Now()
	gc := debug.SetGCPercent(-1)
	rs, err := snap.Restore(n.rules, n.keys, n.clk.Now())
	debug.SetGCPercent(gc)
	if err != nil {
		return fmt.Errorf("%w; refusing to start (move the file away to start without it)", err)
	}
	n.log.Info("snapshot loaded", "path", snap.Path, "duration", time.Since(start),
		"keys", rs.Loaded, "plain_keys", rs.Plain, "fresh_dropped", rs.Fresh,
		"expired_dropped", rs.Expired, "orphans_dropped", rs.Orphan)
	return n.loadScripts(snap)
}

// loadScripts compiles the Lua scripts the snapshot holds into the cache,
// so EVALSHA finds them as before the restart. A script this version no
// longer compiles is logged and left out: its clients get NOSCRIPT and
// send it again, as after SCRIPT FLUSH.
func (n *node) loadScripts(snap *snapshot.File) error {
	srcs, err := snap.Scripts()
	if err != nil {
		return fmt.Errorf("%w; refusing to start (move the file away to start without it)", err)
	}
	for _, src := range srcs {
		if _, err := n.scripts.Load([]byte(src)); err != nil {
			n.log.Warn("snapshot: a saved script no longer compiles; left out", "err", err)
		}
	}
	if len(srcs) > 0 {
		n.log.Info("scripts loaded", "scripts", n.scripts.Len())
	}
	return nil
}

// savedScripts returns the cached scripts' sources, for a snapshot.
func (n *node) savedScripts() []string {
	all := n.scripts.All()
	srcs := make([]string, len(all))
	for i, s := range all {
		srcs[i] = s.Source()
	}
	return srcs
}

// startService builds the use cases every front end calls, over the
// rules, the keyspace and the snapshots.
func (n *node) startService() error {
	n.svc = service.New(service.Config{Rules: n.rules, Keys: n.keys, Snapshots: n.saver,
		RulesFile: n.cfg.rulesPath, RulesAuthoritative: n.cfg.rulesAuthoritative, ReservedRulePrefixes: n.cfg.reservedRulePrefixes()})
	return nil
}

func (n *node) startSnapshots() error {
	if n.dir == nil {
		return nil
	}
	saver, err := snapshot.NewManager(snapshot.Config{Dir: n.dir.path, Rules: n.rules, Keys: n.keys,
		Clock: n.clk.Now, ServerVersion: version, Logger: n.log, Scripts: n.savedScripts})
	if err != nil {
		return err
	}
	n.saver = saver
	saver.Start(n.cfg.snapshotInterval)
	n.undo = append(n.undo, saver.Stop)
	return nil
}

// listenHTTP opens the metrics and pprof listeners; they serve once RESP
// is up too.
func (n *node) listenHTTP() error {
	if n.cfg.metricsAddr != "" {
		src := &metrics.Sources{Service: n.svc}
		met := metrics.New(src)
		e, err := listen("metrics", "--metrics-addr", n.cfg.metricsAddr, met.Handler())
		if err != nil {
			return err
		}
		e.metrics, e.src = met, src
		n.addEndpoint(e)
	}
	if n.cfg.pprofAddr != "" {
		if !isLoopback(n.cfg.pprofAddr) {
			n.log.Warn("pprof is served beyond loopback, without authentication: anyone who can reach it can profile the server; keep --pprof-addr on 127.0.0.1",
				"pprof_addr", n.cfg.pprofAddr)
		}
		e, err := listen("pprof", "--pprof-addr", n.cfg.pprofAddr, pprofHandler(n.cfg.set))
		if err != nil {
			return err
		}
		n.addEndpoint(e)
	}
	return nil
}

func (n *node) addEndpoint(e *endpoint) {
	n.http = append(n.http, e)
	n.undo = append(n.undo, e.close)
}

// luaTimeLimit turns --lua-time-limit (ms; 0: never) into the handler's
// setting (negative: never).
func luaTimeLimit(ms int) time.Duration {
	if ms == 0 {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}

// startRESP listens on --addr and serves: the last listener opened, and the
// first to serve.
func (n *node) startRESP() error {
	tlsConfig, err := serverTLS(n.cfg)
	if err != nil {
		return err
	}
	cfg := n.cfg
	clusterCfg, err := n.startCluster(tlsConfig)
	if err != nil {
		return err
	}
	// In cluster mode a pipeline that may wait for another node (a
	// forwarded command, a broadcast rule change, a paused slot) leaves its
	// event loop for a goroutine (commands' MayRunLong), so the loops stay.
	eventLoops := cfg.eventLoops
	var reload func() error
	if cfg.rulesPath != "" {
		reload = n.reloadRules
	}
	hcfg := commands.Config{
		Service: n.svc, Clock: n.clk.Now, Version: version, RulesSource: n.origin.source, ReloadRules: reload, Logger: n.log,
		Cluster: clusterCfg,
		Scripts: n.scripts, LuaTimeLimit: luaTimeLimit(cfg.luaTimeLimitMs),
		RequestShutdown: func(m commands.ShutdownMode) {
			select {
			case n.shutdown <- m:
			default: // one request is enough
			}
		},
	}
	for _, e := range n.http {
		if e.metrics != nil {
			hcfg.CommandDuration = e.metrics.CommandDuration
		}
	}
	if n.envoy != nil {
		hcfg.GRPCInfo = n.envoy.info
	}
	n.handler = commands.New(hcfg)
	n.srv = server.New(server.Config{
		Addr: cfg.addr, TLS: tlsConfig, Handler: n.handler, Clock: n.clk.Now, Logger: n.log,
		Password: cfg.password, MaxClients: cfg.maxClients, IdleTimeout: cfg.idleTimeout,
		EventLoops: eventLoops, Limits: cfg.limits(),
	})
	if err := n.srv.Start(); err != nil {
		return err
	}
	for _, e := range n.http {
		if e.src != nil {
			e.src.Server = n.srv
		}
	}
	n.undo = append(n.undo, func() { n.srv.Shutdown(context.Background()) })
	return nil
}

// logSettings logs the settings that are not defaults, secrets masked.
func (n *node) logSettings() {
	var settings []any
	for _, s := range n.cfg.set {
		if s.src.kind != 0 {
			settings = append(settings, s.name, s.shown())
		}
	}
	if len(settings) > 0 {
		n.log.Info("settings", settings...)
	}
}

// logStarted writes the start-up lines: the rules' origin, and the line
// tests and operators wait for.
func (n *node) logStarted() {
	n.log.Info("rules", n.origin.logAttrs()...)
	if n.rules.Load().Len() == 0 {
		n.log.Warn("no rules: RL.ALLOW, RL.PEEK and RL.RESET answer unknown rule until RL.RULE SET adds one (CL.THROTTLE and plain keys need none)")
	}
	addrs := map[string]string{}
	for _, e := range n.http {
		addrs[e.name] = e.ln.Addr().String()
	}
	if n.envoy != nil {
		addrs["grpc"] = n.envoy.ln.Addr().String()
	}
	n.log.Info("rlserver started", "version", version, "addr", n.srv.Addr().String(), "tls", n.cfg.tlsCert != "",
		"auth", n.cfg.password != "", "rules", n.origin.source, "rule_count", n.rules.Load().Len(), "shards", n.keys.Len(),
		"event_loops", n.srv.EventLoops(), "data_dir", n.cfg.dataDir, "metrics", addrs["metrics"], "pprof", addrs["pprof"], "grpc", addrs["grpc"])
}

// endpoint is an HTTP listener (metrics or pprof), open before it serves.
type endpoint struct {
	name string
	ln   net.Listener
	hs   *http.Server
	// For the metrics endpoint: the registry, and its sources, whose
	// Server is set once RESP is up.
	metrics *metrics.Metrics
	src     *metrics.Sources
}

func listen(name, flag, addr string, h http.Handler) (*endpoint, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, addr, err)
	}
	return &endpoint{name: name, ln: ln, hs: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}, nil
}

func (e *endpoint) serve(log *slog.Logger) {
	go func() {
		if err := e.hs.Serve(e.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(e.name+" server stopped", "err", err)
		}
	}()
}

// close stops serving, or closes the listener if it never served.
func (e *endpoint) close() {
	e.hs.Shutdown(context.Background())
	e.ln.Close()
}
