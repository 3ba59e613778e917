package scripting

import (
	"math"
	"strconv"
	"strings"
)

// Redis's Lua (C Lua 5.1) formats numbers with printf; Go's formatting differs
// for large and small magnitudes, infinities and NaN. These helpers reproduce
// glibc's output for the two formats Redis uses:
//   - %.14g, Lua's own number-to-string conversion (tostring, table.concat,
//     string arguments of redis.log, error messages);
//   - %.17g, what Redis passes to a command for a Lua number argument of
//     redis.call (script_lua.c, luaArgsToRedisArgv), and what it replies for a
//     {double=...} table.

// appendNumber14 appends f as C's "%.14g" would print it.
func appendNumber14(dst []byte, f float64) []byte { return appendG(dst, f, 14) }

// appendNumber17 appends f as C's "%.17g" would print it.
func appendNumber17(dst []byte, f float64) []byte { return appendG(dst, f, 17) }

// appendG appends f formatted as C's "%.<prec>g". Go's 'g' with an explicit
// precision chooses between the exponent and the plain form with the same rule
// as C (exponent below -4 or at least the precision) and strips trailing zeros
// as C does; only the spelling of infinities and NaN differs. glibc prints the
// sign of a NaN, and the NaN that x86 produces for 0/0 is negative.
func appendG(dst []byte, f float64, prec int) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(dst, "inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-inf"...)
	case math.IsNaN(f):
		if math.Signbit(f) {
			return append(dst, "-nan"...)
		}
		return append(dst, "nan"...)
	}
	return strconv.AppendFloat(dst, f, 'g', prec, 64)
}

// number14 is f as Lua's tostring prints it.
func number14(f float64) string {
	var buf [32]byte
	return string(appendNumber14(buf[:0], f))
}

// toInteger converts a Lua number to a Redis integer reply as Redis does, by
// C's (long long) cast: the fraction is dropped (toward zero), and a value
// out of the int64 range or NaN gives the x86 "integer indefinite" value,
// math.MinInt64. Go's own conversion of such values is platform-dependent.
func toInteger(f float64) int64 {
	if math.IsNaN(f) || f >= 0x1p63 || f < -0x1p63 {
		return math.MinInt64
	}
	return int64(f)
}

// cSpace reports whether c is a space for C's isspace in the "C" locale.
func cSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}

// parseLuaNumber converts s to a number as Lua 5.1's tonumber does without a
// base (luaO_str2d over glibc's strtod): surrounding white space is allowed;
// decimal and hexadecimal forms, "inf", "infinity" and "nan" in any case are
// accepted; a value out of range is an infinity, as strtod returns HUGE_VAL.
func parseLuaNumber(s string) (float64, bool) {
	s = strings.TrimFunc(s, func(r rune) bool { return r < 0x80 && cSpace(byte(r)) })
	if s == "" {
		return 0, false
	}
	body := s
	if body[0] == '+' || body[0] == '-' {
		body = body[1:]
	}
	if len(body) > 1 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X') {
		return parseHexNumber(s)
	}
	// strconv accepts forms strtod does not (underscores, "0b", "0o"); refuse
	// any character strtod would not read as part of a decimal number.
	for i := 0; i < len(body); i++ {
		c := body[i]
		if (c < '0' || c > '9') && c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-' && !isInfNaNLetter(c) {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return f, true
		}
		return 0, false
	}
	return f, true
}

// isInfNaNLetter reports whether c may appear in "inf", "infinity" or "nan".
func isInfNaNLetter(c byte) bool {
	switch c | 0x20 {
	case 'i', 'n', 'f', 't', 'y', 'a':
		return true
	}
	return false
}

// parseHexNumber reads strtod's hexadecimal form: a sign, "0x", hex digits
// with an optional fraction and an optional binary exponent "p".
func parseHexNumber(s string) (float64, bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		hex := (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'f')
		if !hex && c != 'x' && c != 'X' && c != '.' && c != 'p' && c != 'P' && c != '+' && c != '-' {
			return 0, false
		}
	}
	if !strings.ContainsAny(s, "pP") {
		s += "p0"
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return f, true
		}
		return 0, false
	}
	return f, true
}
