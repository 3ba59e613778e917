package resp

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"
)

// CLIENT: the connection's own settings (SETNAME, SETINFO, ...), and CLIENT
// LIST and CLIENT KILL, which reach connections other goroutines own. A
// connection publishes what CLIENT LIST shows of it (publication) at the end
// of each pipeline; CLIENT KILL never touches another connection's state, it
// asks the connection's owner to close it (Server.kill).

var (
	errNoSuchClient = errors.New("No such client")
	errClientID     = errors.New("client-id should be greater than 0")
	errInvalidID    = errors.New("Invalid client ID")
)

func errClientType(t []byte) error { return fmt.Errorf("Unknown client type '%.128s'", t) }
func errNoSuchUser(u []byte) error { return fmt.Errorf("No such user '%.128s'", u) }

// clientSubcommand names CLIENT's subcommands as the cmd= field of CLIENT
// LIST shows them.
var clientSubcommand = map[string]string{
	"setname": "client|setname", "getname": "client|getname", "id": "client|id", "setinfo": "client|setinfo",
	"info": "client|info", "list": "client|list", "kill": "client|kill", "help": "client|help",
}

// cmdClient handles CLIENT SETNAME|GETNAME|ID|SETINFO|INFO|LIST|KILL|HELP.
func cmdClient(c *client, args [][]byte) error {
	sub := args[1]
	if len(sub) <= maxNameLen {
		var buf [maxNameLen]byte
		if name, ok := clientSubcommand[string(lowerInto(buf[:0], sub))]; ok {
			c.lastCmd = name
		}
	}
	switch {
	case equalFold(sub, "setname"):
		if len(args) != 3 {
			return errArity("client|setname")
		}
		if !validClientName(args[2]) {
			return errBadClientName
		}
		c.name = string(args[2])
		c.out.ok()
	case equalFold(sub, "getname"):
		if len(args) != 2 {
			return errArity("client|getname")
		}
		if c.name == "" {
			c.out.null()
		} else {
			c.out.bulkString(c.name)
		}
	case equalFold(sub, "id"):
		if len(args) != 2 {
			return errArity("client|id")
		}
		c.out.integer(int64(c.id))
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
			c.libName = string(value)
		case equalFold(attr, "lib-ver"):
			c.libVer = string(value)
		default:
			return errUnrecognizedOption(attr)
		}
		c.out.ok()
	case equalFold(sub, "info"):
		if len(args) != 2 {
			return errArity("client|info")
		}
		c.out.bulk(c.ownInfo(args).appendTo(nil, c.srv))
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
func clientList(c *client, args [][]byte) error {
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
	var out []byte
	for _, other := range c.srv.clients() {
		if !all && !slices.Contains(ids, other.id) {
			continue
		}
		if other == c {
			out = c.ownInfo(args).appendTo(out, c.srv)
		} else {
			out = other.publishedInfo().appendTo(out, c.srv)
		}
	}
	c.out.bulk(out)
	return nil
}

// killFilter is CLIENT KILL's filter; zero fields match everything.
type killFilter struct {
	id          uint64
	addr, laddr string
	hasAddr     bool
	hasLaddr    bool
	none        bool // TYPE master|replica|pubsub, which no connection is
	skipMe      bool
}

func (f *killFilter) match(c *client) bool {
	return !f.none && (f.id == 0 || c.id == f.id) && (!f.hasAddr || c.addr == f.addr) && (!f.hasLaddr || c.laddr == f.laddr)
}

// clientKill handles CLIENT KILL addr (Redis's old form: OK, or an error if
// no connection is from addr) and CLIENT KILL <filter> <value> ... (the
// number killed). A connection that kills itself is closed once this reply
// is written; others are closed by their owners (Server.kill).
func clientKill(c *client, args [][]byte) error {
	if len(args) == 3 {
		f := killFilter{addr: string(args[2]), hasAddr: true}
		if killMatching(c, &f) == 0 {
			return errNoSuchClient
		}
		c.out.ok()
		return nil
	}
	if len(args)%2 != 0 {
		return errSyntax
	}
	f := killFilter{skipMe: true}
	for i := 2; i < len(args); i += 2 {
		opt, val := args[i], args[i+1]
		switch {
		case equalFold(opt, "id"):
			id, ok := parseInt(val)
			if !ok || id <= 0 {
				return errClientID
			}
			f.id = uint64(id)
		case equalFold(opt, "type"):
			normal, err := clientType(val)
			if err != nil {
				return err
			}
			f.none = f.none || !normal
		case equalFold(opt, "addr"):
			f.addr, f.hasAddr = string(val), true
		case equalFold(opt, "laddr"):
			f.laddr, f.hasLaddr = string(val), true
		case equalFold(opt, "user"):
			if string(val) != "default" {
				return errNoSuchUser(val)
			}
		case equalFold(opt, "skipme"):
			switch {
			case equalFold(val, "yes"):
				f.skipMe = true
			case equalFold(val, "no"):
				f.skipMe = false
			default:
				return errSyntax
			}
		default:
			return errSyntax
		}
	}
	c.out.integer(int64(killMatching(c, &f)))
	return nil
}

// killMatching closes every connection f matches and returns how many.
func killMatching(c *client, f *killFilter) int {
	n := 0
	for _, other := range c.srv.clients() {
		if !f.match(other) || (other == c && f.skipMe) {
			continue
		}
		n++
		if other == c {
			c.quit = true // after this reply, as Redis does
			continue
		}
		c.srv.kill(other)
	}
	return n
}

// clients returns the open connections in the order they were accepted,
// leaving out those CLIENT KILL has already asked to close: as in Redis, a
// killed connection is gone from CLIENT LIST, and from a second kill, as
// soon as the kill returns, although its owner may close it a moment later.
func (s *Server) clients() []*client {
	s.mu.Lock()
	list := make([]*client, 0, len(s.open))
	for c := range s.open {
		if !c.killed.Load() {
			list = append(list, c)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(list, func(a, b *client) int { return cmp.Compare(a.id, b.id) })
	return list
}

// kill asks the goroutine that owns c to close it: an event loop is sent
// the request; a connection's own goroutine is woken from any read or write
// by a deadline in the past, and sees c.killed. Nothing here touches c's
// other state. Safe from any goroutine.
func (s *Server) kill(c *client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, open := s.open[c]; !open {
		return // already closed
	}
	c.killed.Store(true)
	// Holding s.mu keeps c open (closing it takes s.mu), so its event loop
	// is still running and its descriptors valid while it is woken.
	if c.loop != nil {
		c.loop.requestClose(c)
	} else {
		c.nc.SetDeadline(time.Unix(1, 0))
	}
}

// clientInfo is what CLIENT LIST shows of a connection.
type clientInfo struct {
	id                   uint64
	addr, laddr          string
	fd                   int
	name, libName, libVr string
	cmd                  string // "" before the first command
	created, lastRead    int64  // Clock ns; monotonic ns
	proto                int
	multi                int // queued commands; -1 outside MULTI
	qbuf, qbufFree       int // bytes received not yet parsed; free space in the read buffer
	rbs, rbp             int // read buffer size; its peak
	argvMem, multiMem    int // the current command's argument bytes; the MULTI queue's bytes
	obl, omem            int // reply bytes not yet written; the reply buffer's size
	writing              bool
}

// publication is what a connection last published of itself, for other
// connections' CLIENT LIST. The owner writes it under mu at the end of
// each pipeline (wrote), and before a write that may block; readers take
// mu. It is the only part of a client other goroutines read.
type publication struct {
	mu   sync.Mutex
	info clientInfo
}

// snapshot describes the connection from its owner's state.
func (c *client) snapshot() clientInfo {
	in := clientInfo{
		id: c.id, addr: c.addr, laddr: c.laddr, fd: c.fd,
		name: c.name, libName: c.libName, libVr: c.libVer, cmd: c.lastCmd,
		created: c.created, lastRead: c.lastRead, proto: c.out.proto, multi: -1,
		qbuf: c.rd.buffered(), qbufFree: len(c.rd.buf) - c.rd.end, rbs: len(c.rd.buf), rbp: c.rd.peak,
		obl: len(c.out.b), omem: cap(c.out.b),
	}
	if c.inMulti {
		in.multi = len(c.queue)
		in.multiMem = int(c.queuedBytes) + int(c.queuedArgs)*int(sliceHeaderSize)
	}
	if c.conn != nil {
		in.obl -= c.conn.written
		in.writing = c.conn.blocked
	}
	return in
}

// ownInfo describes the connection running CLIENT INFO or LIST, args being
// that command.
func (c *client) ownInfo(args [][]byte) clientInfo {
	in := c.snapshot()
	for _, a := range args {
		in.argvMem += len(a)
	}
	return in
}

// publish makes the connection's current state visible to CLIENT LIST.
func (c *client) publish() {
	in := c.snapshot()
	c.pub.mu.Lock()
	c.pub.info = in
	c.pub.mu.Unlock()
}

// publishWriting marks the connection as writing replies, before a write
// that may block (the goroutine model's; an event loop publishes when a
// write blocks).
func (c *client) publishWriting() {
	in := c.snapshot()
	in.writing = true
	c.pub.mu.Lock()
	c.pub.info = in
	c.pub.mu.Unlock()
}

func (c *client) publishedInfo() clientInfo {
	c.pub.mu.Lock()
	defer c.pub.mu.Unlock()
	in := c.pub.info
	if in.id == 0 { // not yet published: its first pipeline is under way
		in = clientInfo{id: c.id, addr: c.addr, laddr: c.laddr, fd: c.fd, created: c.created, lastRead: c.accepted, multi: -1, proto: 2}
	}
	return in
}

// appendTo appends the CLIENT LIST line for in (ending in a newline), with
// Redis 7.2's fields in its order. Fields that describe features rlserver
// does not have (databases, Pub/Sub, tracking redirection, users) have the
// value Redis shows for a client not using them.
func (in clientInfo) appendTo(b []byte, s *Server) []byte {
	num := func(name string, n int64) {
		b = append(b, ' ')
		b = append(b, name...)
		b = append(b, '=')
		b = strconv.AppendInt(b, n, 10)
	}
	str := func(name, v string) {
		b = append(b, ' ')
		b = append(b, name...)
		b = append(b, '=')
		b = append(b, v...)
	}
	b = append(b, "id="...)
	b = strconv.AppendUint(b, in.id, 10)
	str("addr", in.addr)
	str("laddr", in.laddr)
	num("fd", int64(in.fd))
	str("name", in.name)
	num("age", (s.cfg.Clock()-in.created)/int64(time.Second))
	num("idle", (s.mono()-in.lastRead)/int64(time.Second))
	flags := "N"
	if in.multi >= 0 {
		flags = "x"
	}
	str("flags", flags)
	b = append(b, " db=0 sub=0 psub=0 ssub=0"...)
	num("multi", int64(in.multi))
	num("qbuf", int64(in.qbuf))
	num("qbuf-free", int64(in.qbufFree))
	num("argv-mem", int64(in.argvMem))
	num("multi-mem", int64(in.multiMem))
	num("rbs", int64(in.rbs))
	num("rbp", int64(in.rbp))
	num("obl", int64(in.obl))
	num("oll", 0)
	num("omem", int64(in.omem))
	num("tot-mem", int64(in.rbs+in.omem+in.argvMem+in.multiMem))
	events := "r"
	if in.writing {
		events = "rw"
	}
	str("events", events)
	cmd := in.cmd
	if cmd == "" {
		cmd = "NULL"
	}
	str("cmd", cmd)
	b = append(b, " user=default redir=-1"...)
	num("resp", int64(in.proto))
	str("lib-name", in.libName)
	str("lib-ver", in.libVr)
	return append(b, '\n')
}
