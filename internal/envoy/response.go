package envoy

import (
	"math"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rlserver/rlserver/internal/envoy/config"
)

// currentLimit is a status's current_limit: the limit as the API expresses
// it, the window as unit × unit_multiplier (the multiplier only when not
// 1; UNKNOWN for a window that is not whole seconds).
func currentLimit(l *config.Limit) *rlsv3.RateLimitResponse_RateLimit {
	rl := &rlsv3.RateLimitResponse_RateLimit{
		Name:            l.Name,
		RequestsPerUnit: l.RequestsPerUnit,
		Unit:            rlsv3.RateLimitResponse_RateLimit_Unit(l.Unit),
	}
	if l.Multiplier > 1 {
		rl.UnitMultiplier = wrapperspb.UInt32(l.Multiplier)
	}
	return rl
}

// windowLeft is the time from now to the end of the current window of the
// given length, windows being aligned to the Unix epoch (as rlserver's
// fixed windows and envoyproxy/ratelimit's are).
func windowLeft(now time.Time, window time.Duration) time.Duration {
	return window - time.Duration(now.UnixNano()%int64(window))
}

// ceilSeconds rounds d up to whole seconds: Envoy reads only the seconds of
// duration_until_reset (x-ratelimit-reset), and a client told to wait must
// never be early.
func ceilSeconds(d time.Duration) *durationpb.Duration {
	return &durationpb.Duration{Seconds: wholeSeconds(d)}
}

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
