package keyspace

import (
	"testing"

	"github.com/rlserver/rlserver/internal/rules"
)

// TestOverrideHeapStaysBounded: replacing one key's override over and over
// leaves the expiry heap proportional to the live overrides, not to the
// number of SETs.
func TestOverrideHeapStaysBounded(t *testing.T) {
	now := int64(1_700_000_000_000_000_000)
	st, err := rules.NewStore([]rules.Def{rules.MustParseDef("r", "fixed_window", "5", "1h", "")})
	if err != nil {
		t.Fatal(err)
	}
	m := New(Config{Shards: 1, Clock: func() int64 { return now }, Rules: st})
	defer m.Stop()
	d := m.NewDispatcher()
	r := st.Load().Get([]byte("r"))
	def := rules.MustParseDef("r", "fixed_window", "50", "1h", "")
	for i := range 10_000 {
		op := Op{Kind: SetOverride, Rule: r, Key: []byte("k"), Override: &Override{Def: def, ExpireAt: now + 1e12 + int64(i)}}
		d.Apply(&op)
		if op.Err != nil {
			t.Fatal(op.Err)
		}
	}
	var q, live int
	m.each(func(s *shard) { q, live = len(s.overrideQ), s.overrides })
	if live != 1 || q > 2*live+65 {
		t.Fatalf("%d heap entries for %d live overrides", q, live)
	}
}
