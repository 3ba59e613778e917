package scripting

import (
	"reflect"

	lua "github.com/yuin/gopher-lua"
)

// statusTables lends the {ok=text} tables redis.call returns for status
// replies ("+OK") and takes them back when the run ends, so that a state
// builds each such table once rather than at every SET, SETEX or LTRIM: a
// fresh gopher-lua table with one string key costs ten allocations (its
// string map, its key list and key index), which made a status reply cost a
// limiter script more than the rest of its call.
//
// A table goes back only if the run left it as lent (see reusable): no
// metatable, no array or hash part, "ok" its only key ever. Nothing can
// reach it after the run: the globals and the tables they reach are
// read-only but KEYS and ARGV, which reset empties or drops. So the next run
// sees a table exactly like a fresh one. One goroutine uses it: the one
// running the state.
type statusTables struct {
	free []*lua.LTable // reusable, their "ok" to be set
	lent []*lua.LTable // handed to the current run: reclaimed at its end
}

// maxStatusTables bounds the tables a state keeps and tracks: a run that
// gets more status replies gets fresh tables for the rest.
const maxStatusTables = 16

// okText is the text of nearly every status reply, converted once.
var okText lua.LValue = lua.LString("OK")

// table returns a {ok=text} table for the current run.
func (p *statusTables) table(L *lua.LState, text []byte) *lua.LTable {
	var v lua.LValue = okText
	if string(text) != "OK" {
		v = lua.LString(text)
	}
	var t *lua.LTable
	if n := len(p.free); n > 0 {
		t = p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
	} else {
		t = L.CreateTable(0, 1)
	}
	t.RawSetString("ok", v)
	if len(p.lent) < maxStatusTables {
		p.lent = append(p.lent, t)
	}
	return t
}

// reclaim takes back the tables lent to the run that ended, those it left
// as lent.
func (p *statusTables) reclaim() {
	for i, t := range p.lent {
		if len(p.free) < maxStatusTables && reusable(t) {
			p.free = append(p.free, t)
		}
		p.lent[i] = nil
	}
	p.lent = p.lent[:0]
}

// ltableLayout locates gopher-lua's private LTable fields that tell whether
// a table holds anything besides its string keys' values: reflection reads
// their lengths without copying them. Built for gopher-lua v1.1.2; if a
// later version lays LTable out otherwise, ok is false and no table is
// reused (TestStatusTablesAreReused then fails, to say so).
var ltableLayout = func() (l struct {
	ok                bool
	array, dict, keys int
}) {
	typ := reflect.TypeFor[lua.LTable]()
	field := func(name string, kind reflect.Kind) (int, bool) {
		f, found := typ.FieldByName(name)
		return f.Index[0], found && len(f.Index) == 1 && f.Type.Kind() == kind
	}
	var okA, okD, okK bool
	l.array, okA = field("array", reflect.Slice)
	l.dict, okD = field("dict", reflect.Map)
	l.keys, okK = field("keys", reflect.Slice)
	l.ok = okA && okD && okK
	return l
}()

// reusable reports whether t is as table lent it: no metatable, no array
// part, no non-string key, and "ok" the only string key it ever had (its
// key list, which gopher-lua never shrinks, holds one key), with a string
// value. Such a table holds nothing a script put in it beyond what table
// overwrites.
func reusable(t *lua.LTable) bool {
	if !ltableLayout.ok || t.Metatable != lua.LNil {
		return false
	}
	v := reflect.ValueOf(t).Elem()
	if !v.Field(ltableLayout.array).IsNil() || !v.Field(ltableLayout.dict).IsNil() || v.Field(ltableLayout.keys).Len() != 1 {
		return false
	}
	_, isString := t.RawGetString("ok").(lua.LString)
	return isString
}
