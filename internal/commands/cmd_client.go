package commands

import (
	"github.com/rlserver/rlserver/internal/server"
)

// CLIENT: the connection's own settings (SETNAME, SETINFO, ...), and CLIENT
// LIST and CLIENT KILL, which the server carries out (server.Conn.List,
// server.Conn.Kill) since they reach connections other goroutines own.

var (
	errNoSuchClient = replyError("ERR No such client")
	errClientID     = replyError("ERR client-id should be greater than 0")
	errInvalidID    = replyError("ERR Invalid client ID")
)

func errClientType(t []byte) error { return errf("Unknown client type '%.128s'", t) }
func errNoSuchUser(u []byte) error { return errf("No such user '%.128s'", u) }

// cmdClient handles CLIENT SETNAME|GETNAME|ID|SETINFO|INFO|LIST|KILL|HELP.
func cmdClient(c *session, args [][]byte) error {
	sub := args[1]
	switch {
	case equalFold(sub, "setname"):
		if len(args) != 3 {
			return errArity("client|setname")
		}
		if !validClientName(args[2]) {
			return errBadClientName
		}
		c.conn.SetName(string(args[2]))
		c.out.OK()
	case equalFold(sub, "getname"):
		if len(args) != 2 {
			return errArity("client|getname")
		}
		if name := c.conn.Name(); name == "" {
			c.out.Null()
		} else {
			c.out.BulkString(name)
		}
	case equalFold(sub, "id"):
		if len(args) != 2 {
			return errArity("client|id")
		}
		c.out.Integer(int64(c.conn.ID()))
	case equalFold(sub, "setinfo"):
		if len(args) != 4 {
			return errArity("client|setinfo")
		}
		attr, value := args[2], args[3]
		if !validClientName(value) && len(value) > 0 {
			return errSetInfoValue(attr)
		}
		switch {
		case equalFold(attr, "lib-name"):
			c.conn.SetLibName(string(value))
		case equalFold(attr, "lib-ver"):
			c.conn.SetLibVersion(string(value))
		default:
			return errUnrecognizedOption(attr)
		}
		c.out.OK()
	case equalFold(sub, "info"):
		if len(args) != 2 {
			return errArity("client|info")
		}
		c.out.Bulk(c.conn.Info(args))
	case equalFold(sub, "list"):
		return clientList(c, args)
	case equalFold(sub, "kill"):
		if len(args) < 3 {
			return errArity("client|kill")
		}
		return clientKill(c, args)
	case equalFold(sub, "help"):
		writeHelp(c, "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"GETNAME", "    Return the name of the current connection.",
			"ID", "    Return the ID of the current connection.",
			"INFO", "    Return information about the current client connection.",
			"KILL <ip:port>", "    Kill connection made from <ip:port>.",
			"KILL <option> <value> [<option> <value> [...]]", "    Kill connections. Options are:",
			"    * ADDR (<ip:port>|<unixsocket>:0)", "      Kill connections made from the specified address",
			"    * LADDR (<ip:port>|<unixsocket>:0)", "      Kill connections made to specified local address",
			"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)", "      Kill connections by type.",
			"    * USER <username>", "      Kill connections authenticated by <username>.",
			"    * SKIPME (YES|NO)", "      Skip killing current connection (default: yes).",
			"    * ID <client-id>", "      Kill connections by client id.",
			"LIST [options ...]", "    Return information about client connections. Options:",
			"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)", "      Return clients of specified type.",
			"    * ID <client-id> [<client-id> ...]", "      Return clients with the specified IDs.",
			"SETINFO <option> <value>", "    Set client meta attr. Options are: LIB-NAME, LIB-VER.",
			"SETNAME <connection-name>", "    Assign the name <connection-name> to the current connection.",
			"HELP", "    Print this help.")
	default:
		return errUnknownSubcommand("CLIENT", sub)
	}
	return nil
}

// clientType parses a TYPE filter. Every rlserver connection is "normal":
// there are no replicas, masters or Pub/Sub clients.
func clientType(t []byte) (normal bool, err error) {
	switch {
	case equalFold(t, "normal"):
		return true, nil
	case equalFold(t, "master"), equalFold(t, "replica"), equalFold(t, "slave"), equalFold(t, "pubsub"):
		return false, nil
	}
	return false, errClientType(t)
}

// clientList handles CLIENT LIST [TYPE type | ID id [id ...]]: one line per
// connection, in connection order, in Redis 7.2's format.
func clientList(c *session, args [][]byte) error {
	var ids []uint64
	all := true
	switch {
	case len(args) == 2:
	case len(args) == 4 && equalFold(args[2], "type"):
		normal, err := clientType(args[3])
		if err != nil {
			return err
		}
		all = normal
	case len(args) >= 4 && equalFold(args[2], "id"):
		for _, a := range args[3:] {
			id, ok := parseInt(a)
			if !ok {
				return errInvalidID
			}
			if id > 0 {
				ids = append(ids, uint64(id))
			}
		}
		all = false
	default:
		return errSyntax
	}
	c.out.Bulk(c.conn.List(ids, all, args))
	return nil
}

// clientKill handles CLIENT KILL addr (Redis's old form: OK, or an error if
// no connection is from addr) and CLIENT KILL <filter> <value> ... (the
// number killed). A connection that kills itself is closed once this reply
// is written; others are closed by their owners (Server.kill).
func clientKill(c *session, args [][]byte) error {
	if len(args) == 3 {
		if c.conn.Kill(server.KillFilter{Addr: string(args[2]), HasAddr: true}) == 0 {
			return errNoSuchClient
		}
		c.out.OK()
		return nil
	}
	if len(args)%2 != 0 {
		return errSyntax
	}
	f := server.KillFilter{SkipMe: true}
	for i := 2; i < len(args); i += 2 {
		opt, val := args[i], args[i+1]
		switch {
		case equalFold(opt, "id"):
			id, ok := parseInt(val)
			if !ok || id <= 0 {
				return errClientID
			}
			f.ID = uint64(id)
		case equalFold(opt, "type"):
			normal, err := clientType(val)
			if err != nil {
				return err
			}
			f.None = f.None || !normal
		case equalFold(opt, "addr"):
			f.Addr, f.HasAddr = string(val), true
		case equalFold(opt, "laddr"):
			f.LocalAddr, f.HasLocal = string(val), true
		case equalFold(opt, "user"):
			if string(val) != "default" {
				return errNoSuchUser(val)
			}
		case equalFold(opt, "skipme"):
			switch {
			case equalFold(val, "yes"):
				f.SkipMe = true
			case equalFold(val, "no"):
				f.SkipMe = false
			default:
				return errSyntax
			}
		default:
			return errSyntax
		}
	}
	c.out.Integer(int64(c.conn.Kill(f)))
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

// cmdAuth handles AUTH password and AUTH username password.
func cmdAuth(c *session, args [][]byte) error {
	if len(args) > 3 {
		return errSyntax // as Redis, when AUTH runs
	}
	var user, pass []byte
	if len(args) == 2 {
		pass = args[1]
	} else {
		user, pass = args[1], args[2]
	}
	if err := c.conn.Authenticate(user, pass); err != nil {
		return err
	}
	c.out.OK()
	return nil
}
