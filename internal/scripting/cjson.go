package scripting

import (
	json "github.com/alicebob/gopher-json"
	lua "github.com/yuin/gopher-lua"
)

// cjson is served by github.com/alicebob/gopher-json (public domain), a
// gopher-lua JSON codec: encode and decode only. It differs from the
// lua-cjson Redis bundles where that codec has options or types of its own:
// no cjson.null (JSON null decodes to nil), no encode_* / decode_*
// settings, an empty table encodes as [], numbers encode in Go's shortest
// form instead of %.14g, and error messages are Go's.

// jsonMaxDepth is lua-cjson's default nesting limit for encoding.
const jsonMaxDepth = 1000

// cjsonLibrary builds the cjson table.
func (st *state) cjsonLibrary() *lua.LTable {
	t := st.L.CreateTable(0, 2)
	st.set(t, "encode", st.jsonEncode)
	st.set(t, "decode", st.jsonDecode)
	return t
}

// jsonEncode is cjson.encode(value). Before encoding it measures the
// largest text the value could produce, so a table repeating one long string
// many times cannot build an unbounded result, and refuses nesting deeper
// than lua-cjson allows, which also bounds the encoder's recursion.
func (st *state) jsonEncode(L *lua.LState) int {
	v := L.CheckAny(1)
	b := jsonBound{L: L, limit: st.maxString(), onPath: map[*lua.LTable]bool{}}
	b.add(v, 0)
	st.checkLength(L, b.n)
	data, err := json.Encode(v)
	if err != nil {
		luaLError(L, "%s", err.Error())
	}
	L.Push(lua.LString(data))
	return 1
}

// jsonBound adds up an upper bound of a value's JSON length; it stops
// walking once the bound passes limit.
type jsonBound struct {
	L      *lua.LState
	limit  int
	n      int
	onPath map[*lua.LTable]bool // tables being walked: a cycle is counted once (the encoder refuses it)
}

func (b *jsonBound) add(v lua.LValue, depth int) {
	if b.n > b.limit {
		return
	}
	switch v := v.(type) {
	case lua.LString:
		b.n += 2
		for i := 0; i < len(v); i++ {
			if c := v[i]; c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				b.n++
			} else {
				b.n += 6 // an escape ("\u0026", "\ufffd" for invalid UTF-8) is at most six bytes
			}
		}
	case *lua.LTable:
		if depth >= jsonMaxDepth {
			luaLError(b.L, "Cannot serialise, excessive nesting (%d)", depth+1)
		}
		if b.onPath[v] {
			return
		}
		b.onPath[v] = true
		b.n += 2
		for k, e := v.Next(lua.LNil); k != lua.LNil && b.n <= b.limit; k, e = v.Next(k) {
			b.add(k, depth+1)
			b.add(e, depth+1)
			b.n += 2 // ':' and ','
		}
		delete(b.onPath, v)
	default:
		b.n += 32 // a number, boolean or null
	}
}

// jsonDecode is cjson.decode(text); malformed text raises an error, as in
// lua-cjson.
func (st *state) jsonDecode(L *lua.LState) int {
	v, err := json.Decode(L, []byte(L.CheckString(1)))
	if err != nil {
		luaLError(L, "%s", err.Error())
	}
	L.Push(v)
	return 1
}
