package algorithms

import "math/bits"

// u128 is an unsigned 128-bit integer for the few products (units × window
// length in nanoseconds) that can exceed 64 bits: 10^9 units × 366 days is
// about 3.2e25.
type u128 struct{ hi, lo uint64 }

func mul(a, b int64) u128 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	return u128{hi, lo}
}

func (x u128) add(y int64) u128 {
	lo, carry := bits.Add64(x.lo, uint64(y), 0)
	return u128{x.hi + carry, lo}
}

func (x u128) sub(y int64) u128 {
	lo, borrow := bits.Sub64(x.lo, uint64(y), 0)
	return u128{x.hi - borrow, lo}
}

func (x u128) less(y u128) bool {
	return x.hi < y.hi || (x.hi == y.hi && x.lo < y.lo)
}

// divmod returns x / d and x % d. The quotient must fit in 63 bits; callers
// guarantee it by the bounds rules put on Params (see Params).
func (x u128) divmod(d int64) (q, r int64) {
	uq, ur := bits.Div64(x.hi%uint64(d), x.lo, uint64(d))
	// x.hi%d keeps Div64 from panicking; a quotient that would overflow is a
	// broken invariant, so saturate rather than wrap.
	if x.hi >= uint64(d) || uq > 1<<63-1 {
		return 1<<63 - 1, int64(ur)
	}
	return int64(uq), int64(ur)
}

// ceilDiv returns ⌈x / d⌉, saturating like divmod.
func (x u128) ceilDiv(d int64) int64 {
	q, r := x.divmod(d)
	if r != 0 && q < 1<<63-1 {
		q++
	}
	return q
}
