package values

import (
	"math/big"
)

// Redis adds float increments (HINCRBYFLOAT, INCRBYFLOAT) in C's long
// double, which on x86-64 is the x87 80-bit extended format: a 64-bit
// significand and exponents down to 2^-16382 (2^-16445 with subnormals)
// and up to below 2^16384. It prints the sum with "%.17Lf" and drops the
// trailing zeros, so 10.5 + 0.1 prints as "10.6" where float64 arithmetic
// would print "10.59999999999999964". LongDouble reproduces that format
// exactly, with math/big: every result is rounded once, to nearest even,
// from the exact value, as the x87 unit rounds.

// Bounds of the x87 extended format, as binary exponents e of values
// m×2^e with 0.5 <= |m| < 1 (big.Float's MantExp).
const (
	extPrec     = 64     // significand bits
	extMaxExp   = 16384  // |x| < 2^16384
	extMinExp   = -16381 // the smallest normal value is 2^-16382
	extSubScale = 16445  // the smallest subnormal is 2^-16445
	// maxLongDoubleChars is Redis's MAX_LONG_DOUBLE_CHARS: a longer string
	// is not a number.
	maxLongDoubleChars = 5 * 1024
)

// LongDouble is a number as Redis's long double holds it. The zero value
// is 0. It is immutable.
type LongDouble struct {
	f *big.Float // nil for 0; may be ±Inf
}

// ParseLongDouble parses b as Redis's string2ld does: like ParseScore
// (strtold's grammar, whole string, no leading white space, NaN refused),
// into the extended format's range, and at most 5119 bytes. "inf" is
// accepted; check IsInf where Redis refuses it.
func ParseLongDouble(b []byte) (LongDouble, bool) {
	if len(b) == 0 || len(b) >= maxLongDoubleChars || isSpace(b[0]) {
		return LongDouble{}, false
	}
	lit := scanFloat(b)
	if lit.end != len(b) || lit.nan {
		return LongDouble{}, false
	}
	if lit.inf {
		return LongDouble{new(big.Float).SetInf(lit.neg)}, true
	}
	v, ok := exactValue(b, lit)
	if !ok {
		return LongDouble{}, false // certainly out of range
	}
	if v.sign() == 0 {
		return LongDouble{}, true
	}
	x := roundExtended(v)
	// strtold's ERANGE cases that Redis refuses: overflow to infinity and
	// a non-zero value rounding to zero.
	if x.f == nil || x.f.IsInf() {
		return LongDouble{}, false
	}
	return x, true
}

// ParseFloatIncrement parses HINCRBYFLOAT's increment: ErrNotFloat when it
// is not a number, ErrIncrementNaNOrInf when it is infinite.
func ParseFloatIncrement(b []byte) (LongDouble, error) {
	x, ok := ParseLongDouble(b)
	if !ok {
		return LongDouble{}, ErrNotFloat
	}
	if x.IsInf() {
		return LongDouble{}, ErrIncrementNaNOrInf
	}
	return x, nil
}

// IsInf reports whether x is an infinity.
func (x LongDouble) IsInf() bool { return x.f != nil && x.f.IsInf() }

// Add returns x+y rounded to the extended format, and false when the sum
// is infinite or not a number (Redis's "increment would produce NaN or
// Infinity").
func (x LongDouble) Add(y LongDouble) (LongDouble, bool) {
	if x.IsInf() || y.IsInf() {
		return LongDouble{}, false
	}
	if x.f == nil {
		return y, true
	}
	if y.f == nil {
		return x, true
	}
	// Enough bits for the exact sum: from above the larger operand's top
	// bit down to the smaller operand's lowest set bit.
	lsb := func(f *big.Float) int { return f.MantExp(nil) - int(f.MinPrec()) }
	hi := max(x.f.MantExp(nil), y.f.MantExp(nil)) + 1
	sum := new(big.Float).SetPrec(uint(hi-min(lsb(x.f), lsb(y.f)))).Add(x.f, y.f)
	if sum.Sign() == 0 {
		return LongDouble{}, true
	}
	z := roundExtended(exactFloat{sum})
	return z, !z.IsInf()
}

// AppendLongDouble appends x as Redis prints a float increment's result
// (ld2string's LD_STR_HUMAN): "%.17Lf" with the trailing zeros and a
// trailing point dropped, "-0" as "0", and "inf"/"-inf".
func AppendLongDouble(dst []byte, x LongDouble) []byte {
	if x.f == nil {
		return append(dst, '0')
	}
	if x.f.IsInf() {
		if x.f.Signbit() {
			return append(dst, "-inf"...)
		}
		return append(dst, "inf"...)
	}
	start := len(dst)
	dst = x.f.Append(dst, 'f', 17)
	end := len(dst)
	for dst[end-1] == '0' {
		end--
	}
	if dst[end-1] == '.' {
		end--
	}
	dst = dst[:end]
	if string(dst[start:]) == "-0" {
		dst = append(dst[:start], '0')
	}
	return dst
}

// exactValue returns the exact value of a finite literal that scanFloat
// accepted, or false when its magnitude is so far outside the extended
// range that no exact arithmetic is needed to know it overflows or
// underflows.
func exactValue(s []byte, lit literal) (exact, bool) {
	base := 10
	if lit.hex {
		base = 16
	}
	// The mantissa's digits without the point; significant counts them
	// from the first non-zero one.
	digits := make([]byte, 0, lit.mantEnd-lit.mantStart)
	digitsAfterPoint, significant := 0, 0
	seenPoint := false
	for _, c := range s[lit.mantStart:lit.mantEnd] {
		if c == '.' {
			seenPoint = true
			continue
		}
		if significant > 0 || c != '0' {
			significant++
		}
		digits = append(digits, c)
		if seenPoint {
			digitsAfterPoint++
		}
	}
	mant, _ := new(big.Int).SetString(string(digits), base) // digits checked by scanFloat
	if lit.neg {
		mant.Neg(mant)
	}
	if mant.Sign() == 0 {
		return exactFloat{new(big.Float)}, true
	}
	exp := exponentOf(s[lit.mantEnd:lit.end])
	if lit.hex {
		// The value is mant × 2^scale, within a factor 2^(4·significant)
		// of 2^scale.
		scale := exp - 4*int64(digitsAfterPoint)
		if scale+4*int64(significant) < -extSubScale-2 || scale > extMaxExp+1 {
			return nil, false
		}
		f := new(big.Float).SetInt(mant) // exact: SetInt takes the bits it needs
		return exactFloat{f.SetMantExp(f, int(scale))}, true
	}
	// The value is mant × 10^scale, within a factor 10^significant of
	// 10^scale; 2^-16446 > 10^-4951 and 2^16384 < 10^4933.
	scale := exp - int64(digitsAfterPoint)
	if scale+int64(significant) < -4955 || scale > 4933 {
		return nil, false
	}
	pow := new(big.Int).Exp(big.NewInt(10), big.NewInt(abs64(scale)), nil)
	if scale >= 0 {
		return exactFloat{new(big.Float).SetInt(mant.Mul(mant, pow))}, true
	}
	return quotient{mant, pow}, true
}

// exact is a non-zero real number known exactly, which can be rounded to
// any precision once.
type exact interface {
	// round returns the value rounded to prec bits in mode.
	round(prec uint, mode big.RoundingMode) *big.Float
	// cmpAbsPow2 compares |value| with 2^e.
	cmpAbsPow2(e int) int
	sign() int
}

// exactFloat is a value held exactly by a big.Float.
type exactFloat struct{ f *big.Float }

func (x exactFloat) round(prec uint, mode big.RoundingMode) *big.Float {
	return new(big.Float).SetPrec(prec).SetMode(mode).Set(x.f)
}

func (x exactFloat) cmpAbsPow2(e int) int {
	return new(big.Float).Abs(x.f).Cmp(new(big.Float).SetMantExp(big.NewFloat(1), e))
}

func (x exactFloat) sign() int { return x.f.Sign() }

// quotient is the value num/den (den > 0), a decimal fraction that no
// binary float holds exactly.
type quotient struct{ num, den *big.Int }

func (q quotient) round(prec uint, mode big.RoundingMode) *big.Float {
	n := new(big.Float).SetInt(q.num) // exact
	d := new(big.Float).SetInt(q.den) // exact
	return new(big.Float).SetPrec(prec).SetMode(mode).Quo(n, d)
}

func (q quotient) cmpAbsPow2(e int) int {
	// |num|/den vs 2^e  ⇔  |num|·2^-e vs den (e < 0 here).
	n := new(big.Int).Abs(q.num)
	d := new(big.Int).Set(q.den)
	if e < 0 {
		n.Lsh(n, uint(-e))
	} else {
		d.Lsh(d, uint(e))
	}
	return n.Cmp(d)
}

func (q quotient) sign() int { return q.num.Sign() }

// exponentOf returns the exponent of "e<digits>" or "p<digits>" (empty for
// none), saturating far beyond any meaningful magnitude.
func exponentOf(e []byte) int64 {
	if len(e) == 0 {
		return 0
	}
	e = e[1:]
	neg := e[0] == '-'
	if e[0] == '+' || neg {
		e = e[1:]
	}
	var v int64
	for _, c := range e {
		if v < 1<<40 {
			v = v*10 + int64(c-'0')
		}
	}
	if neg {
		return -v
	}
	return v
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// roundExtended rounds a non-zero exact value to the extended format, to
// nearest even, with its subnormals and its overflow to infinity.
func roundExtended(x exact) LongDouble {
	if x.sign() == 0 {
		return LongDouble{}
	}
	// The exponent of the value itself: truncation never carries into the
	// next binade, as rounding to nearest may.
	exp := x.round(extPrec, big.ToZero).MantExp(nil)
	prec := extPrec
	if exp < extMinExp {
		// Subnormal: the last significand bit stays at 2^-16445.
		prec = exp + extSubScale
	}
	if prec < 1 {
		// Below 2^-16445: rounds to 0 at or under half of it, else up to
		// the smallest subnormal.
		if x.cmpAbsPow2(-extSubScale-1) <= 0 {
			return LongDouble{}
		}
		min := new(big.Float).SetMantExp(big.NewFloat(1), -extSubScale)
		if x.sign() < 0 {
			min.Neg(min)
		}
		return LongDouble{min}
	}
	f := x.round(uint(prec), big.ToNearestEven)
	if f.MantExp(nil) > extMaxExp {
		return LongDouble{new(big.Float).SetInf(f.Signbit())}
	}
	return LongDouble{f}
}
