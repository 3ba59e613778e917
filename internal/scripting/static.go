package scripting

import (
	"strings"

	"github.com/yuin/gopher-lua/ast"
)

// What a script can reach, read from its syntax before it runs.
//
// A script whose every command names its keys by KEYS[i] (directly, or
// through a local bound once to KEYS[i]) can never reach a key it did not
// declare, so the server may queue it on its keys' shard beside other
// work, as it queues a GET, instead of running it alone: it will never
// have to be stopped and rerun holding every shard. Proving that takes
// only the syntax, read conservatively: any use of redis, KEYS or the
// environment the reading below does not follow (an alias of redis.call,
// a computed command name, KEYS passed to a function or written, _G,
// getfenv, loadstring...) makes the script unproven, and it runs as
// before.

// Call is one redis.call or redis.pcall in a script's text.
type Call struct {
	// Name is the command's name as written (a string constant).
	Name string
	// Declared[i] reports whether argument i (after the name) is one of
	// the script's declared keys: KEYS[i], or a local bound once to
	// KEYS[i] and never assigned.
	Declared []bool
	// Expands reports whether the last argument may stand for several
	// values (a function call, or ...), so the words it fills are unknown.
	Expands bool
}

// Calls returns the script's redis.call and redis.pcall calls, and whether
// the reading proved that these are all the commands the script can run
// and that each argument marked declared is a declared key. When ok is
// false the calls say nothing.
func (s *Script) Calls() (calls []Call, ok bool) { return s.calls, s.callsKnown }

// MayReachUndeclared reports whether the script may run a command on a key
// it did not declare, given which command words are keys: keyWords(name,
// words) returns, for the command named name called with words words
// (name included; words < 0 when the number is unknown), whether its keys
// are exactly the words at the returned positions (ok), or it may reach
// keys beyond its words or the whole keyspace (!ok). The answer is cached
// in the script: keyWords must always answer alike.
func (s *Script) MayReachUndeclared(keyWords func(name string, words int) (positions []int, ok bool)) bool {
	switch s.reach.Load() {
	case reachConfined:
		return false
	case reachAny:
		return true
	}
	confined := s.callsKnown && callsConfined(s.calls, keyWords)
	if confined {
		s.reach.Store(reachConfined)
	} else {
		s.reach.Store(reachAny)
	}
	return !confined
}

// Script.reach values.
const (
	reachUnknown = iota
	reachConfined
	reachAny
)

func callsConfined(calls []Call, keyWords func(name string, words int) ([]int, bool)) bool {
	for _, c := range calls {
		words := len(c.Declared) + 1
		if c.Expands {
			words = -1
		}
		positions, ok := keyWords(c.Name, words)
		if !ok {
			return false
		}
		for _, p := range positions {
			i := p - 1 // Declared excludes the name
			if i < 0 || i >= len(c.Declared) || !c.Declared[i] || c.Expands && i == len(c.Declared)-1 {
				return false
			}
		}
	}
	return true
}

// forbiddenNames are globals through which a script could reach redis or
// KEYS without naming them, or run code the reading has not seen.
var forbiddenNames = map[string]bool{
	"_G": true, "getfenv": true, "setfenv": true, "loadstring": true, "load": true,
	"dofile": true, "loadfile": true, "require": true, "module": true,
	"rawget": true, "rawset": true, "debug": true,
}

// redisFields are the fields of redis a script may read without the
// reading losing track: functions and constants that run no command.
var redisFields = map[string]bool{
	"error_reply": true, "status_reply": true, "sha1hex": true, "log": true,
	"setresp": true, "replicate_commands": true, "set_repl": true, "breakpoint": true, "debug": true,
	"LOG_DEBUG": true, "LOG_VERBOSE": true, "LOG_NOTICE": true, "LOG_WARNING": true,
	"REPL_NONE": true, "REPL_AOF": true, "REPL_SLAVE": true, "REPL_REPLICA": true, "REPL_ALL": true,
}

// reading walks a chunk's syntax, collecting redis.call and redis.pcall
// calls and noting anything it cannot follow.
type reading struct {
	calls []Call
	lost  bool
	// bindings counts, per name, the locals, parameters and loop variables
	// binding it and the assignments to it; aliases holds the names bound
	// by "local name = KEYS[i]". An alias is one only if bound once.
	bindings map[string]int
	aliases  map[string]bool
	// callArgs holds, per call (parallel to calls), its argument
	// expressions, judged once every alias is known.
	callArgs [][]ast.Expr
}

// readCalls reads chunk (see Calls).
func readCalls(chunk []ast.Stmt) ([]Call, bool) {
	r := &reading{bindings: map[string]int{}, aliases: map[string]bool{}}
	r.stmts(chunk)
	if r.lost {
		return nil, false
	}
	for name := range r.aliases {
		if r.bindings[name] != 1 {
			delete(r.aliases, name)
		}
	}
	for i, args := range r.callArgs {
		c := &r.calls[i]
		c.Declared = make([]bool, len(args))
		for j, a := range args {
			c.Declared[j] = r.declaredKey(a)
		}
		if n := len(args); n > 0 {
			switch args[n-1].(type) {
			case *ast.FuncCallExpr, *ast.Comma3Expr:
				c.Expands = true
			}
		}
	}
	return r.calls, true
}

// keysIndex reports whether e is KEYS[i]: while KEYS is never written or
// passed on, whatever it reads is a declared key (or nil).
func keysIndex(e ast.Expr) bool {
	g, ok := e.(*ast.AttrGetExpr)
	if !ok {
		return false
	}
	id, ok := g.Object.(*ast.IdentExpr)
	return ok && id.Value == "KEYS"
}

func (r *reading) declaredKey(e ast.Expr) bool {
	if id, ok := e.(*ast.IdentExpr); ok {
		return r.aliases[id.Value]
	}
	return keysIndex(e)
}

func (r *reading) bind(names ...string) {
	for _, n := range names {
		if n == "redis" || n == "KEYS" {
			r.lost = true // a local shadowing them: not worth following
		}
		r.bindings[n]++
	}
}

func (r *reading) stmts(list []ast.Stmt) {
	for _, s := range list {
		if r.lost {
			return
		}
		r.stmt(s)
	}
}

func (r *reading) stmt(s ast.Stmt) {
	switch s := s.(type) {
	case *ast.AssignStmt:
		for _, l := range s.Lhs {
			switch l := l.(type) {
			case *ast.IdentExpr:
				if l.Value == "redis" || l.Value == "KEYS" || forbiddenNames[l.Value] {
					r.lost = true
				}
				r.bindings[l.Value]++
			case *ast.AttrGetExpr:
				if id, ok := l.Object.(*ast.IdentExpr); ok && (id.Value == "KEYS" || id.Value == "redis") {
					r.lost = true // KEYS[n] = ... or redis.call = ...
				}
				r.expr(l.Object)
				r.expr(l.Key)
			default:
				r.expr(l)
			}
		}
		r.exprs(s.Rhs)
	case *ast.LocalAssignStmt:
		r.bind(s.Names...)
		for i, n := range s.Names {
			if i < len(s.Exprs) && keysIndex(s.Exprs[i]) {
				r.aliases[n] = true
			}
		}
		r.exprs(s.Exprs)
	case *ast.FuncCallStmt:
		r.expr(s.Expr)
	case *ast.DoBlockStmt:
		r.stmts(s.Stmts)
	case *ast.WhileStmt:
		r.expr(s.Condition)
		r.stmts(s.Stmts)
	case *ast.RepeatStmt:
		r.stmts(s.Stmts)
		r.expr(s.Condition)
	case *ast.IfStmt:
		r.expr(s.Condition)
		r.stmts(s.Then)
		r.stmts(s.Else)
	case *ast.NumberForStmt:
		r.bind(s.Name)
		r.expr(s.Init)
		r.expr(s.Limit)
		r.expr(s.Step)
		r.stmts(s.Stmts)
	case *ast.GenericForStmt:
		r.bind(s.Names...)
		r.exprs(s.Exprs)
		r.stmts(s.Stmts)
	case *ast.FuncDefStmt:
		if id, ok := s.Name.Func.(*ast.IdentExpr); ok {
			if id.Value == "redis" || id.Value == "KEYS" || forbiddenNames[id.Value] {
				r.lost = true
			}
			r.bindings[id.Value]++
		} else {
			r.expr(s.Name.Func)
		}
		if s.Name.Receiver != nil {
			r.expr(s.Name.Receiver)
		}
		r.function(s.Func)
	case *ast.ReturnStmt:
		r.exprs(s.Exprs)
	case *ast.BreakStmt, *ast.LabelStmt, *ast.GotoStmt:
	default:
		r.lost = true // a statement this reading does not know
	}
}

func (r *reading) exprs(list []ast.Expr) {
	for _, e := range list {
		r.expr(e)
	}
}

func (r *reading) function(f *ast.FunctionExpr) {
	r.bind(f.ParList.Names...)
	r.stmts(f.Stmts)
}

func (r *reading) expr(e ast.Expr) {
	if e == nil || r.lost {
		return
	}
	switch e := e.(type) {
	case *ast.TrueExpr, *ast.FalseExpr, *ast.NilExpr, *ast.NumberExpr, *ast.StringExpr, *ast.Comma3Expr:
	case *ast.IdentExpr:
		// redis and KEYS are followed only where their parents are
		// (attrGet, call, #KEYS); reaching them here means the table
		// itself escapes.
		if e.Value == "redis" || e.Value == "KEYS" || forbiddenNames[e.Value] {
			r.lost = true
		}
	case *ast.AttrGetExpr:
		r.attrGet(e)
	case *ast.TableExpr:
		for _, f := range e.Fields {
			r.expr(f.Key)
			r.expr(f.Value)
		}
	case *ast.FuncCallExpr:
		r.call(e)
	case *ast.LogicalOpExpr:
		r.expr(e.Lhs)
		r.expr(e.Rhs)
	case *ast.RelationalOpExpr:
		r.expr(e.Lhs)
		r.expr(e.Rhs)
	case *ast.StringConcatOpExpr:
		r.expr(e.Lhs)
		r.expr(e.Rhs)
	case *ast.ArithmeticOpExpr:
		r.expr(e.Lhs)
		r.expr(e.Rhs)
	case *ast.UnaryMinusOpExpr:
		r.expr(e.Expr)
	case *ast.UnaryNotOpExpr:
		r.expr(e.Expr)
	case *ast.UnaryLenOpExpr:
		if id, ok := e.Expr.(*ast.IdentExpr); ok && id.Value == "KEYS" {
			return // #KEYS reads the table's length
		}
		r.expr(e.Expr)
	case *ast.FunctionExpr:
		r.function(e)
	default:
		r.lost = true
	}
}

// attrGet follows t[k] and t.k: KEYS[n] and redis.<known field> are reads
// that cannot reach a key; any other use of KEYS or redis is not followed.
func (r *reading) attrGet(e *ast.AttrGetExpr) {
	if id, ok := e.Object.(*ast.IdentExpr); ok {
		switch id.Value {
		case "KEYS":
			r.expr(e.Key)
			return
		case "redis":
			k, ok := e.Key.(*ast.StringExpr)
			if !ok || !redisFields[k.Value] {
				r.lost = true
			}
			return
		}
	}
	r.expr(e.Object)
	r.expr(e.Key)
}

// call follows a function call, recording redis.call and redis.pcall with
// a constant command name; one with a computed name is not followed.
func (r *reading) call(e *ast.FuncCallExpr) {
	if g, ok := e.Func.(*ast.AttrGetExpr); ok && e.Receiver == nil {
		if id, ok := g.Object.(*ast.IdentExpr); ok && id.Value == "redis" {
			if k, ok := g.Key.(*ast.StringExpr); ok && (k.Value == "call" || k.Value == "pcall") {
				name, ok := firstString(e.Args)
				if !ok {
					r.lost = true
					return
				}
				r.calls = append(r.calls, Call{Name: strings.ToLower(name)})
				r.callArgs = append(r.callArgs, e.Args[1:])
				r.exprs(e.Args[1:])
				return
			}
		}
	}
	r.expr(e.Func)
	r.expr(e.Receiver)
	r.exprs(e.Args)
}

func firstString(args []ast.Expr) (string, bool) {
	if len(args) == 0 {
		return "", false
	}
	s, ok := args[0].(*ast.StringExpr)
	if !ok {
		return "", false
	}
	return s.Value, true
}
