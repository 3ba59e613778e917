package main

import (
	"context"
	"fmt"
	"net"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rlserver/rlserver/internal/cluster"
	"github.com/rlserver/rlserver/internal/cluster/owner"
	"github.com/rlserver/rlserver/internal/commands"
	"github.com/rlserver/rlserver/internal/envoy"
	envoyconfig "github.com/rlserver/rlserver/internal/envoy/config"
)

// reservedRulePrefixes are the rule name prefixes front ends manage: the
// Envoy configuration's rules when it is served. The operator's rules file
// and RL.RULE SET/DEL may not use them, and an authoritative rules file
// leaves them alone.
func (c *config) reservedRulePrefixes() []string {
	if c.envoyConfig == "" {
		return nil
	}
	return []string{envoyconfig.RulePrefix}
}

// envoyFront is the Envoy rate limit service: its use case over the
// service's managed rules, the loader of its configuration, and the gRPC
// server, whose listener is open from listenGRPC and served from
// serveGRPC.
type envoyFront struct {
	svc *envoy.Service
	// owner, in cluster mode on, sends each decision to its key's owner;
	// its cluster fields are set when the gRPC port starts serving, once
	// the node's cluster state exists.
	owner  *owner.Limiter
	loader *envoy.Loader
	ln     net.Listener
	srv    *envoy.Server // nil until served
}

// listenGRPC builds the Envoy front end, loads its configuration (a bad one
// fails the start, as a bad rules file does) and opens --grpc-addr; it
// serves once RESP is up too.
func (n *node) listenGRPC() error {
	if n.cfg.grpcAddr == "" {
		return nil
	}
	lim, err := n.svc.Managed(envoyconfig.RulePrefix)
	if err != nil {
		return err
	}
	var reg prometheus.Registerer
	for _, e := range n.http {
		if e.metrics != nil {
			reg = e.metrics.Registry
		}
	}
	opts := envoy.Options{Limiter: lim, Registerer: reg, Logger: n.log, MaxKeyBytes: int(n.cfg.maxKeySize)}
	var routed *owner.Limiter
	if n.cfg.clusterMode == "on" {
		// Limit overrides are rules made on demand: the owner of a key
		// makes one from its name when a peer asks it to decide under it
		// (serveGRPC gives the RESP handler the source).
		routed = &owner.Limiter{Local: lim}
		opts.Limiter, opts.Check = routed, oneSlotGroups
	}
	svc, err := envoy.NewService(opts)
	if err != nil {
		return err
	}
	f := &envoyFront{svc: svc, owner: routed, loader: envoy.NewLoader(n.cfg.envoyConfig, svc, envoy.LoaderOptions{Logger: n.log})}
	if err := f.loader.Reload(); err != nil {
		return fmt.Errorf("--envoy-config %s: %w", n.cfg.envoyConfig, err)
	}
	if f.ln, err = net.Listen("tcp", n.cfg.grpcAddr); err != nil {
		return fmt.Errorf("--grpc-addr %s: %w", n.cfg.grpcAddr, err)
	}
	n.envoy = f
	n.undo = append(n.undo, f.stop)
	return nil
}

// serveGRPC serves the open gRPC listener and starts watching the
// configuration's files.
func (n *node) serveGRPC() error {
	f := n.envoy
	if f == nil {
		return nil
	}
	tlsConfig, err := serverTLS(n.cfg)
	if err != nil {
		return err
	}
	if f.owner != nil {
		f.owner.State, f.owner.Peers, f.owner.TLS = n.cluster.State, n.cluster.Peers, n.cluster.TLS
		n.handler.SetRuleOnDemand(f.svc.OverrideRule)
	}
	f.srv = envoy.Start(f.ln, f.svc, envoy.ServerOptions{TLS: tlsConfig, Logger: n.log, Transport: envoy.Transport(n.cfg.grpcServer)})
	if err := f.loader.Watch(); err != nil {
		// Reloads still come on SIGHUP.
		n.log.Warn("the Envoy configuration's files are not watched; reload with SIGHUP", "err", err)
	}
	return nil
}

// oneSlotGroups refuses, in cluster mode, an all_or_nothing domain whose
// counters would spread over slots: a group decided as one must be
// decided on one node, so the domain's name must carry a hash tag
// ({…}), which puts every counter key of the domain (they start with
// the name) in the tag's slot.
func oneSlotGroups(cfg *envoyconfig.Config) error {
	for _, d := range cfg.Domains {
		if d.AllOrNothing && !cluster.HashTagged(d.Name) {
			return fmt.Errorf("%s: domain '%s': all_or_nothing in cluster mode needs every counter of the domain in one slot: put a hash tag in the domain's name (e.g. '{%s}')", d.File, d.Name, d.Name)
		}
	}
	return nil
}

// shutdown stops watching, reports NOT_SERVING to health checks and waits
// for the calls in flight until ctx ends (then cuts them).
func (f *envoyFront) shutdown(ctx context.Context) error {
	f.loader.Stop()
	if f.srv == nil {
		return nil
	}
	return f.srv.Shutdown(ctx)
}

// stop ends everything at once (safe after shutdown), and closes the
// listener if it never served.
func (f *envoyFront) stop() {
	f.loader.Stop()
	if f.srv == nil {
		f.ln.Close()
		return
	}
	f.srv.Stop()
}

// reloadEnvoy re-reads the Envoy configuration; the loader logs the
// outcome, and a bad one keeps the configuration in force.
func (n *node) reloadEnvoy() error {
	if n.envoy == nil {
		return nil
	}
	return n.envoy.loader.Reload()
}

// info is the grpc section of INFO and RL.INFO.
func (f *envoyFront) info() []commands.InfoField {
	st := f.svc.Stats()
	last := "ok"
	if f.loader.LastError() != nil {
		last = "err"
	}
	return []commands.InfoField{
		{Name: "rl_grpc_addr", Value: f.ln.Addr().String()},
		{Name: "rl_grpc_requests_total", Value: st.Requests},
		{Name: "rl_grpc_invalid_total", Value: st.Invalid},
		{Name: "rl_grpc_failed_total", Value: st.Failed},
		{Name: "rl_grpc_over_limit_total", Value: st.OverLimit},
		{Name: "rl_grpc_unknown_domain_total", Value: st.UnknownDomain},
		{Name: "rl_grpc_shadow_denied_total", Value: st.ShadowDenied},
		{Name: "rl_envoy_config_path", Value: f.loader.Path()},
		{Name: "rl_envoy_config_last_load", Value: last},
		{Name: "rl_envoy_config_loads_total", Value: st.ConfigLoads},
		{Name: "rl_envoy_config_load_errors_total", Value: st.ConfigLoadErrors},
		{Name: "rl_envoy_config_loaded_unix", Value: st.ConfigLoadedAt.Unix()},
		{Name: "rl_envoy_domains", Value: st.Domains},
		{Name: "rl_envoy_rules", Value: st.Rules},
		{Name: "rl_envoy_overrides", Value: st.Overrides},
	}
}
