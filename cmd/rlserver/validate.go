package main

import (
	"fmt"
	"net"
	"os"
	"strings"
)

// validate checks what parsing one setting cannot: ranges, settings that go
// together, the password file, and protected mode. Errors name each setting
// as it was given (flag, variable or file line).
func (c *config) validate() error {
	bad := func(name, reason string) error { return fmt.Errorf("%s: %s", c.set.lookup(name).where(), reason) }
	switch {
	case c.shards < 1 || c.shards > 1<<16 || c.shards&(c.shards-1) != 0:
		return bad("shards", "must be a power of two from 1 to 65536")
	case c.maxKeys < 0:
		return bad("maxkeys", "must not be negative")
	case c.maxKeySize < 1 || c.maxKeySize > 1<<30:
		return bad("max-key-size", "must be from 1 byte to 1gb")
	case c.maxValueSize < 1 || c.maxValueSize > 1<<30:
		return bad("max-value-size", "must be from 1 byte to 1gb")
	case c.maxElements < 1:
		return bad("max-elements", "must be at least 1")
	case c.eventLoops < 0 || c.eventLoops > 1024:
		return bad("event-loops", "must be from 0 to 1024")
	case c.luaTimeLimitMs < 0:
		return bad("lua-time-limit", "must not be negative (0: never busy)")
	case c.maxClients < 1:
		return bad("maxclients", "must be at least 1")
	case c.maxAuthFailures < 0:
		return bad("max-auth-failures", "must not be negative")
	case (c.tlsCert == "") != (c.tlsKey == ""):
		return fmt.Errorf("--tls-cert and --tls-key go together (%s, %s)", c.set.lookup("tls-cert").where(), c.set.lookup("tls-key").where())
	case c.tlsCA != "" && c.tlsCert == "":
		return bad("tls-ca", "needs --tls-cert and --tls-key")
	case c.rulesAuthoritative && c.rulesPath == "":
		return bad("rules-authoritative", "needs --rules (the file whose rules are all the rules)")
	case c.grpcAddr != "" && c.envoyConfig == "":
		return bad("grpc-addr", "needs --envoy-config (the domains and descriptors the rate limit service answers for)")
	case c.envoyConfig != "" && c.grpcAddr == "":
		return bad("envoy-config", "needs --grpc-addr (the address to serve the rate limit service on)")
	}
	if err := c.validateCluster(); err != nil {
		return err
	}
	if err := c.readPassword(); err != nil {
		return err
	}
	if c.ping != "" {
		return nil // a health check serves nothing: protected mode does not apply
	}
	return c.checkProtected()
}

// readPassword resolves --requirepass-file into c.password.
func (c *config) readPassword() error {
	if c.passwordFile == "" {
		return nil
	}
	if c.password != "" {
		return fmt.Errorf("give a password or a password file, not both: %s and %s",
			c.set.lookup("requirepass").where(), c.set.lookup("requirepass-file").where())
	}
	b, err := os.ReadFile(c.passwordFile)
	if err != nil {
		return fmt.Errorf("%s: %w", c.set.lookup("requirepass-file").where(), err)
	}
	c.password = strings.TrimSpace(string(b))
	if c.password == "" {
		return fmt.Errorf("%s: the file is empty", c.set.lookup("requirepass-file").where())
	}
	return nil
}

// checkProtected is protected mode: without a password, nothing is served
// beyond loopback unless --protected-mode=false says the network is
// trusted. It covers every listener: RESP, metrics and pprof.
func (c *config) checkProtected() error {
	if !c.protected {
		return nil
	}
	// A password does not protect gRPC (Envoy sends none): client
	// certificates do.
	if c.grpcAddr != "" && !isLoopback(c.grpcAddr) && c.tlsCA == "" {
		return fmt.Errorf("%s is not a loopback address and gRPC clients are not authenticated: anyone who can reach it could spend the Envoy configuration's limits. "+
			"Require client certificates with --tls-ca (and --tls-cert, --tls-key), or, if the network is trusted, start with --protected-mode=false",
			c.set.lookup("grpc-addr").where())
	}
	if c.password != "" {
		return nil
	}
	exposes := map[string]string{
		"addr":         "use the server",
		"metrics-addr": "read the metrics",
		"pprof-addr":   "profile the server and read its memory profiles",
	}
	for _, name := range []string{"addr", "metrics-addr", "pprof-addr"} {
		s := c.set.lookup(name)
		if s.raw == "" || isLoopback(s.raw) {
			continue
		}
		return fmt.Errorf("%s is not a loopback address and no password is set: anyone who can reach it could %s. "+
			"Set a password with --requirepass-file or RLSERVER_REQUIREPASS, or, if the network is trusted, start with --protected-mode=false",
			s.where(), exposes[name])
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
