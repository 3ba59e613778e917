package scripting

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

// Script is a compiled script. Its compiled form is immutable and shared by
// every engine state that runs it, so a script is compiled once however many
// shards run it.
type Script struct {
	sha      [20]byte
	hexSHA   string
	source   string
	proto    *lua.FunctionProto
	noWrites bool // a "#!lua flags=no-writes" shebang
	shebang  bool
	lastUsed atomic.Uint64 // the cache's epoch at the latest lookup, for eviction
	// wholeKeyspace: a run of the script reached beyond the keys it
	// declared (MarkWholeKeyspace), so its runs are best started with
	// all of the keyspace in reach.
	wholeKeyspace atomic.Bool
	// calls are the script's redis.call and redis.pcall calls, read from
	// its syntax; callsKnown is false when the reading could not prove
	// they are all (see static.go). reach caches MayReachUndeclared.
	calls      []Call
	callsKnown bool
	reach      atomic.Int32
}

// SHA returns the script's SHA1 as 40 lower-case hex digits, the name EVALSHA
// takes.
func (s *Script) SHA() string { return s.hexSHA }

// Source returns the script's text, shebang included, as it was loaded; a
// snapshot persists it and loads it back with Cache.Load.
func (s *Script) Source() string { return s.source }

// ReadOnly reports whether the script declared "#!lua flags=no-writes": it
// runs as if by EVAL_RO even under EVAL, and EVAL_RO may run it.
func (s *Script) ReadOnly() bool { return s.noWrites }

// WholeKeyspace reports whether a run of the script has reached beyond the
// keys it declared (see Rerun): the server then gives its later runs the
// whole keyspace from the start, so they run once. The mark lasts as long
// as the script is cached.
func (s *Script) WholeKeyspace() bool { return s.wholeKeyspace.Load() }

// MarkWholeKeyspace records that a run of the script reached beyond the keys
// it declared.
func (s *Script) MarkWholeKeyspace() { s.wholeKeyspace.Store(true) }

// CacheLimits bound what the script cache holds. Redis 7.0 keeps every script
// forever; rlserver keeps the most recently used ones within these bounds and
// forgets the least recently used script when a new one would pass either.
// A client whose script was forgotten gets NOSCRIPT from EVALSHA, which every
// client library answers by sending EVAL or SCRIPT LOAD again.
type CacheLimits struct {
	// MaxScripts is the most scripts kept (0: DefaultCacheLimits'). An
	// application that builds a new script text per request (values inlined
	// instead of passed as ARGV) would otherwise fill memory.
	MaxScripts int
	// MaxBytes is the most source bytes kept in all (0: the default). The
	// compiled form takes a few times the source.
	MaxBytes int
	// MaxScriptBytes is the longest script accepted (0: the default); a
	// longer one fails to compile. It bounds the work and memory one
	// compilation takes.
	MaxScriptBytes int
}

// DefaultCacheLimits keep up to 10 000 scripts and 64 MiB of source, each
// script at most 1 MiB: far above what rate-limiter libraries load (two to
// five scripts of under 2 KiB each).
var DefaultCacheLimits = CacheLimits{MaxScripts: 10_000, MaxBytes: 64 << 20, MaxScriptBytes: 1 << 20}

// maxSyntaxDepth bounds how deeply a script's syntax nests (blocks,
// expressions, elseif chains). gopher-lua compiles deep nesting in time
// quadratic in the depth, uninterruptibly; Lua 5.1 itself refuses more than
// 200 levels of most constructs.
const maxSyntaxDepth = 1000

// Cache holds compiled scripts by SHA1. It is safe for concurrent use; a
// lookup takes a read lock and allocates nothing.
type Cache struct {
	limits CacheLimits
	// epoch advances at every insertion; a lookup stamps the script with the
	// current epoch, so eviction forgets a script not used since the oldest
	// insertion. Lookups only read it, and write a script's stamp only when
	// the epoch moved, so concurrent EVALSHAs share no written cache line.
	epoch atomic.Uint64

	mu      sync.RWMutex
	scripts map[[20]byte]*Script
	bytes   int
}

// NewCache returns an empty cache bounded by limits; zero fields take
// DefaultCacheLimits' values.
func NewCache(limits CacheLimits) *Cache {
	if limits.MaxScripts <= 0 {
		limits.MaxScripts = DefaultCacheLimits.MaxScripts
	}
	if limits.MaxBytes <= 0 {
		limits.MaxBytes = DefaultCacheLimits.MaxBytes
	}
	if limits.MaxScriptBytes <= 0 {
		limits.MaxScriptBytes = min(DefaultCacheLimits.MaxScriptBytes, limits.MaxBytes)
	}
	return &Cache{limits: limits, scripts: make(map[[20]byte]*Script)}
}

// Load returns the script with this source, compiling and caching it if it
// is not cached yet: SCRIPT LOAD, and EVAL, which caches what it runs as
// Redis 7.0 does. A source that does not compile gives an *Error in Redis's
// words ("ERR Error compiling script (new function): user_script:1: ...").
func (c *Cache) Load(src []byte) (*Script, error) {
	sum := sha1.Sum(src)
	if s := c.lookup(sum); s != nil {
		return s, nil
	}
	s, err := compile(sum, src, c.limits.MaxScriptBytes)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.scripts[sum]; old != nil {
		return old, nil // compiled concurrently by another caller
	}
	s.lastUsed.Store(c.epoch.Add(1))
	c.scripts[sum] = s
	c.bytes += len(s.source)
	c.evictLocked(s)
	return s, nil
}

// Get returns the cached script whose SHA1 is sha, 40 hex digits in either
// case as Redis accepts, or nil (EVALSHA then answers ErrNoScript).
func (c *Cache) Get(sha []byte) *Script {
	var sum [20]byte
	if len(sha) != 2*len(sum) {
		return nil
	}
	if _, err := hex.Decode(sum[:], sha); err != nil {
		return nil
	}
	return c.lookup(sum)
}

// Exists reports for each SHA1 whether its script is cached (SCRIPT EXISTS).
func (c *Cache) Exists(shas ...[]byte) []bool {
	found := make([]bool, len(shas))
	for i, sha := range shas {
		found[i] = c.Get(sha) != nil
	}
	return found
}

// Flush forgets every script (SCRIPT FLUSH). Runs in progress keep the
// scripts they hold.
func (c *Cache) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scripts = make(map[[20]byte]*Script)
	c.bytes = 0
}

// Len returns how many scripts are cached.
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.scripts)
}

// Bytes returns the cached scripts' total source length.
func (c *Cache) Bytes() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.bytes
}

// All returns the cached scripts ordered by SHA1, for a snapshot.
func (c *Cache) All() []*Script {
	c.mu.RLock()
	all := make([]*Script, 0, len(c.scripts))
	for _, s := range c.scripts {
		all = append(all, s)
	}
	c.mu.RUnlock()
	slices.SortFunc(all, func(a, b *Script) int { return bytes.Compare(a.sha[:], b.sha[:]) })
	return all
}

func (c *Cache) lookup(sum [20]byte) *Script {
	c.mu.RLock()
	s := c.scripts[sum]
	c.mu.RUnlock()
	if s != nil {
		if now := c.epoch.Load(); s.lastUsed.Load() != now {
			s.lastUsed.Store(now)
		}
	}
	return s
}

// evictLocked forgets the least recently used scripts (by epoch), never
// keep, until the cache is within its limits. A scan per eviction is O(scripts); evictions
// only follow a compilation, which costs more.
func (c *Cache) evictLocked(keep *Script) {
	for len(c.scripts) > c.limits.MaxScripts || c.bytes > c.limits.MaxBytes {
		var victim *Script
		for _, s := range c.scripts {
			if s != keep && (victim == nil || s.lastUsed.Load() < victim.lastUsed.Load()) {
				victim = s
			}
		}
		if victim == nil {
			return
		}
		delete(c.scripts, victim.sha)
		c.bytes -= len(victim.source)
	}
}

// compile parses and compiles src, whose SHA1 is sum, after its shebang.
func compile(sum [20]byte, src []byte, maxBytes int) (*Script, error) {
	if len(src) > maxBytes {
		return nil, compileError(fmt.Sprintf("user_script:1: the script is %d bytes, more than the %d this server compiles", len(src), maxBytes))
	}
	s := &Script{sha: sum, hexSHA: hex.EncodeToString(sum[:]), source: string(src)}
	body, err := s.readShebang()
	if err != nil {
		return nil, err
	}
	proto, chunk, msg := compileChunk(body, "user_script")
	if msg != "" {
		return nil, compileError(msg)
	}
	s.proto = proto
	s.calls, s.callsKnown = readCalls(chunk)
	return s, nil
}

func compileError(msg string) *Error {
	return &Error{"ERR Error compiling script (new function): " + replyLine(msg)}
}

// readShebang reads a "#!lua [flags=a,b]" first line as Redis 7.0 does and
// returns the source to compile: the shebang line is blanked out but its
// line feed kept, so line numbers in errors stay right.
func (s *Script) readShebang() (string, error) {
	if !strings.HasPrefix(s.source, "#!") {
		return s.source, nil
	}
	end := strings.IndexByte(s.source, '\n')
	if end < 0 {
		return "", &Error{"ERR Invalid script shebang"}
	}
	parts := strings.Fields(s.source[:end])
	if len(parts) == 0 || parts[0] != "#!lua" {
		engine := ""
		if len(parts) > 0 {
			engine = parts[0]
		}
		return "", &Error{"ERR Unexpected engine in script shebang: " + replyLine(engine)}
	}
	for _, p := range parts[1:] {
		flags, ok := strings.CutPrefix(p, "flags=")
		if !ok {
			return "", &Error{"ERR Unknown lua shebang option: " + replyLine(p)}
		}
		for f := range strings.SplitSeq(flags, ",") {
			switch f {
			case "no-writes":
				s.noWrites = true
			case "", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys":
				// Accepted and meaningless here: rlserver has no maxmemory,
				// replicas or cluster slots.
			default:
				return "", &Error{"ERR Unexpected flag in script shebang: " + replyLine(f)}
			}
		}
	}
	s.shebang = true
	return s.source[end:], nil
}

// compileChunk compiles Lua source named name, returning the proto and its
// syntax tree, or the error message in Lua's "name:line: message" form. It
// refuses syntax nested deeper than maxSyntaxDepth before gopher-lua's
// compiler sees it.
func compileChunk(src, name string) (*lua.FunctionProto, []ast.Stmt, string) {
	chunk, err := parse.Parse(strings.NewReader(src), name)
	if err != nil {
		var pe *parse.Error
		if errors.As(err, &pe) {
			line, near := pe.Pos.Line, pe.Token
			if line == parse.EOF {
				line, near = strings.Count(src, "\n")+1, "<eof>"
			}
			return nil, nil, fmt.Sprintf("%s:%d: %s near '%s'", name, line, strings.TrimSpace(pe.Message), near)
		}
		return nil, nil, fmt.Sprintf("%s: %v", name, err)
	}
	if !shallowerThan(reflect.ValueOf(chunk), 0, maxSyntaxDepth) {
		return nil, nil, fmt.Sprintf("%s:1: chunk has too many syntax levels (more than %d)", name, maxSyntaxDepth)
	}
	proto, err := lua.Compile(chunk, name)
	if err != nil {
		var ce *lua.CompileError
		if errors.As(err, &ce) {
			return nil, nil, fmt.Sprintf("%s:%d: %s", name, ce.Line, ce.Message)
		}
		return nil, nil, fmt.Sprintf("%s: %v", name, err)
	}
	// gopher-lua builds a Lua 5.0 "arg" table for every vararg function that
	// does not use "...", the main chunk included, at each call. Lua 5.1's
	// main chunk has none (arg is a missing global in Redis), so the table
	// would only cost a map allocation per run. The register it would fill
	// stays reserved, as the compiled code expects.
	proto.IsVarArg &^= lua.VarArgNeedsArg
	return proto, chunk, ""
}

var (
	exprType = reflect.TypeFor[ast.Expr]()
	stmtType = reflect.TypeFor[ast.Stmt]()
)

// shallowerThan reports whether the syntax tree under v nests statements and
// expressions at most limit levels deep; depth counts those above v. It
// stops descending at the limit, so its own recursion is bounded too.
func shallowerThan(v reflect.Value, depth, limit int) bool {
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			return true
		}
		return shallowerThan(v.Elem(), depth, limit)
	case reflect.Pointer:
		if v.IsNil() {
			return true
		}
		if v.Type().Implements(exprType) || v.Type().Implements(stmtType) {
			if depth++; depth > limit {
				return false
			}
		}
		return shallowerThan(v.Elem(), depth, limit)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if !shallowerThan(v.Field(i), depth, limit) {
				return false
			}
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			if !shallowerThan(v.Index(i), depth, limit) {
				return false
			}
		}
	}
	return true
}
