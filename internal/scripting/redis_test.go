package scripting

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The differential tests run scripts through redis-server 7.0 (when it is
// installed) and through the engine, whose Caller forwards every
// redis.call to the same redis-server, and compare the replies byte for
// byte: only the Lua side can differ.

var (
	redisOnce    sync.Once
	redisProc    *exec.Cmd
	redisSocket  string
	redisSkipMsg string
	redisTmp     string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if redisProc != nil {
		_ = redisProc.Process.Kill()
		_ = redisProc.Wait()
	}
	if redisTmp != "" {
		_ = os.RemoveAll(redisTmp)
	}
	os.Exit(code)
}

// needRedis starts redis-server once for the package, on a unix socket, or
// skips the test if no redis-server 7.0 is installed.
func needRedis(t *testing.T) {
	t.Helper()
	redisOnce.Do(startRedis)
	if redisSkipMsg != "" {
		t.Skip(redisSkipMsg)
	}
}

func startRedis() {
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		redisSkipMsg = "redis-server is not installed: the differential tests against Redis 7.0 are skipped"
		return
	}
	if !strings.Contains(string(out), "v=7.0.") {
		redisSkipMsg = fmt.Sprintf("redis-server is not version 7.0 (%s): the differential tests are skipped", strings.TrimSpace(string(out)))
		return
	}
	redisTmp, err = os.MkdirTemp("", "scripting-redis")
	if err != nil {
		redisSkipMsg = err.Error()
		return
	}
	redisSocket = filepath.Join(redisTmp, "redis.sock")
	redisProc = exec.Command("redis-server", "--port", "0", "--unixsocket", redisSocket, "--save", "",
		"--appendonly", "no", "--dir", redisTmp, "--lua-time-limit", "5000", "--enable-debug-command", "yes")
	dieWithTest(redisProc)
	if err := redisProc.Start(); err != nil {
		redisSkipMsg, redisProc = "cannot start redis-server: "+err.Error(), nil
		return
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unix", redisSocket); err == nil {
			c.Close()
			return
		}
	}
	redisSkipMsg = "redis-server did not open its socket within 10 s"
}

// redisConn is a raw RESP connection to the test redis-server.
type redisConn struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func dialRedis(t *testing.T, proto int) *redisConn {
	t.Helper()
	needRedis(t)
	c, err := net.Dial("unix", redisSocket)
	if err != nil {
		t.Fatal(err)
	}
	rc := &redisConn{t: t, conn: c, r: bufio.NewReader(c)}
	t.Cleanup(func() { c.Close() })
	rc.do("HELLO", strconv.Itoa(proto))
	return rc
}

// do sends a command and returns its raw reply.
func (c *redisConn) do(args ...string) []byte {
	c.t.Helper()
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	reply, err := c.doBytes(b, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	return reply
}

func (c *redisConn) doBytes(args [][]byte, out []byte) ([]byte, error) {
	var req []byte
	req = appendPrefixed(req, '*', int64(len(args)))
	for _, a := range args {
		req = appendBulk(req, string(a))
	}
	if err := c.conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return nil, err
	}
	if _, err := c.conn.Write(req); err != nil {
		return nil, err
	}
	return readRaw(c.r, out)
}

// readRaw appends the raw bytes of one reply.
func readRaw(r *bufio.Reader, out []byte) ([]byte, error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return out, err
	}
	out = append(out, line...)
	if len(line) < 3 {
		return out, errors.New("short line")
	}
	n, _ := strconv.Atoi(string(line[1 : len(line)-2]))
	switch line[0] {
	case '$', '=', '!':
		if n < 0 {
			return out, nil
		}
		buf := make([]byte, n+2)
		if _, err := ioReadFull(r, buf); err != nil {
			return out, err
		}
		return append(out, buf...), nil
	case '*', '~', '>', '%', '|':
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for i := 0; i < n; i++ {
			if out, err = readRaw(r, out); err != nil {
				return out, err
			}
		}
		if line[0] == '|' {
			return readRaw(r, out)
		}
	}
	return out, nil
}

func ioReadFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// redisCaller is a Caller that runs each command on redis-server, with the
// checks Redis makes before running a command from a script, read from
// COMMAND INFO.
type redisCaller struct {
	t     *testing.T
	conns map[int]*redisConn
	info  map[string]commandInfo
}

type commandInfo struct {
	known bool
	arity int
	flags map[string]bool
}

func newRedisCaller(t *testing.T) *redisCaller {
	return &redisCaller{t: t, conns: map[int]*redisConn{2: dialRedis(t, 2), 3: dialRedis(t, 3)}, info: map[string]commandInfo{}}
}

func (c *redisCaller) commandInfo(name string) commandInfo {
	if ci, ok := c.info[name]; ok {
		return ci
	}
	raw := c.conns[2].do("COMMAND", "INFO", name)
	v, _, err := parseTestReply(raw)
	if err != nil {
		c.t.Fatal(err)
	}
	ci := commandInfo{flags: map[string]bool{}}
	if entry, ok := v.([]any)[0].([]any); ok {
		ci.known = true
		ci.arity = int(entry[1].(int64))
		for _, f := range entry[2].([]any) {
			ci.flags[strings.TrimPrefix(f.(string), "+")] = true
		}
	}
	c.info[name] = ci
	return ci
}

func (c *redisCaller) Call(args [][]byte, proto int, readOnly bool, out []byte) ([]byte, bool, error) {
	ci := c.commandInfo(strings.ToLower(string(args[0])))
	switch {
	case !ci.known:
		return out, false, ErrUnknownCommand
	case ci.arity > 0 && len(args) != ci.arity, ci.arity < 0 && len(args) < -ci.arity:
		return out, false, ErrWrongArity
	case ci.flags["noscript"]:
		return out, false, ErrNotAllowed
	case readOnly && (ci.flags["write"] || ci.flags["may_replicate"]):
		return out, false, ErrWriteFromReadOnly
	}
	reply, err := c.conns[proto].doBytes(args, out)
	return reply, ci.flags["write"], err
}

// parseTestReply parses one RESP2/RESP3 reply into Go values for
// comparisons: int64, float64 (doubles), string (bulk, status with a "+"
// prefix kept out: plain), []any, map[string]any rendered as []any pairs,
// nil, bool, and error for error replies.
func parseTestReply(b []byte) (any, []byte, error) {
	i := bytes.Index(b, []byte("\r\n"))
	if i < 1 {
		return nil, b, errors.New("no line")
	}
	line, rest := string(b[1:i]), b[i+2:]
	switch b[0] {
	case '+':
		return "+" + line, rest, nil
	case '-':
		return errors.New(line), rest, nil
	case ':':
		n, err := strconv.ParseInt(line, 10, 64)
		return n, rest, err
	case ',':
		f, err := strconv.ParseFloat(line, 64)
		return f, rest, err
	case '#':
		return line == "t", rest, nil
	case '_':
		return nil, rest, nil
	case '(':
		return "(" + line, rest, nil
	case '$', '=':
		n, _ := strconv.Atoi(line)
		if n < 0 {
			return nil, rest, nil
		}
		return string(rest[:n]), rest[n+2:], nil
	case '*', '~', '%':
		n, _ := strconv.Atoi(line)
		if n < 0 {
			return nil, rest, nil
		}
		if b[0] == '%' {
			n *= 2
		}
		items := make([]any, n)
		for j := range items {
			var err error
			if items[j], rest, err = parseTestReply(rest); err != nil {
				return nil, rest, err
			}
		}
		return items, rest, nil
	}
	return nil, rest, fmt.Errorf("unknown type %q", b[0])
}
