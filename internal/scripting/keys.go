package scripting

// SplitKeys splits what follows the script (or SHA1) in EVAL, EVALSHA,
// EVAL_RO and EVALSHA_RO — numkeys, then the keys, then the arguments — with
// Redis's checks and error texts. The slices share args' backing array.
func SplitKeys(args [][]byte) (keys, argv [][]byte, err error) {
	if len(args) == 0 {
		return nil, nil, errKeysNotInteger
	}
	n, ok := parseRedisInt(args[0])
	switch {
	case !ok:
		return nil, nil, errKeysNotInteger
	case n > int64(len(args)-1):
		return nil, nil, errKeysTooMany
	case n < 0:
		return nil, nil, errKeysNegative
	}
	return args[1 : 1+n], args[1+n:], nil
}

// parseRedisInt reads a decimal integer as Redis's string2ll does: an
// optional minus sign, no plus sign, spaces or leading zeros, within int64.
func parseRedisInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	digits := b
	if neg {
		digits = b[1:]
	}
	if len(digits) == 0 || len(digits) > 19 || (digits[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var u uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	switch {
	case neg && u <= 1<<63:
		return int64(-u), true // -(1<<63) wraps to math.MinInt64
	case !neg && u < 1<<63:
		return int64(u), true
	}
	return 0, false
}
