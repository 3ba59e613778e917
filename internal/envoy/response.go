package envoy

import (
	"math"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rlserver/rlserver/internal/envoy/config"
)

// statusParts are the messages of one descriptor's status, allocated
// together (newResponse).
type statusParts struct {
	status     rlsv3.RateLimitResponse_DescriptorStatus
	limit      rlsv3.RateLimitResponse_RateLimit
	multiplier wrapperspb.UInt32Value
	reset      durationpb.Duration
}

// oneStatus is a response with one status (the common request: one
// descriptor) in a single allocation.
type oneStatus struct {
	resp     rlsv3.RateLimitResponse
	statuses [1]*rlsv3.RateLimitResponse_DescriptorStatus
	parts    [1]statusParts
}

// newResponse returns an OK response with n OK statuses, and the parts
// holding them (parts[i].status is Statuses[i]), in one allocation for one
// status and three for more, instead of up to five per status.
func newResponse(n int) (*rlsv3.RateLimitResponse, []statusParts) {
	var resp *rlsv3.RateLimitResponse
	var parts []statusParts
	if n == 1 {
		o := &oneStatus{}
		resp, parts = &o.resp, o.parts[:]
		resp.Statuses = o.statuses[:]
	} else {
		resp = &rlsv3.RateLimitResponse{Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, n)}
		parts = make([]statusParts, n)
	}
	resp.OverallCode = rlsv3.RateLimitResponse_OK
	for i := range parts {
		parts[i].status.Code = rlsv3.RateLimitResponse_OK
		resp.Statuses[i] = &parts[i].status
	}
	return resp, parts
}

// currentLimit is a status's current_limit: the limit as the API expresses
// it, the window as unit × unit_multiplier (the multiplier only when not
// 1; UNKNOWN for a window that is not whole seconds).
func (p *statusParts) currentLimit(l *config.Limit) *rlsv3.RateLimitResponse_RateLimit {
	rl := &p.limit
	rl.Name = l.Name
	rl.RequestsPerUnit = l.RequestsPerUnit
	rl.Unit = rlsv3.RateLimitResponse_RateLimit_Unit(l.Unit)
	if l.Multiplier > 1 {
		p.multiplier.Value = l.Multiplier
		rl.UnitMultiplier = &p.multiplier
	}
	return rl
}

// windowLeft is the time from now to the end of the current window of the
// given length, windows being aligned to the Unix epoch (as rlserver's
// fixed windows and envoyproxy/ratelimit's are).
func windowLeft(now time.Time, window time.Duration) time.Duration {
	return window - time.Duration(now.UnixNano()%int64(window))
}

// wholeSeconds rounds d up to whole seconds, 0 for d ≤ 0.
func wholeSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

func clampUint32(n int64) uint32 {
	switch {
	case n < 0:
		return 0
	case n > math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(n)
}
