// Package testserver assembles a whole rlserver — rules, keyspace,
// snapshots, service, command table and connections — on an ephemeral
// loopback port, for the end-to-end tests of the packages that make it up.
// It is test support: nothing outside tests imports it.
//
// Both connection models are exercised by running a test under Models: its
// subtests "eventloops" and "goroutines" start servers of each kind (Start
// reads the model from the test's name, so helpers need no parameter).
package testserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/cluster"
	"github.com/rlserver/rlserver/internal/commands"
	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/resp"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/server"
	"github.com/rlserver/rlserver/internal/service"
	"github.com/rlserver/rlserver/internal/snapshot"
)

// T0 is where test clocks start: 2024-01-01T00:00:00Z, aligned to every
// window tests use.
const T0 = int64(1_704_067_200) * int64(time.Second)

// Clock is an injected clock: tests move it by hand, never by sleeping.
type Clock struct{ ns atomic.Int64 }

// Now returns the clock's instant, ns since the epoch.
func (c *Clock) Now() int64 { return c.ns.Load() }

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// Set puts the clock at ns since the epoch.
func (c *Clock) Set(ns int64) { c.ns.Store(ns) }

// Options are what a test changes about its server.
type Options struct {
	Rules      []rules.Def // nil: the built-in defaults
	DataDir    string      // "": persistence off
	MaxKeys    int
	Reject     bool
	Shards     int // 0: 4
	Shutdown   func(commands.ShutdownMode)
	Password   string
	MaxClients int
	Idle       time.Duration
	Limits     resp.Limits
	TLS        *tls.Config
	Logger     *slog.Logger            // nil: discard
	Hook       func(kind, name string) // commands.Config.HandlerHook
	RulesFile  string                  // for RL.RULE RELOAD
	// MaxValueSize and MaxElements bound one value (keyspace.Config);
	// 0: the defaults.
	MaxValueSize, MaxElements int
	// ReservedRulePrefixes are service.Config's: the prefixes of rules a
	// front end manages (service.Managed).
	ReservedRulePrefixes []string
	// EventLoops is taken as given when Model is set: 0 a goroutine per
	// connection, n > 0 that many event loops. Otherwise Start picks the
	// model from the test's name (see Models).
	EventLoops int
	Model      bool
	// Cluster, if set, runs the server in cluster mode.
	Cluster *commands.ClusterConfig
	// CommandDuration, if set, observes each command's duration
	// (commands.Config.CommandDuration).
	CommandDuration *prometheus.HistogramVec
}

// Server is a running test server.
type Server struct {
	Addr    string
	Clock   *Clock
	Rules   *rules.Store
	Keys    *keyspace.Map
	Service *service.Service
	Server  *server.Server
}

// Models runs fn as the subtests "eventloops" and "goroutines": a server
// Start-ed inside serves connections from two event loops, or a goroutine
// each.
func Models(t *testing.T, fn func(t *testing.T)) {
	t.Helper()
	t.Run("eventloops", fn)
	t.Run("goroutines", fn)
}

// EventLoops is the model of a test running under Models (by its name): 2
// event loops, or 0 for a goroutine per connection; event loops outside
// Models.
func EventLoops(t testing.TB) int {
	if strings.Contains(t.Name(), "/goroutines") {
		return 0
	}
	return 2
}

// Start runs a server with o on an ephemeral loopback port and stops it when
// the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	if !o.Model {
		o.EventLoops, o.Model = EventLoops(t), true
	}
	s, stop, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

// New runs a server with o on an ephemeral loopback port (two event loops
// unless o.Model) and returns it with the function that stops it.
func New(o Options) (*Server, func() error, error) {
	if len(o.Rules) == 0 {
		o.Rules = rules.Defaults()
	}
	if o.Shards == 0 {
		o.Shards = 4
	}
	if !o.Model {
		o.EventLoops = 2
	}
	store, err := rules.NewStore(o.Rules)
	if err != nil {
		return nil, nil, err
	}
	clk := &Clock{}
	clk.Set(T0)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	logger := quiet
	if o.Logger != nil {
		logger = o.Logger
	}
	kcfg := keyspace.Config{Shards: o.Shards, Clock: clk.Now, Rules: store, MaxKeys: o.MaxKeys, Reject: o.Reject,
		MaxValueSize: o.MaxValueSize, MaxElements: o.MaxElements}
	if o.Cluster != nil {
		kcfg.SlotOf = cluster.KeySlot
	}
	ks := keyspace.New(kcfg)
	var saver *snapshot.Manager
	if o.DataDir != "" {
		if saver, err = snapshot.NewManager(snapshot.Config{Dir: o.DataDir, Rules: store, Keys: ks, Clock: clk.Now, Logger: quiet}); err != nil {
			ks.Stop()
			return nil, nil, err
		}
	}
	svc := service.New(service.Config{Rules: store, Keys: ks, Snapshots: saver, RulesFile: o.RulesFile, ReservedRulePrefixes: o.ReservedRulePrefixes})
	hcfg := commands.Config{Service: svc, Clock: clk.Now, Version: "test", RulesSource: "test", RequestShutdown: o.Shutdown,
		Logger: logger, HandlerHook: o.Hook, Cluster: o.Cluster, CommandDuration: o.CommandDuration}
	if o.RulesFile != "" {
		hcfg.ReloadRules = func() error { _, err := svc.ReloadRules(); return err }
	}
	srv := server.New(server.Config{
		Addr: "127.0.0.1:0", Handler: commands.New(hcfg), Clock: clk.Now, Logger: logger,
		Password: o.Password, MaxClients: o.MaxClients, IdleTimeout: o.Idle, Limits: o.Limits,
		EventLoops: o.EventLoops, TLS: o.TLS,
	})
	if err := srv.Start(); err != nil {
		ks.Stop()
		return nil, nil, err
	}
	stop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := srv.Shutdown(ctx)
		if saver != nil {
			saver.Stop()
		}
		ks.Stop()
		return err
	}
	return &Server{Addr: srv.Addr().String(), Clock: clk, Rules: store, Keys: ks, Service: svc, Server: srv}, stop, nil
}

// Client returns a go-redis client speaking protocol (2 or 3), closed when
// the test ends.
func (s *Server) Client(t testing.TB, protocol int) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: protocol, PoolSize: 4})
	t.Cleanup(func() { c.Close() })
	return c
}

// DialRaw opens a plain TCP connection for byte-level protocol tests,
// closed when the test ends.
func DialRaw(t testing.TB, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Def is a rule definition for tests.
func Def(name, alg, limit, window, burst string) rules.Def {
	return rules.MustParseDef(name, alg, limit, window, burst)
}

// DecisionFields names the six numbers of an RL.ALLOW reply, in order.
var DecisionFields = [6]string{"allowed", "limit", "remaining", "retry_after_ms", "reset_after_ms", "delay_ms"}

// Decision reads an RL.ALLOW/RL.PEEK reply in either protocol as the six
// numbers in reply order, failing the test on an error.
func Decision(t testing.TB, cmd *redis.Cmd) [6]int64 {
	t.Helper()
	d, err := ParseDecision(cmd)
	if err != nil {
		t.Fatalf("%v: %v", cmd.Args(), err)
	}
	return d
}

// ParseDecision reads an RL.ALLOW/RL.PEEK reply in either protocol as the
// six numbers in reply order.
func ParseDecision(cmd *redis.Cmd) ([6]int64, error) {
	var out [6]int64
	v, err := cmd.Result()
	if err != nil {
		return out, err
	}
	switch r := v.(type) {
	case []any: // RESP2
		if len(r) != 6 {
			return out, fmt.Errorf("decision has %d elements: %v", len(r), r)
		}
		for i := range r {
			n, ok := r[i].(int64)
			if !ok {
				return out, fmt.Errorf("element %d is %T", i, r[i])
			}
			out[i] = n
		}
	case map[any]any: // RESP3
		if len(r) != 6 {
			return out, fmt.Errorf("decision map has %d fields: %v", len(r), r)
		}
		for i, name := range DecisionFields {
			n, ok := r[name].(int64)
			if !ok {
				return out, fmt.Errorf("decision map lacks %s: %v", name, r)
			}
			out[i] = n
		}
	default:
		return out, fmt.Errorf("decision reply of type %T: %v", v, v)
	}
	return out, nil
}

// EachProtocol runs fn as subtests for RESP2 and RESP3.
func EachProtocol(t *testing.T, fn func(t *testing.T, protocol int)) {
	for _, p := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", p), func(t *testing.T) { fn(t, p) })
	}
}

// RedisError runs a command that must fail with a Redis error reply, and
// returns the error's text.
func RedisError(t *testing.T, c *redis.Client, args ...any) string {
	t.Helper()
	err := c.Do(context.Background(), args...).Err()
	var re redis.Error
	if !errors.As(err, &re) {
		t.Fatalf("%v: got %v, want a Redis error", args, err)
	}
	return err.Error()
}
