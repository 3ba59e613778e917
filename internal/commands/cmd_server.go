package commands

import (
	"runtime/debug"
	"strconv"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func cmdPing(c *session, args [][]byte) error {
	if len(args) > 2 {
		return errArity("ping") // Redis checks this when PING runs, not when it is queued
	}
	if len(args) == 2 {
		c.out.Bulk(args[1])
		return nil
	}
	c.out.Simple("PONG")
	return nil
}

func cmdEcho(c *session, args [][]byte) error {
	c.out.Bulk(args[1])
	return nil
}

func cmdQuit(c *session, args [][]byte) error {
	c.out.OK()
	c.conn.Quit()
	return nil
}

func cmdSelect(c *session, args [][]byte) error {
	n, ok := parseInt(args[1])
	if !ok {
		return errNotInteger
	}
	if n != 0 {
		return errDBIndex // one keyspace, like Redis Cluster
	}
	c.out.OK()
	return nil
}

// cmdHello handles HELLO [protover [AUTH username password] [SETNAME name]].
// With no password configured, AUTH is accepted whatever it says, as Redis
// does for its default user.
func cmdHello(c *session, args [][]byte) error {
	proto := c.out.Proto()
	i := 1
	if len(args) > 1 {
		v, ok := parseInt(args[1])
		if !ok {
			return errProtoNotInt
		}
		if v != 2 && v != 3 {
			return errNoProto
		}
		proto, i = int(v), 2
	}
	var name []byte
	setName, authOK := false, c.conn.Authenticated()
	for ; i < len(args); i++ {
		switch {
		case equalFold(args[i], "auth") && i+2 < len(args):
			// With no password configured, Redis's default user
			// accepts any password.
			if c.conn.PasswordRequired() {
				if err := c.conn.Authenticate(args[i+1], args[i+2]); err != nil {
					return err
				}
			}
			authOK = true
			i += 2
		case equalFold(args[i], "setname") && i+1 < len(args):
			name, setName = args[i+1], true
			if !validClientName(name) {
				return errBadClientName
			}
			i++
		default:
			return errHelloOption(args[i])
		}
	}
	if !authOK {
		return errHelloAuth
	}
	c.out.SetProto(proto)
	if setName {
		c.conn.SetName(string(name))
	}
	c.out.Map(7)
	c.out.BulkString("server")
	c.out.BulkString("rlserver")
	c.out.BulkString("version")
	c.out.BulkString(c.h.cfg.Version)
	c.out.BulkString("proto")
	c.out.Integer(int64(proto))
	c.out.BulkString("id")
	c.out.Integer(int64(c.conn.ID()))
	c.out.BulkString("mode")
	c.out.BulkString(c.h.redisMode())
	c.out.BulkString("role")
	c.out.BulkString("master")
	c.out.BulkString("modules")
	c.out.Array(0)
	return nil
}

func writeHelp(c *session, lines ...string) {
	c.out.Array(len(lines))
	for _, l := range lines {
		c.out.Simple(l)
	}
}

func cmdDBSize(c *session, args [][]byte) error {
	st := c.h.svc.Stats(c.handle())
	c.out.Integer(int64(st.Keys + st.PlainKeys))
	return nil
}

// cmdTime replies with the server's clock as Redis does: unix seconds and
// microseconds, as two bulk strings.
func cmdTime(c *session, args [][]byte) error {
	now := c.h.cfg.Clock()
	c.out.Array(2)
	c.out.BulkString(itoa(now / 1e9))
	c.out.BulkString(itoa(now % 1e9 / 1e3))
	return nil
}

// COMMAND and its subcommands report the command table: what a client
// library or redis-cli reads to learn arities, flags and key positions.

// cmdCommandAll handles COMMAND: every command, as COMMAND INFO shows it.
func cmdCommandAll(c *session, args [][]byte) error {
	c.out.Array(len(commands.sorted))
	for _, cmd := range commands.sorted {
		writeCommandInfo(c, cmd)
	}
	return nil
}

// cmdCommandCount handles COMMAND COUNT: the top-level commands, as Redis
// counts them.
func cmdCommandCount(c *session, args [][]byte) error {
	c.out.Integer(int64(len(commands.sorted)))
	return nil
}

// cmdCommandList handles COMMAND LIST: every command's name, then its
// subcommands' ("client|setname"), as Redis lists them. Redis's FILTERBY
// is not supported.
func cmdCommandList(c *session, args [][]byte) error {
	if len(args) != 2 {
		return errSyntax
	}
	n := 0
	for _, cmd := range commands.sorted {
		n += 1 + len(cmd.subcommands)
	}
	c.out.Array(n)
	for _, cmd := range commands.sorted {
		c.out.BulkString(cmd.name)
		for _, sub := range cmd.subcommands {
			c.out.BulkString(sub.name)
		}
	}
	return nil
}

// cmdCommandInfo handles COMMAND INFO [name ...]: the commands named (null
// for an unknown name), or all of them.
func cmdCommandInfo(c *session, args [][]byte) error {
	if len(args) == 2 {
		return cmdCommandAll(c, args)
	}
	c.out.Array(len(args) - 2)
	for _, name := range args[2:] {
		if cmd := commands.lookupFullName(name); cmd != nil {
			writeCommandInfo(c, cmd)
		} else {
			c.out.Null()
		}
	}
	return nil
}

// writeCommandInfo writes one command in COMMAND INFO's ten-field layout:
// name, arity, flags, first key, last key, key step, ACL categories (none:
// rlserver has no ACLs), tips, key specifications, subcommands.
func writeCommandInfo(c *session, cmd *command) {
	c.out.Array(10)
	c.out.BulkString(cmd.name)
	c.out.Integer(int64(cmd.arity))
	flags := cmd.flags.names()
	c.out.Set(len(flags))
	for _, f := range flags {
		c.out.Simple(f)
	}
	c.out.Integer(int64(cmd.keys.first))
	c.out.Integer(int64(cmd.keys.last))
	c.out.Integer(int64(cmd.keys.step))
	c.out.Set(0) // ACL categories
	c.out.Set(0) // tips
	switch {
	case cmd.keys.first == 0:
		c.out.Set(0)
	case len(cmd.keySpecs) > 0:
		c.out.Set(len(cmd.keySpecs))
		for _, ks := range cmd.keySpecs {
			writeKeySpec(c, ks)
		}
	default:
		c.out.Set(1)
		writeKeySpec(c, keySpec{cmd.keys, cmd.keyFlags})
	}
	if len(cmd.subcommands) == 0 {
		c.out.Set(0) // Redis replies an empty set here, an array otherwise
		return
	}
	c.out.Array(len(cmd.subcommands))
	for _, sub := range cmd.subcommands {
		writeCommandInfo(c, sub)
	}
}

// writeKeySpec writes a key specification in Redis 7's form: the keys
// begin at word index first and run to lastkey, counted from first when
// positive or from the end when negative, every keystep words.
func writeKeySpec(c *session, spec keySpec) {
	k := spec.keys
	lastkey := k.last
	if lastkey >= 0 {
		lastkey -= k.first
	}
	c.out.Map(3)
	c.out.BulkString("flags")
	c.out.Set(len(spec.flags))
	for _, f := range spec.flags {
		c.out.Simple(f)
	}
	c.out.BulkString("begin_search")
	c.out.Map(2)
	c.out.BulkString("type")
	c.out.BulkString("index")
	c.out.BulkString("spec")
	c.out.Map(1)
	c.out.BulkString("index")
	c.out.Integer(int64(k.first))
	c.out.BulkString("find_keys")
	c.out.Map(2)
	c.out.BulkString("type")
	c.out.BulkString("range")
	c.out.BulkString("spec")
	c.out.Map(3)
	c.out.BulkString("lastkey")
	c.out.Integer(int64(lastkey))
	c.out.BulkString("keystep")
	c.out.Integer(int64(k.step))
	c.out.BulkString("limit")
	c.out.Integer(0)
}

// cmdCommandDocs handles COMMAND DOCS [name ...]: a map of name to its
// documentation, for the commands named (unknown names are left out) or
// for all of them.
func cmdCommandDocs(c *session, args [][]byte) error {
	list := commands.sorted
	if len(args) > 2 {
		list = nil
		for _, name := range args[2:] {
			if cmd := commands.lookupFullName(name); cmd != nil {
				list = append(list, cmd)
			}
		}
	}
	c.out.Map(len(list))
	for _, cmd := range list {
		c.out.BulkString(cmd.name)
		writeCommandDocs(c, cmd)
	}
	return nil
}

// writeCommandDocs writes one command's documentation as Redis does, fields
// left out when empty: summary, since, group, module, subcommands.
func writeCommandDocs(c *session, cmd *command) {
	n := 1 // group is always there
	for _, present := range []bool{cmd.summary != "", cmd.since != "", cmd.module != "", len(cmd.subcommands) > 0} {
		if present {
			n++
		}
	}
	c.out.Map(n)
	if cmd.summary != "" {
		c.out.BulkString("summary")
		c.out.BulkString(cmd.summary)
	}
	if cmd.since != "" {
		c.out.BulkString("since")
		c.out.BulkString(cmd.since)
	}
	c.out.BulkString("group")
	c.out.BulkString(cmd.group)
	if cmd.module != "" {
		c.out.BulkString("module")
		c.out.BulkString(cmd.module)
	}
	if len(cmd.subcommands) > 0 {
		c.out.BulkString("subcommands")
		c.out.Map(len(cmd.subcommands))
		for _, sub := range cmd.subcommands {
			c.out.BulkString(sub.name)
			writeCommandDocs(c, sub)
		}
	}
}

// cmdCommandGetKeys handles COMMAND GETKEYS command [arg ...]: the keys that
// command would act on, found as dispatch and the handler find them, with
// Redis's errors in Redis's order.
func cmdCommandGetKeys(c *session, args [][]byte) error {
	target := args[2:]
	cmd, err := commands.resolve(target)
	switch {
	case err != nil:
		return errGetKeysUnknown
	case cmd.keys.first == 0 && cmd.movableKeys == nil:
		return errGetKeysNone
	case cmd.checkArity(target) != nil:
		return errGetKeysArity
	}
	keys := cmd.keyPositions(target)
	if len(keys) == 0 {
		return errGetKeysInvalid
	}
	c.out.Array(len(keys))
	for _, i := range keys {
		c.out.Bulk(target[i])
	}
	return nil
}

func cmdCommandHelp(c *session, args [][]byte) error {
	writeHelp(c, "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"(no subcommand)", "    Return details about all commands.",
		"COUNT", "    Return the total number of commands.",
		"DOCS [<command-name> ...]", "    Return documentation details about commands.",
		"GETKEYS <full-command>", "    Return the keys from a full command.",
		"INFO [<command-name> ...]", "    Return details about the given commands, or all of them.",
		"LIST", "    Return a list of all command names, subcommands included.",
		"HELP", "    Print this help.")
	return nil
}

// cmdConfig answers CONFIG GET with no parameters, as Redis does for names
// it does not know: rlserver is configured by flags and RL.RULE, not CONFIG.
// Tools such as redis-benchmark read a few parameters at start and carry on
// without them.
func cmdConfig(c *session, args [][]byte) error {
	if equalFold(args[1], "help") {
		writeHelp(c, "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"GET <pattern>", "    Answers no parameters: rlserver is configured by command-line flags and RL.RULE.",
			"HELP", "    Print this help.")
		return nil
	}
	if !equalFold(args[1], "get") {
		return errUnknownSubcommand("CONFIG", args[1])
	}
	if len(args) < 3 {
		return errArity("config|get")
	}
	c.out.Map(0)
	return nil
}

// cmdMemory handles MEMORY PURGE: a full garbage collection, returning
// freed memory to the OS, so that INFO memory's used_memory is then the live
// heap (benchmarks measure bytes per key this way). It pauses nothing for
// long, but is not meant to be called often.
func cmdMemory(c *session, args [][]byte) error {
	switch {
	case equalFold(args[1], "purge"):
		if len(args) != 2 {
			return errArity("memory|purge")
		}
		debug.FreeOSMemory() // runs a GC first
		c.out.OK()
	case equalFold(args[1], "help"):
		writeHelp(c, "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"PURGE", "    Collect garbage and return free memory to the OS.",
			"HELP", "    Print this help.")
	default:
		return errUnknownSubcommand("MEMORY", args[1])
	}
	return nil
}
