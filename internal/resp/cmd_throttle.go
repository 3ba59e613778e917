package resp

import (
	"fmt"
	"math"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/keyspace"
)

// CL.THROTTLE answers as the redis-cell module (v0.5.0) does, errors
// included; docs/compatibility.md lists where rlserver refuses what
// redis-cell accepts.

// parseCellInt parses a CL.THROTTLE number as redis-cell does (Rust's
// integer parser): an optional sign, + or -, then decimal digits, leading
// zeros allowed, within int64. The error quotes at most 128 bytes of b.
func parseCellInt(b []byte) (int64, error) {
	digits, neg := b, false
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		digits, neg = b[1:], b[0] == '-'
	}
	if n, ok := parseDigits(digits, neg); ok {
		return n, nil
	}
	return 0, errCell(fmt.Sprintf("Couldn't parse as integer: %.128s", b))
}

// prepareThrottle parses CL.THROTTLE key max_burst count_per_period period
// [quantity], as redis-cell takes it: period in seconds, quantity 1 by
// default (0 only looks). A zero rate (count or period 0, or an emission
// interval period/count under 1 ns) is redis-cell's error. Negative
// numbers, and numbers whose products overflow nanoseconds, are out of
// range: redis-cell computes nonsense from them instead.
func prepareThrottle(c *client, args [][]byte) (keyspace.Op, error) {
	op := keyspace.Op{Kind: keyspace.Throttle}
	if len(args) != 5 && len(args) != 6 {
		return op, errCellUsage
	}
	op.Key = args[1]
	n := [4]int64{3: 1}
	for i, a := range args[2:] {
		v, err := parseCellInt(a)
		if err != nil {
			return op, err
		}
		n[i] = v
	}
	burst, count, period, quantity := n[0], n[1], n[2], n[3]
	switch {
	case count == 0 || period == 0:
		return op, errZeroRates
	case burst < 0 || count < 0 || period < 0 || quantity < 0, period > math.MaxInt64/nsPerSec:
		return op, errNotInteger
	}
	periodNs := period * nsPerSec
	ei := algorithms.GCRAInterval(periodNs, count)
	switch {
	case ei == 0:
		return op, errZeroRates
	case burst >= math.MaxInt64/ei || quantity > math.MaxInt64/ei:
		return op, errNotInteger
	}
	op.Args.Throttle = keyspace.ThrottleArgs{MaxBurst: burst, Count: count, Period: periodNs, Quantity: quantity}
	return op, nil
}

// writeThrottle answers as redis-cell does: [limited, limit, remaining,
// retry_after, reset_after], times in whole seconds as cellSeconds rounds
// them (−1 for retry_after when there is nothing to wait for).
func writeThrottle(c *client, op *keyspace.Op) {
	r := op.Reply.Throttle
	c.out.array(5)
	c.out.integer(r[0])
	c.out.integer(r[1])
	c.out.integer(r[2])
	if r[3] < 0 {
		c.out.integer(-1)
	} else {
		c.out.integer(cellSeconds(r[3]))
	}
	c.out.integer(cellSeconds(r[4]))
}

// cellSeconds converts a duration in nanoseconds to the whole seconds
// redis-cell reports: the seconds as a float64 (whole seconds plus the
// fraction, as Rust's time crate computes them), truncated, plus one when
// the fraction holds at least a whole millisecond. A remainder under 1 ms
// is dropped, so 1.0005 s is 1 and 0.9995 s is 0; near 2^53 ns the float
// sum can round up to the next second, as it does in redis-cell.
func cellSeconds(ns int64) int64 {
	sec, frac := ns/1e9, ns%1e9
	s := int64(float64(sec) + float64(frac)/1e9) // |s| ≤ 2^34: no overflow
	if frac >= 1e6 {
		s++
	}
	return s
}
