package commands

import (
	"bytes"
	"strings"

	"github.com/rlserver/rlserver/internal/resp"
	"github.com/rlserver/rlserver/internal/service"
)

// parseInt and parseDigits are the protocol's integer parsing, for
// arguments (see resp.ParseInt).
func parseInt(b []byte) (int64, bool) { return resp.ParseInt(b) }

func parseDigits(b []byte, neg bool) (int64, bool) { return resp.ParseDigits(b, neg) }

// command is one entry of the command table: a handler, and the properties
// that dispatch checks before running it (arity, flags) and that COMMAND
// reports (flags, key positions, documentation), as in Redis's struct
// redisCommand.
//
// A command is immediate (run: parse, operate, write the reply to the
// connection's buffer, or return an error that becomes the reply), a
// decision (prepare builds a service.Op; the connection batches it with the
// pipeline's other work and later calls reply with the results), keyed
// (exec runs on a service.DB covering its keys), or a container (CLIENT,
// RL.RULE, ...) whose subcommands carry the handlers. Handlers never flush
// and never block on network I/O.
type command struct {
	// name is lower case, as Redis reports it in errors and COMMAND; a
	// subcommand's is "container|sub" ("client|setname").
	name string
	// arity follows Redis: n > 0 means exactly n words including the name
	// (and the subcommand), n < 0 means at least −n. Dispatch checks it,
	// also while queueing inside MULTI; any other check of the words is
	// the handler's, made when the command runs.
	arity int
	flags cmdFlags
	// keys locates the key arguments; the zero value means none.
	keys keyRange
	// keyFlags are the flags of the key specification COMMAND INFO reports:
	// how the command accesses its keys, in Redis's vocabulary (RW, RO, OW,
	// RM, then access, update, insert, delete).
	keyFlags []string
	// keySpecs, when set, are the key specifications COMMAND INFO reports
	// instead of the one keys and keyFlags make: one per key whose access
	// differs (RENAME reads and deletes its source, overwrites its
	// destination).
	keySpecs []keySpec
	// movableKeys returns the word indexes of the keys of a command that
	// has flagMovableKeys: keys locates only those certain from the
	// position alone.
	movableKeys func(args [][]byte) []int

	// COMMAND DOCS: group as Redis groups its commands; since the Redis
	// version that introduced a Redis command, or the rlserver version
	// for rlserver's own; module the Redis module that provides it.
	group, since, module string
	summary              string

	// subcommands of a container, in the order COMMAND reports them;
	// subByName indexes them by the word after the container's name.
	subcommands []*command
	subByName   map[string]*command

	index int // position in commandTable.sorted (a subcommand: its container's)
	// The handler: run (immediate), prepare and reply (a decision), or
	// exec (a keyed command); see the package documentation.
	run     func(c *session, args [][]byte) error
	prepare func(c *session, args [][]byte) (service.Op, error)
	reply   func(c *session, op *service.Op)
	exec    func(x *keyed, db *service.DB) error
	// valueReply reports whether a keyed command's reply may carry a
	// stored value (GET; SET with GET), whose size only the output limit
	// bounds: at most one such reply per connection waits in a batch.
	valueReply func(args [][]byte) bool
	// queue, for a command run immediately (run), queues it in the batch
	// instead when it can be (a script confined to one shard: see
	// script_queue.go), reporting whether it did.
	queue func(c *session, cmd *command, args [][]byte) bool
}

// singleKey reports whether a keyed command has exactly one key, at
// keys.first: it is then batched to that key's shard.
func (cmd *command) singleKey() bool {
	return cmd.keys.first > 0 && cmd.keys.last == cmd.keys.first && cmd.movableKeys == nil
}

// cmdFlags are a command's properties. All but flagTxControl are Redis's
// command flags and are reported by COMMAND INFO under Redis's names.
type cmdFlags uint32

// The flags, in the order COMMAND INFO lists them (Redis's order).
const (
	flagWrite       cmdFlags = 1 << iota // may change the keyspace
	flagReadonly                         // reads keys, changes nothing
	flagAdmin                            // server administration
	flagNoScript                         // Redis: not allowed in scripts
	flagLoading                          // Redis: allowed while loading the dataset
	flagStale                            // Redis: allowed on a stale replica
	flagFast                             // constant or logarithmic time
	flagNoAuth                           // allowed before AUTH
	flagNoMulti                          // refused inside MULTI, when queued
	flagMovableKeys                      // keys are found by reading the arguments (COMMAND GETKEYS)
	// flagTxControl marks the commands that act on the transaction itself
	// (MULTI, EXEC, DISCARD, WATCH, QUIT): inside MULTI they run at once
	// instead of being queued. Not reported: Redis has no such flag.
	flagTxControl
	// flagLong marks the commands that may run long: a script (until it
	// ends or SCRIPT KILL), or work over the whole keyspace. An event
	// loop runs a pipeline holding one on a goroutine of its own
	// (MayRunLong). Not reported: Redis has no such flag.
	flagLong
)

var flagNames = [...]struct {
	flag cmdFlags
	name string
}{
	{flagWrite, "write"}, {flagReadonly, "readonly"}, {flagAdmin, "admin"}, {flagNoScript, "noscript"},
	{flagLoading, "loading"}, {flagStale, "stale"}, {flagFast, "fast"}, {flagNoAuth, "no_auth"},
	{flagNoMulti, "no_multi"}, {flagMovableKeys, "movablekeys"},
}

// names returns the flags COMMAND INFO reports, in Redis's order.
func (f cmdFlags) names() []string {
	var out []string
	for _, n := range flagNames {
		if f&n.flag != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// keySpec is one key specification: where keys are, and how they are
// accessed.
type keySpec struct {
	keys  keyRange
	flags []string
}

// keyRange is Redis's (first key, last key, step) triple: word indexes,
// the command name being word 0; a negative last counts from the end (−1
// is the last word). first == 0 means the command takes no keys.
type keyRange struct{ first, last, step int }

// positions returns the indexes of the keys args holds by the range alone.
func (k keyRange) positions(args [][]byte) []int {
	var out []int
	for i := k.first; i <= k.lastIn(args); i += k.step {
		out = append(out, i)
	}
	return out
}

// lastIn returns the index of the last key args holds by the range alone;
// below first when it holds none. With positions' loop, it visits the keys
// without allocating.
func (k keyRange) lastIn(args [][]byte) int {
	if k.first == 0 || k.first >= len(args) {
		return k.first - 1
	}
	last := k.last
	if last < 0 {
		last += len(args)
	}
	return min(last, len(args)-1)
}

// keyPositions returns the word indexes of args's keys; args has passed
// cmd's arity check.
func (cmd *command) keyPositions(args [][]byte) []int {
	if cmd.movableKeys != nil {
		return cmd.movableKeys(args)
	}
	return cmd.keys.positions(args)
}

// maxNameLen bounds command names the table can hold; a longer name is
// unknown without a lookup, which keeps lookups allocation-free.
const maxNameLen = 32

// commandTable maps lower-case names to commands. It is built once, at
// package initialisation, and never changes; a malformed entry (duplicate
// name, missing handler) panics at start-up.
type commandTable struct {
	byName map[string]*command
	sorted []*command // top-level commands, in the order COMMAND lists them
	// longNames[b] has bit n set when a command whose name starts with
	// byte b (either case) and is n bytes long may run long (flagLong, or
	// EXEC): other names are known not to without a lookup.
	longNames [256]uint32
}

func newCommandTable(cmds ...*command) *commandTable {
	t := &commandTable{byName: make(map[string]*command, len(cmds))}
	for _, c := range cmds {
		c.check("")
		if t.byName[c.name] != nil {
			panic("commands: duplicate command " + c.name)
		}
		c.index = len(t.sorted)
		t.byName[c.name] = c
		if c.flags&flagLong != 0 || c.name == "exec" {
			if len(c.name) >= 32 {
				panic("commands: a long-running command's name must be shorter than 32 bytes: " + c.name)
			}
			b, bit := c.name[0], uint32(1)<<len(c.name) // b lower case, as every name in the table
			t.longNames[b] |= bit
			t.longNames[b&^('a'-'A')] |= bit
		}
		t.sorted = append(t.sorted, c)
		if len(c.subcommands) > 0 {
			c.subByName = make(map[string]*command, len(c.subcommands))
		}
		for _, sub := range c.subcommands {
			sub.check(c.name)
			word := strings.TrimPrefix(sub.name, c.name+"|")
			if c.subByName[word] != nil {
				panic("commands: duplicate subcommand " + sub.name)
			}
			sub.index = c.index // metrics count a subcommand as its container
			if sub.group == "" {
				sub.group = c.group
			}
			c.subByName[word] = sub
		}
	}
	return t
}

// check panics unless cmd is well formed; container is the name of the
// command cmd is a subcommand of, or "".
func (cmd *command) check(container string) {
	switch {
	case cmd.name != strings.ToLower(cmd.name) || len(cmd.name) > maxNameLen:
		panic("commands: command name must be lower case and short: " + cmd.name)
	case container != "" && !strings.HasPrefix(cmd.name, container+"|"):
		panic("commands: subcommand " + cmd.name + " must be named " + container + "|...")
	case container != "" && len(cmd.subcommands) > 0:
		panic("commands: subcommands do not nest: " + cmd.name)
	case cmd.arity == 0:
		panic("commands: command without an arity: " + cmd.name)
	case handlers(cmd) > 1, (cmd.prepare != nil) != (cmd.reply != nil):
		panic("commands: command needs one of run, prepare and reply, or exec: " + cmd.name)
	case cmd.exec != nil && cmd.keys.first == 0:
		panic("commands: a keyed command needs key positions: " + cmd.name)
	case handlers(cmd) == 0 && (len(cmd.subcommands) == 0 || cmd.arity > -2):
		// A container without a handler of its own is only ever
		// reached through a subcommand.
		panic("commands: command without a handler: " + cmd.name)
	case (cmd.keys.first != 0) != (len(cmd.keyFlags) > 0), cmd.keys.first != 0 && cmd.keys.step < 1:
		panic("commands: key positions and key flags go together: " + cmd.name)
	case (cmd.flags&flagMovableKeys != 0) != (cmd.movableKeys != nil):
		panic("commands: movablekeys needs a key finder: " + cmd.name)
	case cmd.group == "" && container == "":
		panic("commands: command without a group: " + cmd.name)
	}
}

// handlers counts cmd's kinds of handler: 1 for a command, 0 for a
// container whose subcommands have them.
func handlers(cmd *command) int {
	n := 0
	for _, set := range []bool{cmd.run != nil, cmd.prepare != nil, cmd.exec != nil} {
		if set {
			n++
		}
	}
	return n
}

// lookup finds the top-level command named by word, in any case, without
// allocating.
func (t *commandTable) lookup(word []byte) *command {
	if len(word) > maxNameLen {
		return nil
	}
	var buf [maxNameLen]byte
	return t.byName[string(lowerInto(buf[:0], word))]
}

// resolve finds the command args names: a top-level command, or for a
// container followed by a word, that subcommand. It fails with Redis's
// unknown-command or unknown-subcommand error. It does not allocate when it
// succeeds.
func (t *commandTable) resolve(args [][]byte) (*command, error) {
	cmd := t.lookup(args[0])
	if cmd == nil {
		return nil, errUnknownCommand(args)
	}
	if cmd.subByName == nil || len(args) < 2 {
		return cmd, nil
	}
	if len(args[1]) <= maxNameLen {
		var buf [maxNameLen]byte
		if sub := cmd.subByName[string(lowerInto(buf[:0], args[1]))]; sub != nil {
			return sub, nil
		}
	}
	return nil, errUnknownSubcommand(strings.ToUpper(string(args[0])), args[1])
}

// lookupFullName finds a command by the name COMMAND INFO and DOCS take:
// "get", or "client|setname" for a subcommand; nil if there is none.
func (t *commandTable) lookupFullName(name []byte) *command {
	container, sub, isSub := bytes.Cut(name, []byte("|"))
	cmd := t.lookup(container)
	if cmd == nil || !isSub {
		return cmd
	}
	if cmd.subByName == nil || len(sub) > maxNameLen {
		return nil
	}
	var buf [maxNameLen]byte
	return cmd.subByName[string(lowerInto(buf[:0], sub))]
}

// checkArity returns Redis's arity error when args do not fit cmd.
func (cmd *command) checkArity(args [][]byte) error {
	n := len(args)
	if (cmd.arity > 0 && n != cmd.arity) || (cmd.arity < 0 && n < -cmd.arity) {
		return errArity(cmd.name)
	}
	return nil
}

// admit finds the command args names and makes the checks Redis makes
// before running or queueing a command, in Redis's order: that it exists
// (with its subcommand), its arity, authentication, and that a transaction
// may hold it. On refusal it returns the command found, if any, with the
// error. Admitting a command does not allocate.
func (c *session) admit(args [][]byte) (*command, error) {
	return commands.admit(args, c.conn.Authenticated(), c.inMulti)
}

// admit is session.admit for a connection that is authed or not, and in
// MULTI or not.
func (t *commandTable) admit(args [][]byte, authed, inMulti bool) (*command, error) {
	cmd, err := t.resolve(args)
	if err != nil {
		return nil, err
	}
	if err := cmd.checkArity(args); err != nil {
		return cmd, err
	}
	if !authed && cmd.flags&flagNoAuth == 0 {
		return cmd, errNoAuth
	}
	if inMulti && cmd.flags&flagNoMulti != 0 {
		return cmd, errNotInMulti
	}
	return cmd, nil
}

// reject answers a command admit refused, after the pending replies. As in
// Redis, a refusal inside MULTI dooms the transaction (EXEC then aborts),
// and a refused EXEC discards the transaction and says why.
func (c *session) reject(cmd *command, err error) {
	if !c.flushPending() {
		return
	}
	if c.inMulti {
		c.multiErr = true
	}
	if cmd != nil && cmd.name == "exec" {
		c.endMulti()
		err = errExecAbortBecause(err)
	}
	c.out.Error(errorText(err))
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
