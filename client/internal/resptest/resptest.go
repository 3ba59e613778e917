// Package resptest is a small RESP server for tests of the client side:
// it answers the handshake go-redis sends (HELLO, CLIENT SETINFO, PING) and
// RL.ALLOW, RL.PEEK, RL.ACQUIRE, RL.REFUND and RL.RULE GET, deciding with
// internal/algorithms under rules the test sets, on a clock the test may
// set. It stands in for the server's RL.ACQUIRE and RL.REFUND until the real
// server has them, replying in the shapes the client expects (see
// docs/gateway.md):
//
//	RL.ACQUIRE key rule n       [granted, limit, remaining, retry_after_ms,
//	                             reset_after_ms, delay_ms, granted_at_ns]
//	                            (RESP3: a map with those names)
//	RL.REFUND key rule n at_ns  integer: units taken back
//
// One mutex serialises every decision, so each is atomic per key as the
// real server's are.
package resptest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/algorithms"
)

// Rule is a rule the server knows, with its definition as RL.RULE GET
// reports it.
type Rule struct {
	Algorithm algorithms.Algorithm
	Limit     int64
	Window    time.Duration
	Burst     int64 // 0: none
}

func (r Rule) params() algorithms.Params {
	c := r.Limit
	if r.Burst > 0 {
		c = r.Burst
	}
	return algorithms.Params{Algorithm: r.Algorithm, Limit: r.Limit, Window: int64(r.Window), Capacity: c}
}

// Server is a running fake server.
type Server struct {
	ln     net.Listener
	wg     sync.WaitGroup
	closed chan struct{}

	mu     sync.Mutex
	rules  map[string]Rule
	states map[[2]string]algorithms.State
	counts map[string]int64
	now    func() int64
	delay  time.Duration
	six    bool // RL.ACQUIRE without granted_at_ns
	conns  map[net.Conn]struct{}
}

// Start serves on 127.0.0.1:0 until the test ends.
func Start(t testing.TB, rules map[string]Rule) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{
		ln: ln, closed: make(chan struct{}), rules: rules,
		states: map[[2]string]algorithms.State{}, counts: map[string]int64{},
		now: func() int64 { return time.Now().UnixNano() }, conns: map[net.Conn]struct{}{},
	}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.Close)
	return s
}

// Addr is the address to dial.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// SetClock makes the server decide at the instants clock returns (Unix ns).
func (s *Server) SetClock(clock func() int64) {
	s.mu.Lock()
	s.now = clock
	s.mu.Unlock()
}

// SetDelay makes every command's reply wait d.
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	s.delay = d
	s.mu.Unlock()
}

// SixFieldGrants makes RL.ACQUIRE reply with six fields, without the
// grant's instant, as the issue first specified it.
func (s *Server) SixFieldGrants() {
	s.mu.Lock()
	s.six = true
	s.mu.Unlock()
}

// Count returns how many times a command (upper case, e.g. "RL.ACQUIRE")
// was received.
func (s *Server) Count(cmd string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[cmd]
}

// Peek returns what RL.PEEK would report for key under rule, uncharged.
func (s *Server) Peek(key, rule string) algorithms.Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	return algorithms.Peek(s.rules[rule].params(), s.states[[2]string{key, rule}], s.now(), 1)
}

// Close stops the server and waits for its goroutines.
func (s *Server) Close() {
	select {
	case <-s.closed:
		return
	default:
	}
	close(s.closed)
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

// conn is one client connection: its protocol version and writer.
type conn struct {
	w     *bufio.Writer
	proto int
}

func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	r := bufio.NewReader(c)
	cn := &conn{w: bufio.NewWriter(c), proto: 2}
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		s.mu.Lock()
		delay := s.delay
		s.mu.Unlock()
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-s.closed:
				return
			}
		}
		s.handle(cn, args)
		if r.Buffered() == 0 {
			if cn.w.Flush() != nil {
				return
			}
		}
	}
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	if len(line) == 0 || line[0] != '*' {
		return nil, errors.New("resptest: expected an array")
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 1 || n > 1024 {
		return nil, errors.New("resptest: bad array length")
	}
	args := make([]string, n)
	for i := range args {
		line, err := readLine(r)
		if err != nil {
			return nil, err
		}
		if len(line) == 0 || line[0] != '$' {
			return nil, errors.New("resptest: expected a bulk string")
		}
		size, err := strconv.Atoi(line[1:])
		if err != nil || size < 0 || size > 1<<20 {
			return nil, errors.New("resptest: bad bulk length")
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}

func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

func (c *conn) integer(n int64) { fmt.Fprintf(c.w, ":%d\r\n", n) }
func (c *conn) simple(s string) { fmt.Fprintf(c.w, "+%s\r\n", s) }
func (c *conn) err(s string)    { fmt.Fprintf(c.w, "-%s\r\n", s) }
func (c *conn) bulk(s string)   { fmt.Fprintf(c.w, "$%d\r\n%s\r\n", len(s), s) }

// mapHeader starts a map of n pairs: a map under RESP3, a flat array of
// 2n elements under RESP2.
func (c *conn) mapHeader(n int) {
	if c.proto == 3 {
		fmt.Fprintf(c.w, "%%%d\r\n", n)
	} else {
		fmt.Fprintf(c.w, "*%d\r\n", 2*n)
	}
}

// fields writes named integers: an array under RESP2, a map under RESP3.
func (c *conn) fields(names []string, values []int64) {
	if c.proto == 3 {
		fmt.Fprintf(c.w, "%%%d\r\n", len(values))
		for i, v := range values {
			c.bulk(names[i])
			c.integer(v)
		}
		return
	}
	fmt.Fprintf(c.w, "*%d\r\n", len(values))
	for _, v := range values {
		c.integer(v)
	}
}

var (
	decisionNames = []string{"allowed", "limit", "remaining", "retry_after_ms", "reset_after_ms", "delay_ms"}
	grantNames    = []string{"granted", "limit", "remaining", "retry_after_ms", "reset_after_ms", "delay_ms", "granted_at_ns"}
)

func ceilMillis(ns int64) int64 { return (ns + 999_999) / 1_000_000 }

func decisionValues(first int64, d algorithms.Decision) []int64 {
	return []int64{first, d.Limit, d.Remaining, ceilMillis(d.RetryAfter), ceilMillis(d.ResetAfter), ceilMillis(d.Delay)}
}

func (s *Server) handle(c *conn, args []string) {
	name := strings.ToUpper(args[0])
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[name]++
	switch name {
	case "HELLO":
		if len(args) > 1 {
			v, err := strconv.Atoi(args[1])
			if err != nil || (v != 2 && v != 3) {
				c.err("NOPROTO unsupported protocol version")
				return
			}
			c.proto = v
		}
		c.mapHeader(3)
		c.bulk("server")
		c.bulk("resptest")
		c.bulk("proto")
		c.integer(int64(c.proto))
		c.bulk("mode")
		c.bulk("standalone")
	case "CLIENT", "SELECT":
		c.simple("OK")
	case "PING":
		c.simple("PONG")
	case "RL.ALLOW", "RL.PEEK":
		s.decide(c, name, args)
	case "RL.ACQUIRE":
		s.acquire(c, args)
	case "RL.REFUND":
		s.refund(c, args)
	case "RL.RULE":
		s.ruleGet(c, args)
	default:
		c.err(fmt.Sprintf("ERR unknown command '%s', with args beginning with: ", args[0]))
	}
}

// lookup parses key rule n from args[1:4]; it writes the error reply and
// returns false on failure. s.mu is held.
func (s *Server) lookup(c *conn, args []string, minArgs, maxArgs int) (key, rule string, p algorithms.Params, n int64, ok bool) {
	if len(args) < minArgs || len(args) > maxArgs {
		c.err(fmt.Sprintf("ERR wrong number of arguments for '%s' command", strings.ToLower(args[0])))
		return "", "", p, 0, false
	}
	r, found := s.rules[args[2]]
	if !found {
		c.err(fmt.Sprintf("ERR unknown rule '%s'", args[2]))
		return "", "", p, 0, false
	}
	n = 1
	if len(args) > 3 {
		var err error
		if n, err = strconv.ParseInt(args[3], 10, 64); err != nil {
			c.err("ERR value is not an integer or out of range")
			return "", "", p, 0, false
		}
		if n < 1 {
			c.err(fmt.Sprintf("ERR invalid cost '%d': must be a positive integer", n))
			return "", "", p, 0, false
		}
	}
	return args[1], args[2], r.params(), n, true
}

func (s *Server) decide(c *conn, name string, args []string) {
	key, rule, p, cost, ok := s.lookup(c, args, 3, 4)
	if !ok {
		return
	}
	if cost > p.Capacity {
		c.err(fmt.Sprintf("ERR cost %d exceeds the capacity %d of rule '%s'; such a request could never be allowed", cost, p.Capacity, rule))
		return
	}
	k := [2]string{key, rule}
	var d algorithms.Decision
	if name == "RL.PEEK" {
		d = algorithms.Peek(p, s.states[k], s.now(), cost)
	} else {
		s.states[k], d = algorithms.Decide(p, s.states[k], s.now(), cost)
	}
	allowed := int64(0)
	if d.Allowed {
		allowed = 1
	}
	c.fields(decisionNames, decisionValues(allowed, d))
}

func (s *Server) acquire(c *conn, args []string) {
	key, rule, p, n, ok := s.lookup(c, args, 4, 4)
	if !ok {
		return
	}
	k := [2]string{key, rule}
	next, granted, d := algorithms.Acquire(p, s.states[k], s.now(), n)
	s.states[k] = next
	values := append(decisionValues(granted, d), next.Stamp)
	if s.six {
		values = values[:6]
	}
	c.fields(grantNames, values)
}

func (s *Server) refund(c *conn, args []string) {
	key, rule, p, n, ok := s.lookup(c, args, 5, 5)
	if !ok {
		return
	}
	at, err := strconv.ParseInt(args[4], 10, 64)
	if err != nil {
		c.err("ERR value is not an integer or out of range")
		return
	}
	k := [2]string{key, rule}
	next, back := algorithms.Refund(p, s.states[k], s.now(), at, n)
	s.states[k] = next
	c.integer(back)
}

func (s *Server) ruleGet(c *conn, args []string) {
	if len(args) != 3 || !strings.EqualFold(args[1], "GET") {
		c.err("ERR syntax error")
		return
	}
	r, found := s.rules[args[2]]
	if !found {
		c.err(fmt.Sprintf("ERR unknown rule '%s'", args[2]))
		return
	}
	c.mapHeader(5)
	c.bulk("name")
	c.bulk(args[2])
	c.bulk("algorithm")
	c.bulk(r.Algorithm.String())
	c.bulk("limit")
	c.integer(r.Limit)
	c.bulk("window")
	c.bulk(r.Window.String())
	c.bulk("burst")
	c.integer(r.Burst)
}
