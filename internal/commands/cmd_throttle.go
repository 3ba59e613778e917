package commands

import (
	"fmt"
	"math"
	"strconv"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/service"
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

// execThrottle runs CL.THROTTLE key max_burst count_per_period period
// [quantity], as redis-cell takes it: period in seconds, quantity 1 by
// default (0 only looks). A zero rate (count or period 0, or an emission
// interval period/count under 1 ns) is redis-cell's error. Negative
// numbers, and numbers whose products overflow nanoseconds, are out of
// range: redis-cell computes nonsense from them instead.
//
// The key's value is its theoretical arrival time (ns since the epoch), and
// the key expires then: when the limiter is full again there is nothing to
// keep. A key holding anything else is of another kind.
func execThrottle(x *keyed, db *service.DB) error {
	p, quantity, err := parseThrottle(x.args)
	if err != nil {
		return err
	}
	key, now := x.args[1], db.Now()
	tat := now
	old, exists, err := stringValue(db, key)
	if err != nil {
		return err
	}
	if exists {
		v, ok := parseInt(old)
		if !ok {
			return errWrongType
		}
		tat = v
	}
	next, d := algorithms.GCRA(p, tat, now, quantity)
	if d.Allowed && next > now {
		x.scratch = strconv.AppendInt(x.scratch[:0], next, 10)
		if err := db.SetString(key, x.scratch); err != nil {
			return err
		}
		db.SetExpiry(key, next)
	}
	limited := int64(1)
	if d.Allowed {
		limited = 0
	}
	x.out.Array(5)
	x.out.Integer(limited)
	x.out.Integer(d.Limit)
	x.out.Integer(d.Remaining)
	if d.RetryAfter < 0 {
		x.out.Integer(-1)
	} else {
		x.out.Integer(cellSeconds(d.RetryAfter))
	}
	x.out.Integer(cellSeconds(d.ResetAfter))
	return nil
}

// parseThrottle reads CL.THROTTLE's numbers into GCRA's parameters and the
// quantity.
func parseThrottle(args [][]byte) (algorithms.GCRAParams, int64, error) {
	var p algorithms.GCRAParams
	if len(args) != 5 && len(args) != 6 {
		return p, 0, errCellUsage
	}
	n := [4]int64{3: 1}
	for i, a := range args[2:] {
		v, err := parseCellInt(a)
		if err != nil {
			return p, 0, err
		}
		n[i] = v
	}
	burst, count, period, quantity := n[0], n[1], n[2], n[3]
	switch {
	case count == 0 || period == 0:
		return p, 0, errZeroRates
	case burst < 0 || count < 0 || period < 0 || quantity < 0, period > math.MaxInt64/nsPerSec:
		return p, 0, errNotInteger
	}
	ei := algorithms.GCRAInterval(period*nsPerSec, count)
	switch {
	case ei == 0:
		return p, 0, errZeroRates
	case burst >= math.MaxInt64/ei || quantity > math.MaxInt64/ei:
		return p, 0, errNotInteger
	}
	return algorithms.GCRAParams{Burst: burst, Interval: ei}, quantity, nil
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
