package values

import (
	"math"
	"strconv"
)

// Numbers as Redis reads and writes them. Redis parses scores with C's
// strtod (glibc on x86-64) and checks what it consumed; these functions
// reproduce that grammar exactly, because a client's "0x10", "+inf" or
// " 1" must be accepted or refused as Redis would.

// literal is what strtod recognises at the start of a byte string: leading
// white space, then a sign, then inf/infinity/nan (any case), a hex number
// 0x<digits>[.<digits>][p<exp>] or a decimal <digits>[.<digits>][e<exp>].
// end is the index just past it, 0 when strtod converts nothing.
type literal struct {
	start, end int  // s[start:end] is the literal, sign included
	neg        bool // a '-' sign
	inf, nan   bool
	hex        bool // a hex literal (0x...)
	hexExp     bool // a hex literal with its 'p' exponent
	mantStart  int  // s[mantStart:mantEnd] is the mantissa, digits and point
	mantEnd    int
}

// isSpace is C's isspace in the C locale.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHexDigit(c byte) bool { return isDigit(c) || (c|0x20) >= 'a' && (c|0x20) <= 'f' }

// hasPrefixFold reports whether s starts with the lower-case ASCII prefix,
// in any case.
func hasPrefixFold(s []byte, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		if s[i]|0x20 != prefix[i] {
			return false
		}
	}
	return true
}

// scanFloat returns the literal strtod converts at the start of s.
func scanFloat(s []byte) literal {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	lit := literal{start: i}
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		lit.neg = s[i] == '-'
		i++
	}
	switch {
	case hasPrefixFold(s[i:], "infinity"):
		lit.inf, lit.end = true, i+len("infinity")
		return lit
	case hasPrefixFold(s[i:], "inf"):
		lit.inf, lit.end = true, i+len("inf")
		return lit
	case hasPrefixFold(s[i:], "nan"):
		lit.nan, lit.end = true, scanNaNPayload(s, i+len("nan"))
		return lit
	}
	if i+1 < len(s) && s[i] == '0' && s[i+1]|0x20 == 'x' {
		if j, ok := scanMantissa(s, i+2, true); ok {
			lit.hex, lit.mantStart, lit.mantEnd = true, i+2, j
			lit.end = scanExponent(s, j, 'p')
			lit.hexExp = lit.end > j
			return lit
		}
		// "0x" without hex digits: strtod converts the "0" alone.
		lit.mantStart, lit.mantEnd, lit.end = i, i+1, i+1
		return lit
	}
	j, ok := scanMantissa(s, i, false)
	if !ok {
		return literal{}
	}
	lit.mantStart, lit.mantEnd = i, j
	lit.end = scanExponent(s, j, 'e')
	return lit
}

// scanNaNPayload returns the end of "nan" and its optional "(chars)".
func scanNaNPayload(s []byte, i int) int {
	if i >= len(s) || s[i] != '(' {
		return i
	}
	j := i + 1
	for j < len(s) && (isDigit(s[j]) || s[j] == '_' || (s[j]|0x20) >= 'a' && (s[j]|0x20) <= 'z') {
		j++
	}
	if j < len(s) && s[j] == ')' {
		return j + 1
	}
	return i
}

// scanMantissa returns the end of <digits>[.<digits>] at s[i:], hex or
// decimal digits, and whether it holds at least one digit.
func scanMantissa(s []byte, i int, hex bool) (int, bool) {
	start := i
	i = scanDigits(s, i, hex)
	n := i - start
	if i < len(s) && s[i] == '.' {
		j := scanDigits(s, i+1, hex)
		n += j - (i + 1)
		i = j
	}
	return i, n > 0
}

// scanDigits returns the end of the run of digits at s[i:].
func scanDigits(s []byte, i int, hex bool) int {
	for i < len(s) && (isDigit(s[i]) || hex && isHexDigit(s[i])) {
		i++
	}
	return i
}

// scanExponent returns the end of an exponent <mark>[sign]<digits> at s[i:],
// or i when there is none (a mark without digits is not consumed).
func scanExponent(s []byte, i int, mark byte) int {
	if i >= len(s) || s[i]|0x20 != mark {
		return i
	}
	j := i + 1
	if j < len(s) && (s[j] == '+' || s[j] == '-') {
		j++
	}
	if j >= len(s) || !isDigit(s[j]) {
		return i
	}
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	return j
}

// mantissaIsZero reports whether every digit of the literal's mantissa is 0.
func (lit literal) mantissaIsZero(s []byte) bool {
	for _, c := range s[lit.mantStart:lit.mantEnd] {
		if c != '0' && c != '.' {
			return false
		}
	}
	return true
}

// float64 returns the literal's value, correctly rounded as glibc's strtod
// rounds it, and whether strtod would set ERANGE: the value overflowed to
// an infinity or a non-zero number rounded to zero.
func (lit literal) float64(s []byte) (f float64, rangeErr bool) {
	switch {
	case lit.end == 0:
		return 0, false
	case lit.nan:
		return math.NaN(), false
	case lit.inf:
		if lit.neg {
			return math.Inf(-1), false
		}
		return math.Inf(1), false
	}
	text := s[lit.start:lit.end]
	if f, ok := smallInteger(text); ok {
		return f, false
	}
	var buf [64]byte
	if lit.hex && !lit.hexExp {
		// Go's ParseFloat wants the exponent a C hex literal may omit.
		text = append(append(buf[:0], text...), "p0"...)
	}
	f, err := strconv.ParseFloat(lookupString(text), 64)
	if err != nil {
		return f, true // only ErrRange: the grammar was checked
	}
	return f, f == 0 && !lit.mantissaIsZero(s)
}

// smallInteger converts a decimal integer up to 2^53, the common case
// (timestamps in microseconds as scores), without the general parser:
// every such integer is exact in a float64.
func smallInteger(text []byte) (float64, bool) {
	neg := len(text) > 0 && text[0] == '-'
	if neg || len(text) > 0 && text[0] == '+' {
		text = text[1:]
	}
	if len(text) == 0 || len(text) > 16 {
		return 0, false
	}
	var n int64
	for _, c := range text {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if n > 1<<53 {
		return 0, false
	}
	if neg {
		return -float64(n), true
	}
	return float64(n), true
}

// ParseScore parses a score or increment as Redis does (string2d): the
// whole of b must be a strtod literal without leading white space, not
// NaN, and not out of range (1e400, or 1e-400 rounding to zero); "inf",
// "-Infinity", "0x1p3" and "+1" are accepted. It returns ErrNotFloat
// otherwise.
func ParseScore(b []byte) (float64, error) {
	if len(b) == 0 || isSpace(b[0]) {
		return 0, ErrNotFloat
	}
	lit := scanFloat(b)
	if lit.end != len(b) {
		return 0, ErrNotFloat
	}
	f, rangeErr := lit.float64(b)
	if math.IsNaN(f) || rangeErr && (math.IsInf(f, 0) || f == 0) {
		return 0, ErrNotFloat
	}
	return f, nil
}

// ScoreRange is an interval of scores; either end may be exclusive and
// either may be infinite. Min > Max is an empty range, not an error.
type ScoreRange struct {
	Min, Max                   float64
	MinExclusive, MaxExclusive bool
}

// Contains reports whether score lies in r.
func (r ScoreRange) Contains(score float64) bool {
	return r.aboveMin(score) && r.belowMax(score)
}

func (r ScoreRange) aboveMin(score float64) bool {
	if r.MinExclusive {
		return score > r.Min
	}
	return score >= r.Min
}

func (r ScoreRange) belowMax(score float64) bool {
	if r.MaxExclusive {
		return score < r.Max
	}
	return score <= r.Max
}

// ParseScoreRange parses a min and max as ZCOUNT and ZRANGEBYSCORE do
// (zslParseRange): an optional '(' makes the bound exclusive, the rest is
// read by strtod, which here accepts leading white space, an empty string
// (as 0) and out-of-range values (1e400 as +inf). NaN or unconsumed bytes
// give ErrBoundNotFloat.
func ParseScoreRange(min, max []byte) (ScoreRange, error) {
	var r ScoreRange
	var okMin, okMax bool
	r.Min, r.MinExclusive, okMin = parseBound(min)
	r.Max, r.MaxExclusive, okMax = parseBound(max)
	if !okMin || !okMax {
		return ScoreRange{}, ErrBoundNotFloat
	}
	return r, nil
}

func parseBound(b []byte) (f float64, exclusive, ok bool) {
	if len(b) > 0 && b[0] == '(' {
		exclusive, b = true, b[1:]
	}
	lit := scanFloat(b)
	if lit.end != len(b) {
		return 0, false, false
	}
	f, _ = lit.float64(b)
	if math.IsNaN(f) {
		return 0, false, false
	}
	return f, exclusive, true
}

// AppendScore appends f as Redis 7.0 replies with a score (ZSCORE,
// WITHSCORES, ZINCRBY): C's "%.17g", and "inf"/"-inf" for the infinities.
// 1 is "1", 1.5 is "1.5", 0.1 is "0.10000000000000001". The same text is
// RESP3's double.
func AppendScore(dst []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(dst, "inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-inf"...)
	}
	return strconv.AppendFloat(dst, f, 'g', 17, 64)
}

// ParseInt64 parses b as Redis's string2ll does: "0", or an optional '-'
// and a decimal number without leading zeros, within int64 (no '+', no
// white space, no "-0").
func ParseInt64(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || b[0] < '1' || b[0] > '9' {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if !isDigit(c) || v > (math.MaxUint64-uint64(c-'0'))/10 {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	switch {
	case neg && v <= 1<<63:
		return int64(-v), true
	case !neg && v < 1<<63:
		return int64(v), true
	}
	return 0, false
}

// addInt64 returns a+b, or ErrOverflow when it leaves the int64 range.
func addInt64(a, b int64) (int64, error) {
	if b > 0 && a > math.MaxInt64-b || b < 0 && a < math.MinInt64-b {
		return 0, ErrOverflow
	}
	return a + b, nil
}

// IndexRange turns Redis's inclusive start and stop indices over n
// elements (negative counting from the end) into the half-open range
// [lo, hi) of positions, as LRANGE, LTRIM, ZRANGE and ZREMRANGEBYRANK
// clamp them: a negative index is added to n, a start still below zero
// becomes 0, a stop past the end becomes the last element, and start >
// stop or start >= n is empty (lo == hi).
func IndexRange(start, stop, n int) (lo, hi int) {
	if start < 0 {
		start += n
	}
	if stop < 0 {
		stop += n
	}
	if start < 0 {
		start = 0
	}
	if start > stop || start >= n {
		return 0, 0
	}
	if stop >= n {
		stop = n - 1
	}
	return start, stop + 1
}
