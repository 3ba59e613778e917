package snapshot

import (
	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/shards"
)

// MergeRules returns the rules to start with: the snapshot's rules (which
// include those created at run time with RL.RULE SET), with the rules file's
// applied over them — a rule in the file replaces the saved rule of the same
// name, and saved rules the file does not mention are kept. With no file,
// the snapshot's rules are used as they are.
func MergeRules(saved, file []rules.Def) []rules.Def {
	out := make([]rules.Def, 0, len(saved)+len(file))
	inFile := map[string]bool{}
	for _, d := range file {
		inFile[d.Name] = true
	}
	for _, d := range saved {
		if !inFile[d.Name] {
			out = append(out, d)
		}
	}
	return append(out, file...)
}

// RestoreStats counts what Restore did.
type RestoreStats struct {
	Loaded int // keys now held
	Fresh  int // keys that became fresh while the server was down: dropped, nothing lost
	Orphan int // keys whose rule is gone or changed algorithm: dropped
	// Plain counts plain keys loaded; Expired those whose TTL ran out
	// while the server was down (dropped).
	Plain, Expired int
}

// Restore loads snap's keys into keys, against the rules now published in
// store, at instant now. Time spent down counts: a key is loaded with its
// saved state, so a token bucket has refilled for the downtime at its next
// decision, and a key that became fresh meanwhile is not loaded at all. A
// rule whose numbers changed (the rules file changed them) keeps its keys'
// spent budget, as RL.RULE SET would.
func Restore(snap *Snapshot, store *rules.Store, keys *shards.Map, now int64) RestoreStats {
	var st RestoreStats
	set := store.Load()
	live := make([]*rules.Rule, len(snap.Rules))
	for i, d := range snap.Rules {
		if r := set.Get([]byte(d.Name)); r != nil && r.Algorithm == d.Algorithm {
			live[i] = r
		}
	}
	items := make([]shards.Item, 0, len(snap.Keys))
	for _, k := range snap.Keys {
		r := live[k.Rule]
		if r == nil {
			st.Orphan++
			continue
		}
		state := k.State
		if saved := snap.Rules[k.Rule].Params(); saved != r.Params {
			state = algorithms.Rescale(saved, r.Params, state, now)
		}
		if algorithms.FreshAt(r.Params, state) <= now {
			st.Fresh++
			continue
		}
		items = append(items, shards.Item{Rule: r, Key: k.Key, State: state})
	}
	st.Loaded = len(items)
	for _, p := range snap.Plain {
		if p.ExpireAt != 0 && p.ExpireAt <= now {
			st.Expired++
			continue
		}
		items = append(items, shards.Item{Key: p.Key, Value: p.Value, ExpireAt: p.ExpireAt})
		st.Plain++
	}
	keys.Import(items)
	return st
}
