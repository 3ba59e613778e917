// Package commands is the Redis command table and its handlers: what each
// command does, as rlserver's Redis-protocol front end. A server
// (internal/server) hands it each connection's pipeline; it checks each
// command against the table (existence, arity, authentication,
// transactions), runs it through the service layer (internal/service), and
// writes the reply with the RESP codec (internal/resp).
//
// Handlers come in three kinds (see command):
//   - decisions (RL.ALLOW, RL.PEEK, RL.RESET) become keyspace operations that
//     wait in the connection's batch, so a pipeline of them costs one
//     message per shard;
//   - keyed commands (the string commands, CL.THROTTLE) are functions over a
//     service.DB, run by whoever has exclusive use of their keys' shards:
//     the shard itself for a single key (batched like decisions), a
//     coordinator holding the shards for several, the transaction for
//     commands inside EXEC;
//   - immediate commands run on the connection's goroutine.
//
// Errors are typed values up to errorText, the one table that turns them
// into Redis's wording.
package commands

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rlserver/rlserver/internal/scripting"
	"github.com/rlserver/rlserver/internal/server"
	"github.com/rlserver/rlserver/internal/service"
)

// Config configures a Handler.
type Config struct {
	// Service holds the use cases: decisions, rules, saves, statistics.
	Service *service.Service
	// Clock returns the current instant in ns since the Unix epoch; the
	// keyspace's clock, so TIME agrees with decisions.
	Clock func() int64
	// Version is rlserver's version, reported by HELLO and INFO.
	Version string
	// RulesSource describes where the rules came from, for INFO.
	RulesSource string
	// ReloadRules re-reads the rules file (RL.RULE RELOAD), through the
	// service, and logs the outcome; nil when there is no file.
	ReloadRules func() error
	// RequestShutdown asks the program to shut down (SHUTDOWN); it must
	// not block. nil makes SHUTDOWN an error.
	RequestShutdown func(ShutdownMode)
	// CommandDuration, when set, observes each command's duration in
	// seconds, labelled by command name.
	CommandDuration *prometheus.HistogramVec
	// GRPCInfo, when set, returns the fields of INFO's and RL.INFO's grpc
	// section (the Envoy rate limit service's counters); nil when it is
	// not served.
	GRPCInfo func() []InfoField
	// Logger receives what a handler's panic leaves; nil means
	// slog.Default().
	Logger *slog.Logger
	// HandlerHook, when set (by tests), is called before each handler
	// runs, inside its panic guard, with the kind of handler ("run",
	// "prepare", "reply" or "exec") and the command's name: a test makes it
	// panic to check what a handler's panic does.
	HandlerHook func(kind, name string)
	// Cluster, when set, runs the node in cluster mode (cmd_cluster.go).
	Cluster *ClusterConfig
	// Scripts is the Lua script cache (EVAL, SCRIPT LOAD), shared with the
	// snapshots that persist it; nil: a cache of the handler's own.
	Scripts *scripting.Cache
	// LuaTimeLimit is how long a script runs before other clients touching
	// its shards get BUSY and SCRIPT KILL may stop it (--lua-time-limit;
	// 0: scripting.DefaultTimeLimit; negative: never).
	LuaTimeLimit time.Duration
}

// Handler runs the Redis commands of a server's connections. It implements
// server.Handler.
type Handler struct {
	cfg Config
	svc *service.Service
	log *slog.Logger
	// observers[i] observes the duration of commands.sorted[i]; nil when
	// metrics are off.
	observers []prometheus.Observer
	scripts   *scriptHost
	// ruleOnDemand, if set, publishes a rule a peer's decision names and
	// the set lacks (SetRuleOnDemand).
	ruleOnDemand atomic.Pointer[func(name string) bool]
}

var _ server.Handler = (*Handler)(nil)

// New returns a Handler for cfg.
func New(cfg Config) *Handler {
	h := &Handler{cfg: cfg, svc: cfg.Service, log: cfg.Logger}
	if h.log == nil {
		h.log = slog.Default()
	}
	if cfg.Clock == nil {
		h.cfg.Clock = func() int64 { return time.Now().UnixNano() }
	}
	h.scripts = newScriptHost(h.cfg)
	if cfg.CommandDuration != nil {
		for _, cmd := range commands.sorted {
			h.observers = append(h.observers, cfg.CommandDuration.WithLabelValues(cmd.name))
		}
	}
	return h
}

// NewBatch implements server.Handler: the work of one goroutine's
// connections, gathered per shard.
func (h *Handler) NewBatch() server.Batch {
	return &batch{h: h, ss: h.svc.NewSession()}
}

// NewSession implements server.Handler: one connection's command state.
func (h *Handler) NewSession(c *server.Conn, b server.Batch) server.Session {
	return &session{h: h, conn: c, out: c.Out(), batch: b.(*batch)}
}

// observe records one command's duration since start, when metrics are on.
func (h *Handler) observe(cmd *command, start time.Time) {
	if h.observers != nil {
		h.observers[cmd.index].Observe(time.Since(start).Seconds())
	}
}

// now returns the time for a duration measurement, or the zero time when
// metrics are off (time.Now is not free on the hot path).
func (h *Handler) now() time.Time {
	if h.observers == nil {
		return time.Time{}
	}
	return time.Now()
}
