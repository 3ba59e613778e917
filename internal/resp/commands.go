package resp

import (
	"strings"

	"github.com/rlserver/rlserver/internal/shards"
)

// command is one entry of the command table.
//
// A command is either immediate (run: parse, operate, write the reply to the
// client's buffer, or return an error that becomes the reply), or a shard
// operation (prepare builds a shards.Op; the connection batches it with the
// pipeline's other operations and later calls reply with the results).
// Handlers never flush and never block on network I/O.
type command struct {
	name string // lower case, as Redis reports it in errors and COMMAND
	// arity follows Redis: n > 0 means exactly n words including the name,
	// n < 0 means at least −n.
	arity int
	// maxArgs, when > 0, caps the word count of a variadic command; more
	// words get the arity error.
	maxArgs int
	flags   []string // as COMMAND INFO reports them
	summary string   // one line, for COMMAND DOCS
	index   int      // position in commandTable.sorted
	run     func(c *client, args [][]byte) error
	prepare func(c *client, args [][]byte) (shards.Op, error)
	reply   func(c *client, op *shards.Op)
}

// maxNameLen bounds command names the table can hold; a longer name is
// unknown without a lookup, which keeps lookups allocation-free.
const maxNameLen = 32

// commandTable maps lower-case names to commands. It is built once, at
// package initialisation; a duplicate name is a programming error.
type commandTable struct {
	byName map[string]*command
	sorted []*command
}

func newCommandTable(cmds ...*command) *commandTable {
	t := &commandTable{byName: make(map[string]*command, len(cmds))}
	for _, c := range cmds {
		if c.name != strings.ToLower(c.name) || len(c.name) > maxNameLen {
			panic("resp: command name must be lower case and short: " + c.name)
		}
		if t.byName[c.name] != nil {
			panic("resp: duplicate command " + c.name)
		}
		if (c.run == nil) == (c.prepare == nil) || (c.prepare != nil) != (c.reply != nil) {
			panic("resp: command needs run, or prepare and reply: " + c.name)
		}
		c.index = len(t.sorted)
		t.byName[c.name] = c
		t.sorted = append(t.sorted, c)
	}
	return t
}

// lookup finds the command named by word, in any case, without allocating.
func (t *commandTable) lookup(word []byte) *command {
	if len(word) > maxNameLen {
		return nil
	}
	var buf [maxNameLen]byte
	lower := lowerInto(buf[:0], word)
	return t.byName[string(lower)]
}

// checkArity returns Redis's arity error when args do not fit cmd.
func (cmd *command) checkArity(args [][]byte) error {
	n := len(args)
	if (cmd.arity > 0 && n != cmd.arity) || (cmd.arity < 0 && n < -cmd.arity) || (cmd.maxArgs > 0 && n > cmd.maxArgs) {
		return errArity(cmd.name)
	}
	return nil
}

// lowerInto appends the ASCII lower case of b to dst.
func lowerInto(dst, b []byte) []byte {
	for _, ch := range b {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		dst = append(dst, ch)
	}
	return dst
}

// equalFold reports whether word is s, ignoring ASCII case. s is lower case.
func equalFold(word []byte, s string) bool {
	if len(word) != len(s) {
		return false
	}
	for i, ch := range word {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		if ch != s[i] {
			return false
		}
	}
	return true
}

// parseInt parses a decimal integer the way Redis does: an optional minus,
// digits, no leading zeros, no spaces or plus sign, within int64. It does
// not allocate.
func parseInt(b []byte) (int64, bool) {
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
