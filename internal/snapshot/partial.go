package snapshot

import (
	"fmt"
	"io"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/rules"
)

// EncodeKeys writes, in the snapshot format (Decode reads it back), the
// rules of store and the keys of keys for which match reports true, with
// their state at the moment each shard's chunk is read: what a node sends
// another when it hands over the slots those keys hash to. now stamps the
// header and rescales states kept under an older revision of their rule.
// A plain key of a kind the format cannot hold is an error. It returns the
// number of keys written.
func EncodeKeys(w io.Writer, store *rules.Store, keys *keyspace.Map, match func(key string) bool, now int64, serverVersion string) (int, error) {
	set := store.Load()
	var saved []Rule
	index := map[uint64]int{} // rule ID -> position in saved
	for _, r := range set.Rules() {
		index[r.ID] = len(saved)
		saved = append(saved, r.Def)
	}
	enc := newEncoder(w, now, serverVersion, saved)
	var failed error
	emit := func(x keyspace.Exported) {
		if failed != nil || !match(x.Key) {
			return
		}
		if x.Rule == nil {
			str, ok := x.Value.(*keyspace.String)
			if !ok {
				failed = fmt.Errorf("plain key %q holds a %T, which the snapshot format cannot carry", x.Key, x.Value)
				return
			}
			enc.addPlain(x.Key, str.B, x.ExpireAt)
			return
		}
		i, ok := index[x.Rule.ID]
		if !ok {
			return // the rule was deleted (or replaced) after the set was taken
		}
		s := x.State
		if live := set.ByID(x.Rule.ID); live.Rev != x.Rule.Rev {
			rescaled := algorithms.Rescale(x.Rule.Params, live.Params, *x.State, now)
			s = &rescaled
		}
		if err := enc.addKey(i, x.Key, s); err != nil {
			failed = fmt.Errorf("key %q under rule %s: %w", x.Key, x.Rule.Name, err)
		}
	}
	flush := func() error {
		if enc.pending() >= flushAt {
			enc.flushKeys()
		}
		if failed != nil {
			return failed
		}
		return enc.err
	}
	if err := keys.Export(exportChunk, emit, flush); err != nil {
		return 0, err
	}
	err := enc.finish()
	return enc.keys, err
}
