package values

import (
	"math"
	"testing"
)

// Scores as ZADD reads them; the accepted and refused forms are
// redis-server 7.0.15's answers to ZADD.
func TestParseScore(t *testing.T) {
	inf := math.Inf(1)
	ok := []struct {
		in   string
		want float64
	}{
		{"1", 1}, {"+1", 1}, {"-1.5", -1.5}, {".5", 0.5}, {"1.", 1}, {"1e3", 1000}, {"1E+3", 1000},
		{"0x10", 16}, {"0X1p-1", 0.5}, {"0x.8", 0.5}, {"-0x1.8p1", -3},
		{"inf", inf}, {"+inf", inf}, {"-inf", -inf}, {"Infinity", inf}, {"-INFINITY", -inf},
		{"1e-310", 1e-310}, {"1796021406436562", 1796021406436562}, {"-0", 0},
		{"123456789012345678", 123456789012345678}, {"0.1", 0.1},
	}
	for _, tt := range ok {
		got, err := ParseScore([]byte(tt.in))
		if err != nil || got != tt.want {
			t.Errorf("ParseScore(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	if got, _ := ParseScore([]byte("-0")); !math.Signbit(got) {
		t.Errorf("ParseScore(-0) lost the sign strtod keeps")
	}
	bad := []string{"", " 1", "1 ", "\t1", "abc", "nan", "-nan", "NaN(1)", "1e400", "-1e400", "1e-400",
		"0x", "0x.", "1e", "1e+", "--1", "+-1", "1.2.3", "inff", "infinit", "(1", "1\x00", "0x1p", "1_000"}
	for _, in := range bad {
		if got, err := ParseScore([]byte(in)); err != ErrNotFloat {
			t.Errorf("ParseScore(%q) = %v, %v; want ErrNotFloat", in, got, err)
		}
	}
}

// Bounds as ZCOUNT reads them: strtod without string2d's checks, so
// leading white space, "" and "(" (as 0) and out-of-range values pass.
// Recorded from redis-server 7.0.15's ZCOUNT.
func TestParseScoreRange(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		min, max string
		want     ScoreRange
	}{
		{"1", "2", ScoreRange{Min: 1, Max: 2}},
		{"(1", "(2", ScoreRange{Min: 1, Max: 2, MinExclusive: true, MaxExclusive: true}},
		{"", "", ScoreRange{}},
		{"(", "5", ScoreRange{MinExclusive: true, Max: 5}},
		{" 1", "\t5", ScoreRange{Min: 1, Max: 5}},
		{"1e400", "-1e400", ScoreRange{Min: inf, Max: -inf}},
		{"1e-400", "(0x10", ScoreRange{Min: 0, Max: 16, MaxExclusive: true}},
		{"-infinity", "INF", ScoreRange{Min: -inf, Max: inf}},
		{"(-inf", "(+inf", ScoreRange{Min: -inf, Max: inf, MinExclusive: true, MaxExclusive: true}},
	}
	for _, tt := range tests {
		got, err := ParseScoreRange([]byte(tt.min), []byte(tt.max))
		if err != nil || got != tt.want {
			t.Errorf("ParseScoreRange(%q, %q) = %+v, %v; want %+v", tt.min, tt.max, got, err, tt.want)
		}
	}
	for _, bad := range []string{"1 ", "((1", "nan", "(nan", "abc", " ", "-", "(-", "1)", "[1"} {
		if _, err := ParseScoreRange([]byte(bad), []byte("1")); err != ErrBoundNotFloat {
			t.Errorf("min %q: %v, want ErrBoundNotFloat", bad, err)
		}
		if _, err := ParseScoreRange([]byte("1"), []byte(bad)); err != ErrBoundNotFloat {
			t.Errorf("max %q: %v, want ErrBoundNotFloat", bad, err)
		}
	}
}

// Scores as ZSCORE and ZRANGE WITHSCORES print them (redis-server 7.0.15).
func TestAppendScore(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "-0"}, {1, "1"}, {-1, "-1"}, {1.5, "1.5"}, {100, "100"},
		{0.1, "0.10000000000000001"}, {1e-5, "1.0000000000000001e-05"}, {1e20, "1e+20"},
		{123456789012345678, "1.2345678901234568e+17"}, {1e16, "10000000000000000"},
		{1796021406436562, "1796021406436562"}, {math.Inf(1), "inf"}, {math.Inf(-1), "-inf"},
		{5e-324, "4.9406564584124654e-324"}, {math.MaxFloat64, "1.7976931348623157e+308"},
	}
	for _, tt := range tests {
		if got := string(AppendScore([]byte("x"), tt.in)); got != "x"+tt.want {
			t.Errorf("AppendScore(%v) = %q, want %q", tt.in, got, "x"+tt.want)
		}
	}
}

// Integers as Redis's string2ll reads them (HINCRBY's stored value).
func TestParseInt64(t *testing.T) {
	ok := map[string]int64{"0": 0, "1": 1, "-1": -1, "10": 10, "9223372036854775807": math.MaxInt64,
		"-9223372036854775808": math.MinInt64}
	for in, want := range ok {
		if got, valid := ParseInt64([]byte(in)); !valid || got != want {
			t.Errorf("ParseInt64(%q) = %d, %v", in, got, valid)
		}
	}
	for _, in := range []string{"", "-", "+1", "01", "-0", "00", " 1", "1 ", "1.0", "9223372036854775808",
		"-9223372036854775809", "18446744073709551616", "99999999999999999999", "0x1", "1e3"} {
		if got, valid := ParseInt64([]byte(in)); valid {
			t.Errorf("ParseInt64(%q) = %d, want refused", in, got)
		}
	}
}

// IndexRange clamps as LRANGE does; the expectations are LRANGE's answers
// over a five-element list.
func TestIndexRange(t *testing.T) {
	tests := []struct{ start, stop, lo, hi int }{
		{0, -1, 0, 5}, {0, 0, 0, 1}, {-1, -1, 4, 5}, {-100, 100, 0, 5}, {2, 1, 0, 0}, {5, 10, 0, 0},
		{-2, 10, 3, 5}, {1, -2, 1, 4}, {-100, -6, 0, 0}, {-100, -5, 0, 1}, {4, 4, 4, 5},
		{math.MinInt, math.MaxInt, 0, 5}, {math.MaxInt, math.MinInt, 0, 0},
	}
	for _, tt := range tests {
		if lo, hi := IndexRange(tt.start, tt.stop, 5); lo != tt.lo || hi != tt.hi {
			t.Errorf("IndexRange(%d, %d, 5) = [%d, %d), want [%d, %d)", tt.start, tt.stop, lo, hi, tt.lo, tt.hi)
		}
	}
	if lo, hi := IndexRange(0, -1, 0); lo != hi {
		t.Errorf("IndexRange over no elements = [%d, %d)", lo, hi)
	}
}

func TestAddInt64(t *testing.T) {
	if _, err := addInt64(math.MaxInt64, 1); err != ErrOverflow {
		t.Errorf("MaxInt64+1: %v", err)
	}
	if _, err := addInt64(math.MinInt64, -1); err != ErrOverflow {
		t.Errorf("MinInt64-1: %v", err)
	}
	if v, err := addInt64(math.MinInt64, math.MaxInt64); err != nil || v != -1 {
		t.Errorf("MinInt64+MaxInt64 = %d, %v", v, err)
	}
}
