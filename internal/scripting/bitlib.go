package scripting

import (
	"math"

	lua "github.com/yuin/gopher-lua"
)

// The bit library Redis loads (LuaBitOp 1.0): 32-bit operations on Lua
// numbers, results signed. No gopher-lua binding is served by the module
// proxy, and the library is small, so it is written here from LuaBitOp's
// documented semantics.

// bitLibrary builds the bit table.
func (st *state) bitLibrary() *lua.LTable {
	t := st.L.CreateTable(0, 12)
	unary := map[string]func(uint32) uint32{
		"tobit": func(b uint32) uint32 { return b },
		"bnot":  func(b uint32) uint32 { return ^b },
		"bswap": func(b uint32) uint32 { return b>>24 | b>>8&0xff00 | b&0xff00<<8 | b<<24 },
	}
	fold := map[string]func(a, b uint32) uint32{
		"band": func(a, b uint32) uint32 { return a & b },
		"bor":  func(a, b uint32) uint32 { return a | b },
		"bxor": func(a, b uint32) uint32 { return a ^ b },
	}
	shift := map[string]func(b, n uint32) uint32{
		"lshift":  func(b, n uint32) uint32 { return b << n },
		"rshift":  func(b, n uint32) uint32 { return b >> n },
		"arshift": func(b, n uint32) uint32 { return uint32(int32(b) >> n) },
		"rol":     func(b, n uint32) uint32 { return b<<n | b>>(32-n) },
		"ror":     func(b, n uint32) uint32 { return b<<(32-n) | b>>n },
	}
	for name, op := range unary {
		st.set(t, name, bitUnary(name, op))
	}
	for name, op := range fold {
		st.set(t, name, bitFold(name, op))
	}
	for name, op := range shift {
		st.set(t, name, bitShift(name, op))
	}
	st.set(t, "tohex", bitToHex)
	return t
}

// bitArg converts argument i to 32 bits as LuaBitOp does: the number (or
// numeric string) is rounded to an integer and taken modulo 2^32, by adding
// 2^52+2^51 and keeping the low word of the sum's representation.
func bitArg(L *lua.LState, i int, fname string) uint32 {
	f, ok := luaNumber(L.Get(i))
	b := uint32(math.Float64bits(f + 6755399441055744.0))
	if b == 0 && (!ok || i > L.GetTop()) {
		typeError(L, i, fname, "number")
	}
	return b
}

func bitReturn(L *lua.LState, b uint32) int {
	L.Push(lua.LNumber(int32(b)))
	return 1
}

func bitUnary(fname string, op func(uint32) uint32) lua.LGFunction {
	return func(L *lua.LState) int { return bitReturn(L, op(bitArg(L, 1, fname))) }
}

func bitFold(fname string, op func(a, b uint32) uint32) lua.LGFunction {
	return func(L *lua.LState) int {
		b := bitArg(L, 1, fname)
		for i := L.GetTop(); i > 1; i-- {
			b = op(b, bitArg(L, i, fname))
		}
		return bitReturn(L, b)
	}
}

func bitShift(fname string, op func(b, n uint32) uint32) lua.LGFunction {
	return func(L *lua.LState) int { return bitReturn(L, op(bitArg(L, 1, fname), bitArg(L, 2, fname)&31)) }
}

// bitToHex is bit.tohex(x [, n]): n hex digits (default 8), upper case for a
// negative n.
func bitToHex(L *lua.LState) int {
	b := bitArg(L, 1, "tohex")
	n := int32(8)
	if L.GetTop() >= 2 {
		n = int32(bitArg(L, 2, "tohex"))
	}
	digits := "0123456789abcdef"
	if n < 0 {
		n, digits = -n, "0123456789ABCDEF"
	}
	if n < 0 || n > 8 { // -n overflowed for math.MinInt32
		n = 8
	}
	var buf [8]byte
	for i := n - 1; i >= 0; i-- {
		buf[i] = digits[b&15]
		b >>= 4
	}
	L.Push(lua.LString(buf[:n]))
	return 1
}
