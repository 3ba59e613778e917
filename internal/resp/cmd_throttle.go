package resp

import (
	"errors"
	"fmt"
	"math"

	"github.com/rlserver/rlserver/internal/shards"
)

var errZeroRates = errors.New("Zero rates are not supported")

// parseCellInt parses a CL.THROTTLE argument with redis-cell's error.
func parseCellInt(b []byte) (int64, error) {
	n, ok := parseInt(b)
	if !ok {
		return 0, fmt.Errorf("Couldn't parse as integer: %s", b)
	}
	return n, nil
}

// prepareThrottle parses CL.THROTTLE key max_burst count_per_period period
// [quantity], as redis-cell takes it: period in seconds, quantity 1 by
// default (0 only looks). Negative numbers, and numbers whose products
// overflow nanoseconds, are out of range.
func prepareThrottle(c *client, args [][]byte) (shards.Op, error) {
	op := plainOp(shards.Throttle, args[1])
	var n [4]int64
	n[3] = 1
	for i, a := range args[2:] {
		v, err := parseCellInt(a)
		if err != nil {
			return op, err
		}
		n[i] = v
	}
	burst, count, period, quantity := n[0], n[1], n[2], n[3]
	if count == 0 || period == 0 {
		return op, errZeroRates
	}
	if burst < 0 || count < 0 || period < 0 || quantity < 0 {
		return op, errNotInteger
	}
	periodNs, ok := toNanos(period, 1e9)
	if !ok {
		return op, errNotInteger
	}
	ei := periodNs / count
	if ei == 0 || burst >= math.MaxInt64/ei || (quantity > 0 && quantity > math.MaxInt64/ei) {
		return op, errNotInteger
	}
	op.Args.Throttle = shards.ThrottleArgs{MaxBurst: burst, Count: count, Period: periodNs, Quantity: quantity}
	return op, nil
}

// writeThrottle answers as redis-cell does: [limited, limit, remaining,
// retry_after, reset_after], times in whole seconds rounded up (−1 for
// retry_after when there is nothing to wait for).
func writeThrottle(c *client, op *shards.Op) {
	r := op.Reply.Throttle
	c.out.array(5)
	c.out.integer(r[0])
	c.out.integer(r[1])
	c.out.integer(r[2])
	if r[3] < 0 {
		c.out.integer(-1)
	} else {
		c.out.integer(ceilSeconds(r[3]))
	}
	c.out.integer(ceilSeconds(r[4]))
}

// ceilSeconds converts nanoseconds to seconds, a remainder adding a second.
func ceilSeconds(ns int64) int64 { return (ns + 999_999_999) / 1_000_000_000 }
