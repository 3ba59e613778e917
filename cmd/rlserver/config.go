package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/internal/resp"
	"github.com/rlserver/rlserver/internal/shards"
)

// config is every setting rlserver takes. Flags are parsed here and nowhere
// else.
type config struct {
	// Serving
	addr          string
	shards        int
	eventLoops    int // 0: a goroutine per connection
	maxClients    int
	idleTimeout   time.Duration // 0: never
	shutdownGrace time.Duration
	ping          string // --ping ADDR: health-check mode
	// Rules
	rulesPath string
	// Persistence and memory
	dataDir          string        // "" disables persistence
	snapshotInterval time.Duration // 0: only on SAVE, BGSAVE and shutdown
	maxKeys          int           // 0: unbounded
	maxKeysPolicy    string        // "evict" or "reject"
	// Security
	password     string
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
	outputTimeout    time.Duration
	handshakeTimeout time.Duration // 0: never
	maxAuthFailures  int           // 0: never close
	// Operations
	metricsAddr string
	pprofAddr   string
	logFormat   string
	logLevel    string
	version     bool
}

// flagGroups orders --help: each flag belongs to one group.
var flagGroups = []struct {
	title string
	flags []string
}{
	{"Serving", []string{"addr", "shards", "event-loops", "maxclients", "timeout", "shutdown-timeout"}},
	{"Rules", []string{"rules"}},
	{"Persistence and memory", []string{"data-dir", "snapshot-interval", "maxkeys", "maxkeys-policy"}},
	{"Security", []string{"requirepass", "requirepass-file", "protected-mode", "tls-cert", "tls-key", "tls-ca"}},
	{"Limits against abuse", []string{"proto-max-bulk-len", "max-args", "client-query-buffer-limit", "client-output-buffer-limit", "client-output-timeout",
		"handshake-timeout", "max-auth-failures"}},
	{"Operations", []string{"metrics-addr", "pprof-addr", "log-format", "log-level", "ping", "version"}},
}

// defaultEventLoops picks the connection model measured faster: on one core
// an event loop saves each request a park and wake-up and a read that finds
// nothing; on more, goroutines spread the system calls over the cores,
// which beat one loop for unpipelined clients (docs/performance.md).
func defaultEventLoops() int {
	if runtime.GOMAXPROCS(0) == 1 && runtime.GOOS == "linux" {
		return 1
	}
	return 0
}

func parseConfig(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("rlserver", flag.ContinueOnError)
	fs.SetOutput(stderr)

	fs.StringVar(&c.addr, "addr", "127.0.0.1:6380", "TCP address to serve RESP on")
	fs.IntVar(&c.shards, "shards", shards.DefaultShards(), "number of shards, a power of two (default: GOMAXPROCS rounded up to a power of two)")
	fs.IntVar(&c.eventLoops, "event-loops", defaultEventLoops(), "event loops serving plain-TCP connections (Linux); 0: a goroutine per connection, as always with TLS (default: 1 when GOMAXPROCS is 1, else 0)")
	fs.IntVar(&c.maxClients, "maxclients", 10000, "most connections at once; more are refused with ERR max number of clients reached")
	fs.Var((*secondsOrDuration)(&c.idleTimeout), "timeout", "close connections idle this long: seconds as Redis takes them (300), or a duration (5m); 0: never")
	fs.DurationVar(&c.shutdownGrace, "shutdown-timeout", 10*time.Second, "on SIGTERM, how long in-flight commands may take before connections are cut")

	fs.StringVar(&c.rulesPath, "rules", "", "YAML rules file, re-read on SIGHUP and RL.RULE RELOAD (default: the built-in rules listed in README.md)")

	fs.StringVar(&c.dataDir, "data-dir", "./data", "directory for the snapshot file (empty: no persistence)")
	fs.DurationVar(&c.snapshotInterval, "snapshot-interval", 60*time.Second, "how often to snapshot (0: only on SAVE, BGSAVE and shutdown)")
	fs.IntVar(&c.maxKeys, "maxkeys", 0, "most keys to hold (0: unbounded)")
	fs.StringVar(&c.maxKeysPolicy, "maxkeys-policy", "evict", "when --maxkeys is reached: evict (drop the key whose natural eviction is soonest) or reject (refuse new keys)")

	fs.StringVar(&c.password, "requirepass", "", "password clients must AUTH with (prefer --requirepass-file: a flag shows in ps)")
	fs.StringVar(&c.passwordFile, "requirepass-file", "", "file holding the password (one line; surrounding whitespace is ignored)")
	fs.BoolVar(&c.protected, "protected-mode", true, "refuse to start on a non-loopback address without a password")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "TLS certificate (PEM); with --tls-key, serve RESP over TLS only")
	fs.StringVar(&c.tlsKey, "tls-key", "", "TLS private key (PEM)")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "CA certificate (PEM): when set, clients must present a certificate it signed")

	def := resp.DefaultLimits
	fs.Int64Var(&c.maxBulkLen, "proto-max-bulk-len", def.MaxBulkLen, "largest argument a command may carry, in bytes; larger is refused as soon as its header arrives")
	fs.Int64Var(&c.maxArgs, "max-args", def.MaxArgs, "most arguments one command (or one MULTI's queue) may have; each costs up to ~600 bytes of bookkeeping beyond its bytes")
	fs.Int64Var(&c.queryBufferLimit, "client-query-buffer-limit", def.QueryBufferLimit, "most bytes of unfinished commands buffered for one client (and of one MULTI's queue)")
	fs.Int64Var(&c.outputLimit, "client-output-buffer-limit", def.OutputLimit, "most reply bytes a client may have unwritten; the reply that would cross it is not built and the client is disconnected")
	fs.DurationVar(&c.outputTimeout, "client-output-timeout", def.OutputTimeout, "disconnect a client that does not read its replies for this long")
	c.handshakeTimeout = def.HandshakeTimeout
	fs.Var((*secondsOrDuration)(&c.handshakeTimeout), "handshake-timeout", "close a connection that has not finished its TLS handshake and, with a password, AUTH this long after connecting: seconds (10) or a duration (10s); 0: never")
	fs.IntVar(&c.maxAuthFailures, "max-auth-failures", def.MaxAuthFailures, "close a connection after this many failed AUTH attempts (0: never)")

	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "HOST:PORT to serve /metrics (Prometheus) and /healthz on (empty: off)")
	fs.StringVar(&c.pprofAddr, "pprof-addr", "", "HOST:PORT to serve Go's /debug/pprof on, for profiling (empty: off; never expose it)")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&c.ping, "ping", "", "health check: PING the server at ADDR (with --requirepass[-file] and TLS flags if needed), exit 0 on PONG")
	fs.BoolVar(&c.version, "version", false, "print the version and exit")

	fs.Usage = func() { usage(fs, stderr) }
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	return c, c.validate()
}

// validate checks the settings that flag parsing cannot, and reads the
// password file.
func (c *config) validate() error {
	switch {
	case c.shards < 1 || c.shards > 1<<16 || c.shards&(c.shards-1) != 0:
		return fmt.Errorf("--shards %d: must be a power of two from 1 to 65536", c.shards)
	case c.snapshotInterval < 0:
		return fmt.Errorf("--snapshot-interval %v: must not be negative", c.snapshotInterval)
	case c.maxKeys < 0:
		return fmt.Errorf("--maxkeys %d: must not be negative", c.maxKeys)
	case c.maxKeysPolicy != "evict" && c.maxKeysPolicy != "reject":
		return fmt.Errorf("--maxkeys-policy %q: must be evict or reject", c.maxKeysPolicy)
	case c.eventLoops < 0 || c.eventLoops > 1024:
		return fmt.Errorf("--event-loops %d: must be from 0 to 1024", c.eventLoops)
	case c.maxClients < 1:
		return fmt.Errorf("--maxclients %d: must be at least 1", c.maxClients)
	case c.idleTimeout < 0 || c.shutdownGrace < 0 || c.outputTimeout < 0 || c.handshakeTimeout < 0:
		return errors.New("--timeout, --shutdown-timeout, --client-output-timeout and --handshake-timeout must not be negative")
	case c.maxAuthFailures < 0:
		return fmt.Errorf("--max-auth-failures %d: must not be negative", c.maxAuthFailures)
	case c.maxBulkLen < 1 || c.maxArgs < 1 || c.queryBufferLimit < 1 || c.outputLimit < 1:
		return errors.New("--proto-max-bulk-len, --max-args, --client-query-buffer-limit and --client-output-buffer-limit must be positive")
	case c.logFormat != "text" && c.logFormat != "json":
		return fmt.Errorf("--log-format %q: must be text or json", c.logFormat)
	case (c.tlsCert == "") != (c.tlsKey == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case c.tlsCA != "" && c.tlsCert == "":
		return errors.New("--tls-ca needs --tls-cert and --tls-key")
	}
	if c.passwordFile != "" {
		if c.password != "" {
			return errors.New("give --requirepass or --requirepass-file, not both")
		}
		b, err := os.ReadFile(c.passwordFile)
		if err != nil {
			return fmt.Errorf("--requirepass-file: %w", err)
		}
		c.password = strings.TrimSpace(string(b))
		if c.password == "" {
			return fmt.Errorf("--requirepass-file %s: the file is empty", c.passwordFile)
		}
	}
	if c.ping == "" && c.protected && c.password == "" && !isLoopback(c.addr) {
		return fmt.Errorf("--addr %s is not a loopback address and no password is set: anyone who can reach it could use the server. "+
			"Set a password with --requirepass-file (or --requirepass), or, if the network is trusted, start with --protected-mode=false", c.addr)
	}
	return nil
}

// isLoopback reports whether addr only accepts connections from this host.
// An empty host (":6380") listens on every interface, so it is not.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// usage prints the flags by group.
func usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "rlserver %s: a rate-limiter server that speaks the Redis protocol.\n\nUsage: rlserver [flags]\n", version)
	for _, g := range flagGroups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, name := range g.flags {
			f := fs.Lookup(name)
			def := ""
			if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" && f.DefValue != "false" {
				def = " (default " + f.DefValue + ")"
			}
			fmt.Fprintf(w, "  --%-28s %s%s\n", name, f.Usage, def)
		}
	}
}

// secondsOrDuration is a flag value taking a whole number of seconds, as
// Redis's "timeout" does, or a Go duration such as 90s or 5m.
type secondsOrDuration time.Duration

// String implements flag.Value.
func (d *secondsOrDuration) String() string { return time.Duration(*d).String() }

// Set implements flag.Value.
func (d *secondsOrDuration) Set(s string) error {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || n > int64(math.MaxInt64/time.Second) {
			return fmt.Errorf("%d seconds is out of range", n)
		}
		*d = secondsOrDuration(time.Duration(n) * time.Second)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want seconds (300) or a duration (5m): %v", err)
	}
	*d = secondsOrDuration(v)
	return nil
}

// limits returns the per-client limits the flags set.
func (c *config) limits() resp.Limits {
	return resp.Limits{MaxBulkLen: c.maxBulkLen, MaxArgs: c.maxArgs, QueryBufferLimit: c.queryBufferLimit,
		OutputLimit: c.outputLimit, OutputTimeout: c.outputTimeout, HandshakeTimeout: c.handshakeTimeout,
		MaxAuthFailures: c.maxAuthFailures}
}
