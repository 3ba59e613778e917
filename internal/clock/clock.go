// Package clock is where the instants rlserver decides at come from: every
// decision, expiry and snapshot timestamp reads this clock (tests inject
// their own in its place). Elapsed times that are measurements rather than
// instants — deadlines, durations for logs and metrics — read Go's monotonic
// clock directly.
package clock

import "time"

// Clock reports instants as nanoseconds since the Unix epoch: the wall clock
// read once at New, plus the monotonic time elapsed since. It therefore never
// runs backwards while the process lives, even if the system clock is
// stepped; a step shows up only after a restart. Safe for concurrent use.
type Clock struct {
	start time.Time // carries a monotonic reading
	base  int64     // start's wall time, ns since the epoch
}

// New returns a Clock anchored at the current wall time.
func New() *Clock {
	now := time.Now()
	return &Clock{start: now, base: now.UnixNano()}
}

// Now returns the current instant in nanoseconds since the Unix epoch.
func (c *Clock) Now() int64 { return c.base + int64(time.Since(c.start)) }

// Started returns the wall time the clock was anchored at.
func (c *Clock) Started() time.Time { return c.start }
