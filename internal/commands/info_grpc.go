package commands

import (
	"strings"

	"github.com/rlserver/rlserver/internal/service"
)

// InfoField is one field:value line of an INFO section a front end outside
// this package reports (the gRPC Envoy service's counters).
type InfoField struct {
	Name  string
	Value any // string, int, int64 or uint64
}

// infoGRPC writes the grpc section: whether the Envoy rate limit service is
// served (--grpc-addr), and its counters from Config.GRPCInfo.
func (c *session) infoGRPC(_ *service.Stats, b *strings.Builder) {
	if c.h.cfg.GRPCInfo == nil {
		field(b, "rl_grpc_enabled", 0)
		return
	}
	field(b, "rl_grpc_enabled", 1)
	for _, f := range c.h.cfg.GRPCInfo() {
		field(b, f.Name, f.Value)
	}
}
