package resp

// ParseInt parses a decimal integer the way Redis does: an optional minus,
// digits, no leading zeros, no spaces or plus sign, within int64. It does
// not allocate.
func ParseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	if b[0] == '0' && (len(b) > 1 || neg) {
		return 0, false
	}
	return ParseDigits(b, neg)
}

// ParseDigits parses b, one or more decimal digits, as an int64 that is
// negative when neg; it reports false for anything else or an overflow.
func ParseDigits(b []byte, neg bool) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		d := uint64(ch - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	if neg {
		if n > 1<<63 {
			return 0, false
		}
		return -int64(n), true
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}
