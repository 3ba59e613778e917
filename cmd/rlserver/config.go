package main

import (
	"runtime"
	"strconv"
	"time"

	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/resp"
)

// config is every setting rlserver takes, parsed. Settings are declared in
// newSettings and read (flags, environment, file) by loadConfig, nowhere
// else.
type config struct {
	// Serving
	addr          string
	shards        int
	eventLoops    int // 0: a goroutine per connection
	maxClients    int
	idleTimeout   time.Duration // 0: never
	shutdownGrace time.Duration // SIGTERM to exit: drain, then the final snapshot
	// Rules
	rulesPath          string
	rulesAuthoritative bool // the file's rules are all the rules
	// Envoy's rate limit service (gRPC); both "" when off
	grpcAddr    string
	grpcServer  string
	envoyConfig string // a file or a directory of envoyproxy/ratelimit YAML
	// Persistence and memory
	dataDir          string        // "" disables persistence
	snapshotInterval time.Duration // 0: only on SAVE, BGSAVE and shutdown
	maxKeys          int           // 0: unbounded
	luaTimeLimitMs   int           // 0: never busy
	maxKeysPolicy    string        // "evict" or "reject"
	maxKeySize       int64         // bytes
	maxValueSize     int64         // bytes
	maxElements      int           // per hash, list or sorted set
	// Security
	password     string // from --requirepass, or read from --requirepass-file
	passwordFile string
	protected    bool
	tlsCert      string
	tlsKey       string
	tlsCA        string
	// Limits against abuse
	maxBulkLen       int64
	maxArgs          int64
	queryBufferLimit int64
	outputLimit      int64
	gcMinHeap        int64
	outputTimeout    time.Duration
	handshakeTimeout time.Duration // 0: never
	maxAuthFailures  int           // 0: never close
	// Operations
	configPath  string
	metricsAddr string
	pprofAddr   string
	logFormat   string
	logLevel    string
	ping        string // --ping ADDR: health-check mode
	version     bool
	// Cluster mode (cluster.go)
	clusterMode     string // off, on or emulated
	clusterConfig   string
	clusterAnnounce string
	clusterForward  bool
	clusterNodeID   string

	// set is every setting, bound to the fields above.
	set settings
	// warnings are noticed while reading the settings (an RLSERVER_
	// variable that is no setting, say) and logged at start.
	warnings []string
}

// Group headings, in --help's order.
const (
	groupServing    = "Serving"
	groupRules      = "Rules"
	groupPersist    = "Persistence and memory"
	groupSecurity   = "Security"
	groupLimits     = "Limits against abuse"
	groupOperations = "Operations"
)

var groups = []string{groupServing, groupRules, groupPersist, groupSecurity, groupLimits, groupOperations, groupCluster}

// newSettings declares every setting, bound to c's fields, in --help's
// order. docs/operations.md has a row for each, with the same default
// (TestDocsListEverySettingWithItsDefault).
func newSettings(c *config) settings {
	logLevels := []string{"debug", "info", "warn", "error"}
	return append(settings{
		{name: "addr", group: groupServing, arg: "HOST:PORT", def: "127.0.0.1:6380", value: addrValue{p: &c.addr},
			usage: "TCP address to serve RESP on; beyond loopback a password is required (see --protected-mode)"},
		{name: "shards", group: groupServing, arg: "N", def: strconv.Itoa(keyspace.DefaultShards()), value: intValue{&c.shards},
			defNote: "GOMAXPROCS rounded up to a power of two", usage: "keyspace shards, a power of two"},
		{name: "event-loops", group: groupServing, arg: "N", def: strconv.Itoa(defaultEventLoops()), value: intValue{&c.eventLoops},
			defNote: "GOMAXPROCS (Linux), else 0",
			usage:   "event loops serving plain-TCP connections (Linux); 0: a goroutine per connection, as always with TLS"},
		{name: "maxclients", group: groupServing, arg: "N", def: "10000", value: intValue{&c.maxClients},
			usage: "most connections at once; more are refused with ERR max number of clients reached"},
		{name: "timeout", group: groupServing, arg: "DURATION", def: "0", value: durationValue{&c.idleTimeout},
			usage: "close connections idle this long (0: never)"},
		{name: "lua-time-limit", group: groupServing, arg: "MS", def: "5000", value: intValue{&c.luaTimeLimitMs},
			usage: "milliseconds a Lua script runs before other clients touching its shards get BUSY and SCRIPT KILL may stop it (0: never), as Redis's lua-time-limit"},
		{name: "shutdown-timeout", group: groupServing, arg: "DURATION", def: "8s", value: durationValue{&c.shutdownGrace},
			usage: "on SIGTERM, the time to drain connections and write the final snapshot, together; keep it under the orchestrator's kill grace (docker stop: 10s)"},

		{name: "rules", group: groupRules, arg: "PATH", value: stringValue{&c.rulesPath},
			usage: "YAML rules file, applied over the snapshot's rules at start and re-read on SIGHUP and RL.RULE RELOAD (default: the built-in rules)"},
		{name: "rules-authoritative", group: groupRules, def: "false", value: boolValue{&c.rulesAuthoritative},
			usage: "the rules file holds every rule: rules it does not define (from the snapshot, or RL.RULE SET) are deleted at start and on reload"},

		{name: "grpc-addr", group: groupRules, arg: "HOST:PORT", value: addrValue{p: &c.grpcAddr, optional: true},
			usage: "serve Envoy's rate limit service (gRPC ShouldRateLimit, health, reflection) here, with the --tls-* settings (default: off; needs --envoy-config)"},
		{name: "grpc-server", group: groupRules, arg: "fast|grpc-go", def: "fast", value: choiceValue{&c.grpcServer, []string{"fast", "grpc-go"}},
			usage: "the HTTP/2 server behind --grpc-addr: fast (rlserver's own, cheaper per call) or grpc-go (google.golang.org/grpc's, the fallback)"},
		{name: "envoy-config", group: groupRules, arg: "PATH", value: stringValue{&c.envoyConfig},
			usage: "envoyproxy/ratelimit YAML configuration for --grpc-addr: a file or a directory of files, re-read on SIGHUP and when they change"},

		{name: "data-dir", group: groupPersist, arg: "DIR", def: "./data", value: stringValue{&c.dataDir},
			usage: "directory for the snapshot, locked while the server runs (empty: no persistence)"},
		{name: "snapshot-interval", group: groupPersist, arg: "DURATION", def: "60s", value: durationValue{&c.snapshotInterval},
			usage: "how often to snapshot (0: only on SAVE, BGSAVE and shutdown)"},
		{name: "maxkeys", group: groupPersist, arg: "N", def: "0", value: intValue{&c.maxKeys},
			usage: "most keys to hold (0: unbounded)"},
		{name: "maxkeys-policy", group: groupPersist, arg: "evict|reject", def: "evict", value: choiceValue{&c.maxKeysPolicy, []string{"evict", "reject"}},
			usage: "when --maxkeys is reached: evict the key whose natural eviction is soonest, or reject new keys"},
		{name: "max-key-size", group: groupPersist, arg: "BYTES", def: "64kb", value: sizeValue{&c.maxKeySize},
			usage: "largest key a write may create; larger is refused"},
		{name: "max-value-size", group: groupPersist, arg: "BYTES", def: "32mb", value: sizeValue{&c.maxValueSize},
			usage: "largest value a key may hold; larger is refused (with --data-dir, key and value must fit a snapshot record: at most 64mb together)"},
		{name: "max-elements", group: groupPersist, arg: "N", def: "1000000", value: intValue{&c.maxElements},
			usage: "most fields, elements or members one hash, list or sorted set may hold; a write past it is refused"},
		{name: "gc-min-heap", group: groupPersist, arg: "BYTES", def: "64mb", value: sizeValue{&c.gcMinHeap},
			usage: "the heap below which the garbage collector does not run, unless GOGC is set (docs/performance.md#tuning)"},

		{name: "requirepass", group: groupSecurity, arg: "PASSWORD", value: stringValue{&c.password}, secret: true,
			usage: "password clients must AUTH with (a flag shows in ps: prefer RLSERVER_REQUIREPASS or --requirepass-file)"},
		{name: "requirepass-file", group: groupSecurity, arg: "PATH", value: stringValue{&c.passwordFile},
			usage: "file holding the password (surrounding whitespace is ignored)"},
		{name: "protected-mode", group: groupSecurity, def: "true", value: boolValue{&c.protected},
			usage: "refuse to serve RESP, metrics or pprof beyond loopback without a password, or gRPC without client certificates (--tls-ca)"},
		{name: "tls-cert", group: groupSecurity, arg: "PATH", value: stringValue{&c.tlsCert},
			usage: "TLS certificate (PEM); with --tls-key, serve RESP (and --grpc-addr) over TLS only"},
		{name: "tls-key", group: groupSecurity, arg: "PATH", value: stringValue{&c.tlsKey},
			usage: "TLS private key (PEM)"},
		{name: "tls-ca", group: groupSecurity, arg: "PATH", value: stringValue{&c.tlsCA},
			usage: "CA certificate (PEM): clients must present a certificate it signed"},

		{name: "proto-max-bulk-len", group: groupLimits, arg: "BYTES", def: "512mb", value: sizeValue{&c.maxBulkLen},
			usage: "largest argument a command may carry; larger is refused as soon as its header arrives"},
		{name: "max-args", group: groupLimits, arg: "N", def: "65536", value: countValue{&c.maxArgs},
			usage: "most arguments one command (or one MULTI's queue) may have; each costs up to ~600 bytes of bookkeeping beyond its bytes"},
		{name: "client-query-buffer-limit", group: groupLimits, arg: "BYTES", def: "1gb", value: sizeValue{&c.queryBufferLimit},
			usage: "most bytes of unfinished commands buffered for one client (and of one MULTI's queue)"},
		{name: "client-output-buffer-limit", group: groupLimits, arg: "BYTES", def: "64mb", value: sizeValue{&c.outputLimit},
			usage: "most reply bytes a client may have unwritten; the reply that would cross it is not built and the client is disconnected"},
		{name: "client-output-timeout", group: groupLimits, arg: "DURATION", def: "30s", value: durationValue{&c.outputTimeout},
			usage: "disconnect a client that does not read its replies for this long"},
		{name: "handshake-timeout", group: groupLimits, arg: "DURATION", def: "10s", value: durationValue{&c.handshakeTimeout},
			usage: "close a connection that has not finished its TLS handshake and, with a password, AUTH this long after connecting (0: never)"},
		{name: "max-auth-failures", group: groupLimits, arg: "N", def: "10", value: intValue{&c.maxAuthFailures},
			usage: "close a connection after this many failed AUTH attempts in a row (0: never)"},

		{name: "config", group: groupOperations, arg: "PATH", value: stringValue{&c.configPath}, from: fromFlag | fromEnv,
			usage: "YAML file of settings, named as the flags (data-dir: /data); flags and RLSERVER_* variables override it"},
		{name: "metrics-addr", group: groupOperations, arg: "HOST:PORT", value: addrValue{p: &c.metricsAddr, optional: true},
			usage: "serve Prometheus /metrics and /healthz here (default: off)"},
		{name: "pprof-addr", group: groupOperations, arg: "HOST:PORT", value: addrValue{p: &c.pprofAddr, optional: true},
			usage: "serve Go's /debug/pprof here, for profiling (default: off; keep it on loopback)"},
		{name: "log-format", group: groupOperations, arg: "text|json", def: "text", value: choiceValue{&c.logFormat, []string{"text", "json"}},
			usage: "log format"},
		{name: "log-level", group: groupOperations, arg: "LEVEL", def: "info", value: choiceValue{&c.logLevel, logLevels},
			usage: "least severe level logged: debug, info, warn or error"},
		{name: "ping", group: groupOperations, arg: "HOST:PORT", value: addrValue{p: &c.ping, optional: true}, from: fromFlag,
			usage: "health check: PING the server there with the password and TLS settings this server would use, exit 0 on PONG"},
		{name: "version", group: groupOperations, def: "false", value: boolValue{&c.version}, from: fromFlag,
			usage: "print the version and exit"},
	}, clusterSettings(c)...)
}

// defaultEventLoops picks the connection model measured faster: an event
// loop per core (Linux). A loop saves each request a park and wake-up and a
// read that finds nothing, and runs its round's shard operations itself, so
// a decision crosses no goroutine; with loops on every core that beat a
// goroutine per connection in CPU, req/s and p99, pipelined or not
// (docs/performance.md).
func defaultEventLoops() int {
	if runtime.GOOS == "linux" {
		return runtime.GOMAXPROCS(0)
	}
	return 0
}

// limits returns the per-client limits the settings set.
func (c *config) limits() resp.Limits {
	return resp.Limits{MaxBulkLen: c.maxBulkLen, MaxArgs: c.maxArgs, QueryBufferLimit: c.queryBufferLimit,
		OutputLimit: c.outputLimit, OutputTimeout: c.outputTimeout, HandshakeTimeout: c.handshakeTimeout,
		MaxAuthFailures: c.maxAuthFailures}
}
