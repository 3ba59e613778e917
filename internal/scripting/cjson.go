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

// jsonEncode is cjson.encode(value). Before encoding it measures the largest
// text the value could produce, so a table repeating one long string many
// times cannot build an unbounded result, and refuses nesting deeper than
// lua-cjson allows, which also bounds the encoder's recursion.
func (st *state) jsonEncode(L *lua.LState) int {
	v := L.CheckAny(1)
	size := jsonSizeBound(L, v, 0, map[*lua.LTable]bool{})
	st.checkLength(L, size)
	data, err := json.Encode(v)
	if err != nil {
		luaLError(L, "%s", err.Error())
	}
	L.Push(lua.LString(data))
	return 1
}

// jsonSizeBound returns an upper bound of v's JSON length: each string byte
// may take six ("\u00XX"). A table met twice on one path is a cycle, which
// the encoder refuses anyway; its size is counted once.
func jsonSizeBound(L *lua.LState, v lua.LValue, depth int, onPath map[*lua.LTable]bool) int {
	switch v := v.(type) {
	case lua.LString:
		return 6*len(v) + 2
	case *lua.LTable:
		if depth >= jsonMaxDepth {
			luaLError(L, "Cannot serialise, excessive nesting (%d)", depth+1)
		}
		if onPath[v] {
			return 0
		}
		onPath[v] = true
		n := 2
		for k, e := v.Next(lua.LNil); k != lua.LNil; k, e = v.Next(k) {
			ks, es := jsonSizeBound(L, k, depth+1, onPath), jsonSizeBound(L, e, depth+1, onPath)
			if ks < 0 || es < 0 {
				return -1
			}
			if n += ks + es + 2; n < 0 { // overflow: certainly too large
				return -1
			}
		}
		delete(onPath, v)
		return n
	}
	return 32 // a number, boolean or null
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
