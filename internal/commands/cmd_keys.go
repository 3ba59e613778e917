package commands

// KEYS, over every shard's plain keys.

// keysCommands returns KEYS.
func keysCommands() []*command {
	return []*command{
		// O(keys), as in Redis: every shard lists its matching keys at
		// once, and the reply holds them all (the output limit bounds it).
		&command{name: "keys", arity: 2, flags: flagReadonly | flagLong, group: groupGeneric, since: "1.0.0",
			summary: "The plain keys matching a glob-style pattern (O(keys): for debugging, as in Redis).",
			run:     cmdKeys},
	}
}

func cmdKeys(c *session, args [][]byte) error {
	pattern := args[1]
	keys := c.handle().Keys(func(key []byte) bool { return globMatch(pattern, key) })
	c.out.Array(len(keys))
	for _, k := range keys {
		c.out.Bulk(k)
	}
	return nil
}

// globMatch reports whether s matches the glob-style pattern as Redis's
// stringmatchlen reads one: * any run of bytes, ? any byte, [abc], [^abc]
// and [a-z] a class (a range's ends in either order), \x the byte x. It
// backtracks only to the last *, so it takes O(len(pattern)·len(s)) at
// worst, whatever the pattern.
func globMatch(pattern, s []byte) bool {
	p, i := 0, 0
	star, resume := -1, 0 // the last * seen, and where s resumes after it
	for i < len(s) {
		if p < len(pattern) {
			switch pattern[p] {
			case '*':
				for p < len(pattern) && pattern[p] == '*' {
					p++
				}
				star, resume = p, i
				continue
			case '?':
				p, i = p+1, i+1
				continue
			default:
				if n, ok := matchOne(pattern[p:], s[i]); ok {
					p, i = p+n, i+1
					continue
				}
			}
		}
		if star < 0 {
			return false
		}
		resume++
		p, i = star, resume
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// matchOne matches the pattern element at the start of pattern (a class,
// an escaped byte or a plain byte; not * or ?) against c, returning the
// element's length and whether c matches.
func matchOne(pattern []byte, c byte) (int, bool) {
	switch {
	case pattern[0] == '\\' && len(pattern) > 1:
		return 2, pattern[1] == c
	case pattern[0] != '[':
		return 1, pattern[0] == c
	}
	p := 1
	not := p < len(pattern) && pattern[p] == '^'
	if not {
		p++
	}
	match := false
	for p < len(pattern) && pattern[p] != ']' {
		switch {
		case pattern[p] == '\\' && p+1 < len(pattern):
			match = match || pattern[p+1] == c
			p += 2
		case p+2 < len(pattern) && pattern[p+1] == '-':
			lo, hi := pattern[p], pattern[p+2]
			if lo > hi {
				lo, hi = hi, lo
			}
			match = match || (c >= lo && c <= hi)
			p += 3
		default:
			match = match || pattern[p] == c
			p++
		}
	}
	// An unterminated class ends with the pattern, as in Redis.
	if p < len(pattern) {
		p++ // the ]
	}
	return p, match != not
}
