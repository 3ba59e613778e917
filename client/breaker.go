package client

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// BreakerSettings configure WithBreaker. Zero fields take the defaults.
type BreakerSettings struct {
	// Failures is how many consecutive calls without an answer open the
	// breaker (default 5).
	Failures uint32
	// Backoff is how long the breaker stays open before it lets one probe
	// through (default 100ms).
	Backoff time.Duration
	// MaxBackoff caps the open period, which doubles after every failed
	// probe and returns to Backoff once a probe succeeds (default 10s).
	MaxBackoff time.Duration
	// OnStateChange, if set, is called on every change of state with the
	// states' names ("closed", "open", "half-open"), for logs and metrics.
	// It must not call the Client.
	OnStateChange func(from, to string)
}

// breaker is gobreaker's circuit breaker with a growing open period.
// gobreaker counts consecutive failures, opens, and after a fixed Timeout
// lets a probe through (half-open); it has no backoff, so the breaker also
// keeps its own earliest instant for the next probe, pushed further out
// each time a probe fails, and refuses calls before it.
type breaker struct {
	cb      *gobreaker.CircuitBreaker[any]
	base    time.Duration
	max     time.Duration
	onState func(from, to string)
	// failedProbes counts probes that failed since the breaker last closed.
	failedProbes atomic.Int32
	// probeAt is the Unix nanosecond before which no call goes through
	// (0 when closed).
	probeAt atomic.Int64
}

func newBreaker(s BreakerSettings) *breaker {
	if s.Failures == 0 {
		s.Failures = 5
	}
	if s.Backoff <= 0 {
		s.Backoff = 100 * time.Millisecond
	}
	if s.MaxBackoff < s.Backoff {
		s.MaxBackoff = max(10*time.Second, s.Backoff)
	}
	b := &breaker{base: s.Backoff, max: s.MaxBackoff, onState: s.OnStateChange}
	b.cb = gobreaker.NewCircuitBreaker[any](gobreaker.Settings{
		Name:        "rlserver",
		MaxRequests: 1, // one probe at a time when half-open
		Timeout:     s.Backoff,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= s.Failures },
		IsSuccessful: func(err error) bool {
			return !countsAgainstServer(err)
		},
		IsExcluded: func(err error) bool { return errors.Is(err, context.Canceled) },
		// Called under gobreaker's lock: only atomics here.
		OnStateChange: b.changed,
	})
	return b
}

// changed keeps the probe schedule in step with gobreaker's state.
func (b *breaker) changed(_ string, from, to gobreaker.State) {
	now := time.Now().UnixNano()
	switch {
	case to == gobreaker.StateClosed:
		b.failedProbes.Store(0)
		b.probeAt.Store(0)
	case to == gobreaker.StateOpen && from == gobreaker.StateHalfOpen:
		n := b.failedProbes.Add(1)
		wait := b.base
		for i := int32(0); i < n && wait < b.max; i++ {
			wait *= 2
		}
		b.probeAt.Store(now + int64(min(wait, b.max)))
	case to == gobreaker.StateOpen:
		b.probeAt.Store(now + int64(b.base))
	}
	if b.onState != nil {
		b.onState(from.String(), to.String())
	}
}

// run calls f unless the breaker refuses, and records the outcome.
func (b *breaker) run(f func() (any, error)) (any, error) {
	if at := b.probeAt.Load(); at != 0 && time.Now().UnixNano() < at {
		return nil, gobreaker.ErrOpenState
	}
	return b.cb.Execute(f)
}

func (b *breaker) state() string {
	if at := b.probeAt.Load(); at != 0 && time.Now().UnixNano() < at {
		return gobreaker.StateOpen.String()
	}
	return b.cb.State().String()
}
