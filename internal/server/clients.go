package server

import (
	"cmp"
	"slices"
	"strconv"
	"sync"
	"time"
)

// CLIENT LIST and CLIENT KILL reach connections other goroutines own. A
// connection publishes what CLIENT LIST shows of it (publication) at the end
// of each pipeline; CLIENT KILL never touches another connection's state, it
// asks the connection's owner to close it (Server.kill).

// KillFilter is CLIENT KILL's filter; zero fields match everything.
type KillFilter struct {
	ID                uint64
	Addr, LocalAddr   string
	HasAddr, HasLocal bool
	// None matches no connection (TYPE master|replica|pubsub, which no
	// connection is).
	None bool
	// SkipMe leaves the connection asking out.
	SkipMe bool
}

func (f *KillFilter) match(c *Conn) bool {
	return !f.None && (f.ID == 0 || c.id == f.ID) && (!f.HasAddr || c.addr == f.Addr) && (!f.HasLocal || c.laddr == f.LocalAddr)
}

// List returns CLIENT LIST's lines (one per connection, in connection
// order): every connection, or with all false those whose IDs are in ids.
// argv is the command asking, whose argument bytes this connection's own
// line counts.
func (c *Conn) List(ids []uint64, all bool, argv [][]byte) []byte {
	var out []byte
	for _, other := range c.srv.clients() {
		if !all && !slices.Contains(ids, other.id) {
			continue
		}
		if other == c {
			out = c.ownInfo(argv).appendTo(out, c.srv)
		} else {
			out = other.publishedInfo().appendTo(out, c.srv)
		}
	}
	return out
}

// Info returns CLIENT INFO's line for this connection, argv being that
// command.
func (c *Conn) Info(argv [][]byte) []byte { return c.ownInfo(argv).appendTo(nil, c.srv) }

// Kill closes every connection f matches and returns how many: others by
// their owners, at once; c itself (unless f.SkipMe) once this command's
// reply is written, as Redis does.
func (c *Conn) Kill(f KillFilter) int {
	n := 0
	for _, other := range c.srv.clients() {
		if !f.match(other) || (other == c && f.SkipMe) {
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
func (s *Server) clients() []*Conn {
	s.mu.Lock()
	list := make([]*Conn, 0, len(s.open))
	for c := range s.open {
		if !c.killed.Load() {
			list = append(list, c)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(list, func(a, b *Conn) int { return cmp.Compare(a.id, b.id) })
	return list
}

// kill asks the goroutine that owns c to close it: an event loop is sent
// the request; a connection's own goroutine is woken from any read or write
// by a deadline in the past, and sees c.killed. Nothing here touches c's
// other state. Safe from any goroutine.
func (s *Server) kill(c *Conn) {
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
func (c *Conn) snapshot() clientInfo {
	in := clientInfo{
		id: c.id, addr: c.addr, laddr: c.laddr, fd: c.fd,
		name: c.name, libName: c.libName, libVr: c.libVer, cmd: c.lastCmd,
		created: c.created, lastRead: c.lastRead, proto: c.out.Proto(), multi: -1,
		qbuf: c.rd.Buffered(), qbufFree: c.rd.Free(), rbs: c.rd.Size(), rbp: c.rd.Peak(),
		obl: c.out.Len(), omem: c.out.Cap(),
	}
	in.multi, in.multiMem = c.session.Multi()
	if c.conn != nil {
		in.obl -= c.conn.written
		in.writing = c.conn.blocked
	}
	return in
}

// ownInfo describes the connection running CLIENT INFO or LIST, args being
// that command.
func (c *Conn) ownInfo(args [][]byte) clientInfo {
	in := c.snapshot()
	for _, a := range args {
		in.argvMem += len(a)
	}
	return in
}

// publish makes the connection's current state visible to CLIENT LIST.
func (c *Conn) publish() {
	in := c.snapshot()
	c.pub.mu.Lock()
	c.pub.info = in
	c.pub.mu.Unlock()
}

// publishWriting marks the connection as writing replies, before a write
// that may block (the goroutine model's; an event loop publishes when a
// write blocks).
func (c *Conn) publishWriting() {
	in := c.snapshot()
	in.writing = true
	c.pub.mu.Lock()
	c.pub.info = in
	c.pub.mu.Unlock()
}

func (c *Conn) publishedInfo() clientInfo {
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
