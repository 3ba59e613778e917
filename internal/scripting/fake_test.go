package scripting

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// fakeRedis is a tiny in-memory keyspace with the commands the rate-limiter
// libraries' scripts and these tests send, replying as Redis 7.0 does. Its
// clock is injected. It is not safe for concurrent use.
type fakeRedis struct {
	now     time.Time
	strings map[string]string
	lists   map[string][]string
	hashes  map[string]map[string]string
	expires map[string]time.Time
	calls   []string // every command run, for assertions
}

func newFakeRedis(now time.Time) *fakeRedis {
	return &fakeRedis{now: now, strings: map[string]string{}, lists: map[string][]string{},
		hashes: map[string]map[string]string{}, expires: map[string]time.Time{}}
}

// fakeCommand describes a command: arity as Redis counts it (negative: at
// least), and whether it writes.
type fakeCommand struct {
	arity int
	write bool
	run   func(f *fakeRedis, args []string, proto int, out []byte) []byte
}

var fakeCommands map[string]fakeCommand

func init() {
	fakeCommands = map[string]fakeCommand{
		"ping":    {-1, false, func(f *fakeRedis, a []string, _ int, out []byte) []byte { return append(out, "+PONG\r\n"...) }},
		"echo":    {2, false, func(f *fakeRedis, a []string, _ int, out []byte) []byte { return appendBulk(out, a[1]) }},
		"get":     {2, false, (*fakeRedis).get},
		"mget":    {-2, false, (*fakeRedis).mget},
		"set":     {-3, true, (*fakeRedis).set},
		"setex":   {4, true, (*fakeRedis).setex},
		"del":     {-2, true, (*fakeRedis).del},
		"exists":  {-2, false, (*fakeRedis).exists},
		"incr":    {2, true, func(f *fakeRedis, a []string, _ int, out []byte) []byte { return f.incrBy(a[1], "1", out) }},
		"incrby":  {3, true, func(f *fakeRedis, a []string, _ int, out []byte) []byte { return f.incrBy(a[1], a[2], out) }},
		"decr":    {2, true, func(f *fakeRedis, a []string, _ int, out []byte) []byte { return f.incrBy(a[1], "-1", out) }},
		"expire":  {-3, true, func(f *fakeRedis, a []string, _ int, out []byte) []byte { return f.expire(a, time.Second, out) }},
		"pexpire": {-3, true, func(f *fakeRedis, a []string, _ int, out []byte) []byte { return f.expire(a, time.Millisecond, out) }},
		"ttl":     {2, false, func(f *fakeRedis, a []string, _ int, out []byte) []byte { return f.ttl(a[1], time.Second, out) }},
		"pttl":    {2, false, func(f *fakeRedis, a []string, _ int, out []byte) []byte { return f.ttl(a[1], time.Millisecond, out) }},
		"time":    {1, false, (*fakeRedis).time},
		"lpush":   {-3, true, (*fakeRedis).lpush},
		"lrange":  {4, false, (*fakeRedis).lrange},
		"lindex":  {3, false, (*fakeRedis).lindex},
		"ltrim":   {4, true, (*fakeRedis).ltrim},
		"keys":    {2, false, (*fakeRedis).keys},
		"hset":    {-4, true, (*fakeRedis).hset},
		"hgetall": {2, false, (*fakeRedis).hgetall},
		"eval":    {-3, false, nil},
		"multi":   {1, false, nil},
	}
}

// Call is a Caller over the fake.
func (f *fakeRedis) Call(args [][]byte, proto int, readOnly bool, out []byte) ([]byte, bool, error) {
	name := strings.ToLower(string(args[0]))
	cmd, ok := fakeCommands[name]
	switch {
	case !ok:
		return out, false, ErrUnknownCommand
	case cmd.arity > 0 && len(args) != cmd.arity, cmd.arity < 0 && len(args) < -cmd.arity:
		return out, false, ErrWrongArity
	case cmd.run == nil:
		return out, false, ErrNotAllowed
	case cmd.write && readOnly:
		return out, false, ErrWriteFromReadOnly
	}
	a := make([]string, len(args))
	for i, b := range args {
		a[i] = string(b)
	}
	f.calls = append(f.calls, strings.Join(a, " "))
	f.expireDue()
	return cmd.run(f, a, proto, out), cmd.write, nil
}

const (
	errWrongType  = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
	errNotInteger = "-ERR value is not an integer or out of range\r\n"
	errSyntax     = "-ERR syntax error\r\n"
)

func (f *fakeRedis) expireDue() {
	for k, at := range f.expires {
		if !f.now.Before(at) {
			f.remove(k)
		}
	}
}

func (f *fakeRedis) remove(k string) bool {
	_, s := f.strings[k]
	_, l := f.lists[k]
	_, h := f.hashes[k]
	delete(f.strings, k)
	delete(f.lists, k)
	delete(f.hashes, k)
	delete(f.expires, k)
	return s || l || h
}

func (f *fakeRedis) exists1(k string) bool {
	_, s := f.strings[k]
	_, l := f.lists[k]
	_, h := f.hashes[k]
	return s || l || h
}

func (f *fakeRedis) get(a []string, _ int, out []byte) []byte {
	if v, ok := f.strings[a[1]]; ok {
		return appendBulk(out, v)
	}
	if f.exists1(a[1]) {
		return append(out, errWrongType...)
	}
	return append(out, "$-1\r\n"...)
}

func (f *fakeRedis) mget(a []string, _ int, out []byte) []byte {
	out = appendPrefixed(out, '*', int64(len(a)-1))
	for _, k := range a[1:] {
		if v, ok := f.strings[k]; ok {
			out = appendBulk(out, v)
		} else {
			out = append(out, "$-1\r\n"...)
		}
	}
	return out
}

// set supports NX, XX, EX, PX.
func (f *fakeRedis) set(a []string, proto int, out []byte) []byte {
	var nx, xx bool
	var ttl time.Duration
	for i := 3; i < len(a); i++ {
		switch strings.ToUpper(a[i]) {
		case "NX":
			nx = true
		case "XX":
			xx = true
		case "EX", "PX":
			if i+1 >= len(a) {
				return append(out, errSyntax...)
			}
			n, err := strconv.ParseInt(a[i+1], 10, 64)
			if err != nil {
				return append(out, errNotInteger...)
			}
			if n <= 0 {
				return append(out, "-ERR invalid expire time in 'set' command\r\n"...)
			}
			ttl = time.Duration(n) * time.Second
			if strings.ToUpper(a[i]) == "PX" {
				ttl = time.Duration(n) * time.Millisecond
			}
			i++
		default:
			return append(out, errSyntax...)
		}
	}
	if (nx && f.exists1(a[1])) || (xx && !f.exists1(a[1])) {
		if proto == 3 {
			return append(out, "_\r\n"...)
		}
		return append(out, "$-1\r\n"...)
	}
	f.remove(a[1])
	f.strings[a[1]] = a[2]
	if ttl > 0 {
		f.expires[a[1]] = f.now.Add(ttl)
	}
	return append(out, "+OK\r\n"...)
}

func (f *fakeRedis) setex(a []string, proto int, out []byte) []byte {
	return f.set([]string{"set", a[1], a[3], "EX", a[2]}, proto, out)
}

func (f *fakeRedis) del(a []string, _ int, out []byte) []byte {
	n := 0
	for _, k := range a[1:] {
		if f.remove(k) {
			n++
		}
	}
	return appendPrefixed(out, ':', int64(n))
}

func (f *fakeRedis) exists(a []string, _ int, out []byte) []byte {
	n := 0
	for _, k := range a[1:] {
		if f.exists1(k) {
			n++
		}
	}
	return appendPrefixed(out, ':', int64(n))
}

func (f *fakeRedis) incrBy(k, by string, out []byte) []byte {
	d, err := strconv.ParseInt(by, 10, 64)
	if err != nil {
		return append(out, errNotInteger...)
	}
	if f.exists1(k) {
		if _, ok := f.strings[k]; !ok {
			return append(out, errWrongType...)
		}
	}
	v := int64(0)
	if s, ok := f.strings[k]; ok {
		if v, err = strconv.ParseInt(s, 10, 64); err != nil {
			return append(out, errNotInteger...)
		}
	}
	v += d
	f.strings[k] = strconv.FormatInt(v, 10)
	return appendPrefixed(out, ':', v)
}

func (f *fakeRedis) expire(a []string, unit time.Duration, out []byte) []byte {
	n, err := strconv.ParseInt(a[2], 10, 64)
	if err != nil {
		return append(out, errNotInteger...)
	}
	if !f.exists1(a[1]) {
		return append(out, ":0\r\n"...)
	}
	if n <= 0 {
		f.remove(a[1])
	} else {
		f.expires[a[1]] = f.now.Add(time.Duration(n) * unit)
	}
	return append(out, ":1\r\n"...)
}

func (f *fakeRedis) ttl(k string, unit time.Duration, out []byte) []byte {
	if !f.exists1(k) {
		return append(out, ":-2\r\n"...)
	}
	at, ok := f.expires[k]
	if !ok {
		return append(out, ":-1\r\n"...)
	}
	left := at.Sub(f.now)
	return appendPrefixed(out, ':', int64((left+unit/2)/unit))
}

func (f *fakeRedis) time(_ []string, _ int, out []byte) []byte {
	out = append(out, "*2\r\n"...)
	out = appendBulk(out, strconv.FormatInt(f.now.Unix(), 10))
	return appendBulk(out, strconv.FormatInt(int64(f.now.Nanosecond()/1000), 10))
}

func (f *fakeRedis) list(k string) ([]string, bool) {
	if _, ok := f.lists[k]; !ok && f.exists1(k) {
		return nil, false
	}
	return f.lists[k], true
}

func (f *fakeRedis) lpush(a []string, _ int, out []byte) []byte {
	l, ok := f.list(a[1])
	if !ok {
		return append(out, errWrongType...)
	}
	for _, v := range a[2:] {
		l = append([]string{v}, l...)
	}
	f.lists[a[1]] = l
	return appendPrefixed(out, ':', int64(len(l)))
}

// span converts Redis's start/stop (negative from the end, inclusive) to a
// slice range of a list of n.
func span(startS, stopS string, n int) (int, int, bool) {
	start, err1 := strconv.Atoi(startS)
	stop, err2 := strconv.Atoi(stopS)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	if start < 0 {
		start = max(0, n+start)
	}
	if stop < 0 {
		stop = n + stop
	}
	stop = min(stop, n-1)
	if start > stop {
		return 0, 0, true
	}
	return start, stop + 1, true
}

func (f *fakeRedis) lrange(a []string, _ int, out []byte) []byte {
	l, ok := f.list(a[1])
	if !ok {
		return append(out, errWrongType...)
	}
	i, j, ok := span(a[2], a[3], len(l))
	if !ok {
		return append(out, errNotInteger...)
	}
	out = appendPrefixed(out, '*', int64(j-i))
	for _, v := range l[i:j] {
		out = appendBulk(out, v)
	}
	return out
}

func (f *fakeRedis) lindex(a []string, proto int, out []byte) []byte {
	l, ok := f.list(a[1])
	if !ok {
		return append(out, errWrongType...)
	}
	i, err := strconv.Atoi(a[2])
	if err != nil {
		return append(out, errNotInteger...)
	}
	if i < 0 {
		i += len(l)
	}
	if i < 0 || i >= len(l) {
		if proto == 3 {
			return append(out, "_\r\n"...)
		}
		return append(out, "$-1\r\n"...)
	}
	return appendBulk(out, l[i])
}

func (f *fakeRedis) ltrim(a []string, _ int, out []byte) []byte {
	l, ok := f.list(a[1])
	if !ok {
		return append(out, errWrongType...)
	}
	i, j, ok := span(a[2], a[3], len(l))
	if !ok {
		return append(out, errNotInteger...)
	}
	if i >= j {
		f.remove(a[1])
	} else {
		f.lists[a[1]] = slices.Clone(l[i:j])
	}
	return append(out, "+OK\r\n"...)
}

func (f *fakeRedis) keys(a []string, _ int, out []byte) []byte {
	var all []string
	for k := range f.strings {
		all = append(all, k)
	}
	for k := range f.lists {
		all = append(all, k)
	}
	for k := range f.hashes {
		all = append(all, k)
	}
	slices.Sort(all)
	var matched []string
	for _, k := range all {
		if globMatch(a[1], k) {
			matched = append(matched, k)
		}
	}
	out = appendPrefixed(out, '*', int64(len(matched)))
	for _, k := range matched {
		out = appendBulk(out, k)
	}
	return out
}

func (f *fakeRedis) hset(a []string, _ int, out []byte) []byte {
	if len(a)%2 != 0 {
		return append(out, "-ERR wrong number of arguments for 'hset' command\r\n"...)
	}
	h, ok := f.hashes[a[1]]
	if !ok {
		if f.exists1(a[1]) {
			return append(out, errWrongType...)
		}
		h = map[string]string{}
		f.hashes[a[1]] = h
	}
	n := 0
	for i := 2; i < len(a); i += 2 {
		if _, ok := h[a[i]]; !ok {
			n++
		}
		h[a[i]] = a[i+1]
	}
	return appendPrefixed(out, ':', int64(n))
}

func (f *fakeRedis) hgetall(a []string, proto int, out []byte) []byte {
	h := f.hashes[a[1]]
	fields := make([]string, 0, len(h))
	for k := range h {
		fields = append(fields, k)
	}
	slices.Sort(fields)
	if proto == 3 {
		out = appendPrefixed(out, '%', int64(len(h)))
	} else {
		out = appendPrefixed(out, '*', int64(2*len(h)))
	}
	for _, k := range fields {
		out = appendBulk(out, k)
		out = appendBulk(out, h[k])
	}
	return out
}

// globMatch is Redis's KEYS pattern with * and ? only ('*' crosses '/').
func globMatch(pattern, s string) bool {
	if pattern == "" {
		return s == ""
	}
	switch pattern[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if globMatch(pattern[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && globMatch(pattern[1:], s[1:])
	}
	return s != "" && s[0] == pattern[0] && globMatch(pattern[1:], s[1:])
}
