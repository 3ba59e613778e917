package scripting

import (
	"strconv"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// TestParseIntAgreesWithStrconv: the allocation-free parse of RESP integers
// accepts and refuses exactly what strconv.ParseInt does.
func TestParseIntAgreesWithStrconv(t *testing.T) {
	for _, s := range []string{"0", "1", "-1", "255", "256", "10000", "-10000", "007", "-0", "+5", "", "-", "1a", " 1",
		"999999999999999999", "-999999999999999999", "9223372036854775807", "-9223372036854775808",
		"9223372036854775808", "-9223372036854775809", "99999999999999999999", "1.5", "--1"} {
		n, ok := parseInt([]byte(s))
		want, err := strconv.ParseInt(s, 10, 64)
		if ok != (err == nil) || (ok && n != want) {
			t.Errorf("parseInt(%q) = %d, %v; strconv: %d, %v", s, n, ok, want, err)
		}
	}
}

// TestIntegerRepliesAreNumbers: integers parse to the same Lua numbers
// whether or not they are among the preconverted small ones.
func TestIntegerRepliesAreNumbers(t *testing.T) {
	L := lua.NewState()
	defer L.Close()
	for _, n := range []int64{0, 1, 255, 256, -1, 3599000, -9223372036854775808} {
		v, isErr, err := parseReply(L, []byte(":"+strconv.FormatInt(n, 10)+"\r\n"), nil)
		if err != nil || isErr || v != lua.LNumber(n) {
			t.Errorf("reply :%d → %v, %v, %v", n, v, isErr, err)
		}
	}
}
