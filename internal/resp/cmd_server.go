package resp

import (
	"runtime/debug"
	"strconv"
	"strings"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func cmdPing(c *client, args [][]byte) error {
	if len(args) == 2 {
		c.out.bulk(args[1])
		return nil
	}
	c.out.simple("PONG")
	return nil
}

func cmdEcho(c *client, args [][]byte) error {
	c.out.bulk(args[1])
	return nil
}

func cmdQuit(c *client, args [][]byte) error {
	c.out.ok()
	c.quit = true
	return nil
}

func cmdSelect(c *client, args [][]byte) error {
	n, ok := parseInt(args[1])
	if !ok {
		return errNotInteger
	}
	if n != 0 {
		return errDBIndex // one keyspace, like Redis Cluster
	}
	c.out.ok()
	return nil
}

// cmdHello handles HELLO [protover [AUTH username password] [SETNAME name]].
// With no password configured, AUTH is accepted whatever it says, as Redis
// does for its default user.
func cmdHello(c *client, args [][]byte) error {
	proto := c.out.proto
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
	setName, authOK := false, c.authed
	for ; i < len(args); i++ {
		switch {
		case equalFold(args[i], "auth") && i+2 < len(args):
			if c.srv.cfg.Password == "" {
				// With no password configured, Redis's default user
				// accepts any password.
				authOK = true
			} else if !c.srv.passwordOK(args[i+1], args[i+2]) {
				return c.authFailed()
			} else {
				authOK = true
			}
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
	c.setAuthed(true)
	c.out.proto = proto
	if setName {
		c.name = string(name)
	}
	c.out.mapHeader(7)
	c.out.bulkString("server")
	c.out.bulkString("rlserver")
	c.out.bulkString("version")
	c.out.bulkString(c.srv.cfg.Version)
	c.out.bulkString("proto")
	c.out.integer(int64(proto))
	c.out.bulkString("id")
	c.out.integer(int64(c.id))
	c.out.bulkString("mode")
	c.out.bulkString("standalone")
	c.out.bulkString("role")
	c.out.bulkString("master")
	c.out.bulkString("modules")
	c.out.array(0)
	return nil
}

// validClientName follows Redis: printable ASCII without spaces.
func validClientName(name []byte) bool {
	for _, ch := range name {
		if ch < '!' || ch > '~' {
			return false
		}
	}
	return true
}

func writeHelp(c *client, lines ...string) {
	c.out.array(len(lines))
	for _, l := range lines {
		c.out.simple(l)
	}
}

func cmdDBSize(c *client, args [][]byte) error {
	st := c.stats()
	c.out.integer(int64(st.Keys + st.PlainKeys))
	return nil
}

// cmdTime replies with the server's clock as Redis does: unix seconds and
// microseconds, as two bulk strings.
func cmdTime(c *client, args [][]byte) error {
	now := c.srv.cfg.Clock()
	c.out.array(2)
	c.out.bulkString(itoa(now / 1e9))
	c.out.bulkString(itoa(now % 1e9 / 1e3))
	return nil
}

// cmdCommand handles COMMAND, COMMAND COUNT|LIST|INFO|DOCS|HELP: enough for
// redis-cli's hints and for clients that inspect the command table.
func cmdCommand(c *client, args [][]byte) error {
	if len(args) == 1 {
		c.out.array(len(commands.sorted))
		for _, cmd := range commands.sorted {
			writeCommandInfo(c, cmd)
		}
		return nil
	}
	sub := args[1]
	switch {
	case equalFold(sub, "count"):
		c.out.integer(int64(len(commands.sorted)))
	case equalFold(sub, "list"):
		c.out.array(len(commands.sorted))
		for _, cmd := range commands.sorted {
			c.out.bulkString(cmd.name)
		}
	case equalFold(sub, "info"):
		names := args[2:]
		if len(names) == 0 {
			c.out.array(len(commands.sorted))
			for _, cmd := range commands.sorted {
				writeCommandInfo(c, cmd)
			}
			return nil
		}
		c.out.array(len(names))
		for _, n := range names {
			if cmd := commands.lookup(n); cmd != nil {
				writeCommandInfo(c, cmd)
			} else {
				c.out.null()
			}
		}
	case equalFold(sub, "docs"):
		var list []*command
		if len(args) == 2 {
			list = commands.sorted
		} else {
			for _, n := range args[2:] {
				if cmd := commands.lookup(n); cmd != nil {
					list = append(list, cmd)
				}
			}
		}
		c.out.mapHeader(len(list))
		for _, cmd := range list {
			c.out.bulkString(cmd.name)
			c.out.mapHeader(3)
			c.out.bulkString("summary")
			c.out.bulkString(cmd.summary)
			c.out.bulkString("since")
			c.out.bulkString("1.0.0")
			c.out.bulkString("group")
			c.out.bulkString(cmd.group())
		}
	case equalFold(sub, "help"):
		writeHelp(c, "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"(no subcommand)", "    Return details about all commands.",
			"COUNT", "    Return the total number of commands.",
			"DOCS [<command-name> ...]", "    Return documentation details about commands.",
			"INFO [<command-name> ...]", "    Return details about the given commands, or all of them.",
			"LIST", "    Return a list of all command names.",
			"HELP", "    Print this help.")
	default:
		return errUnknownSubcommand("COMMAND", sub)
	}
	return nil
}

// writeCommandInfo writes one command in COMMAND INFO's ten-field layout.
func writeCommandInfo(c *client, cmd *command) {
	c.out.array(10)
	c.out.bulkString(cmd.name)
	c.out.integer(int64(cmd.arity))
	c.out.array(len(cmd.flags))
	for _, f := range cmd.flags {
		c.out.simple(f)
	}
	key := int64(0)
	if cmd.prepare != nil {
		key = 1 // RL.ALLOW, RL.PEEK, RL.RESET take the key first
	}
	c.out.integer(key)
	c.out.integer(key)
	c.out.integer(key)
	c.out.array(0) // ACL categories
	c.out.array(0) // tips
	c.out.array(0) // key specs
	c.out.array(0) // subcommands
}

func (cmd *command) group() string {
	if strings.HasPrefix(cmd.name, "rl.") {
		return "ratelimit"
	}
	return "connection"
}

// cmdConfig answers CONFIG GET with no parameters, as Redis does for names
// it does not know: rlserver is configured by flags and RL.RULE, not CONFIG.
// Tools such as redis-benchmark read a few parameters at start and carry on
// without them.
func cmdConfig(c *client, args [][]byte) error {
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
	c.out.mapHeader(0)
	return nil
}

// cmdMemory handles MEMORY PURGE: a full garbage collection, returning
// freed memory to the OS, so that INFO memory's used_memory is then the live
// heap (benchmarks measure bytes per key this way). It pauses nothing for
// long, but is not meant to be called often.
func cmdMemory(c *client, args [][]byte) error {
	switch {
	case equalFold(args[1], "purge"):
		if len(args) != 2 {
			return errArity("memory|purge")
		}
		debug.FreeOSMemory() // runs a GC first
		c.out.ok()
	case equalFold(args[1], "help"):
		writeHelp(c, "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"PURGE", "    Collect garbage and return free memory to the OS.",
			"HELP", "    Print this help.")
	default:
		return errUnknownSubcommand("MEMORY", args[1])
	}
	return nil
}
