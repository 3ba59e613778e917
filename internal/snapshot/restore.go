package snapshot

import (
	"errors"
	"fmt"
	"io"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/rules"
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
	Loaded int // limiter keys handed to the keyspace
	Fresh  int // keys that became fresh while the server was down: dropped, nothing lost
	Orphan int // keys whose rule is gone or changed algorithm: dropped
	// Plain counts plain keys loaded; Expired those whose TTL ran out
	// while the server was down (dropped).
	Plain, Expired int
	// Overrides counts the per-key overrides set again.
	Overrides int
}

// Restore loads f's keys into keys, against the rules now published in
// store, at instant now. Time spent down counts: a key is loaded with its
// saved state, so a token bucket has refilled for the downtime at its next
// decision, and a key that became fresh meanwhile is not loaded at all. A
// rule whose numbers changed (the rules file changed them) keeps its keys'
// spent budget, as RL.RULE SET would.
//
// It reads the file twice, a record at a time. The first pass checks all of
// it — every record's CRC, every key and state, the totals — and counts the
// keys each rule will hold, so a corrupt file loads nothing and each
// shard's tables are sized once. The second hands keys to the shards in
// batches while it decodes the next (see keyspace.Loader, which also applies
// --maxkeys as it goes), so memory beyond the keyspace itself is a record
// and two batches.
//
// It fails if the file is corrupt, or if the keyspace refuses the load (a
// *keyspace.LoadLimitError, a failed shard): the keyspace then holds nothing
// (corrupt file) or part of the snapshot, and must not serve.
func (f *File) Restore(store *rules.Store, keys *keyspace.Map, now int64) (RestoreStats, error) {
	if f.f == nil {
		return RestoreStats{}, errors.New("snapshot: Restore after Close")
	}
	count := newRestorer(f.Rules, store, nil, now)
	if err := f.pass(visitor{key: count.key, plain: count.plain, typed: count.typed}); err != nil {
		return RestoreStats{}, err
	}
	r := newRestorer(f.Rules, store, keys, now)
	reserve := map[*rules.Rule]int{nil: count.plainKeys}
	for i, n := range count.perRule {
		reserve[r.live[i]] += n
	}
	for rule, n := range reserve {
		if n > 0 {
			r.loader.Reserve(rule, n)
		}
	}
	var overrides []SavedOverride
	err := f.pass(visitor{key: r.key, plain: r.plain, typed: r.typed, newLog: func(n int64) []int64 { return make([]int64, n) },
		override: func(o SavedOverride) { overrides = append(overrides, o) }})
	if err == nil {
		err = r.loader.Close()
	}
	if err == nil {
		r.stats.Overrides, err = restoreOverrides(f.Rules, overrides, store, keys, now)
	}
	if err != nil {
		return r.stats, fmt.Errorf("snapshot %s: %w", f.Path, err)
	}
	return r.stats, nil
}

// pass walks the whole file with v.
func (f *File) pass(v visitor) error {
	if _, err := f.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("snapshot %s: %w", f.Path, err)
	}
	f.rd.Reset(f.f)
	v.buf = &f.buf
	if _, err := walk(f.rd, f.size, v); err != nil {
		return fmt.Errorf("snapshot %s: %w", f.Path, err)
	}
	return nil
}

// Restore is File.Restore for a snapshot decoded in memory, after it
// drops what keys holds for the names of its FORGET records.
func Restore(snap *Snapshot, store *rules.Store, keys *keyspace.Map, now int64) (RestoreStats, error) {
	r := newRestorer(snap.Rules, store, keys, now)
	if len(snap.Forget) > 0 {
		keys.Forget(snap.Forget)
	}
	for _, k := range snap.Keys {
		if err := r.key(k.Rule, []byte(k.Key), k.State); err != nil {
			return r.stats, err
		}
	}
	for _, p := range snap.Plain {
		if err := r.plain([]byte(p.Key), p.Value, p.ExpireAt); err != nil {
			return r.stats, err
		}
	}
	for _, p := range snap.Typed {
		if err := r.typed([]byte(p.Key), p.Value, p.ExpireAt); err != nil {
			return r.stats, err
		}
	}
	if err := r.loader.Close(); err != nil {
		return r.stats, err
	}
	var err error
	r.stats.Overrides, err = restoreOverrides(snap.Rules, snap.Overrides, store, keys, now)
	return r.stats, err
}

// restorer decides, key by key, what of a snapshot to load, and loads it
// (or, with no keyspace, counts what it would load per rule).
type restorer struct {
	saved  []algorithms.Params // by saved rule index
	live   []*rules.Rule       // the live rule each saved rule's keys go to; nil: none
	loader *keyspace.Loader    // nil: count only
	// Counting: the keys that would load, per saved rule, and plain.
	perRule   []int
	plainKeys int
	now       int64
	stats     RestoreStats
}

func newRestorer(saved []Rule, store *rules.Store, keys *keyspace.Map, now int64) *restorer {
	r := &restorer{now: now}
	if keys != nil {
		r.loader = keys.NewLoader()
	} else {
		r.perRule = make([]int, len(saved))
	}
	set := store.Load()
	for _, d := range saved {
		r.saved = append(r.saved, d.Params())
		var live *rules.Rule
		if l := set.Get([]byte(d.Name)); l != nil && l.Algorithm == d.Algorithm {
			live = l
		}
		r.live = append(r.live, live)
	}
	return r
}

// key loads one limiter key, unless its rule is gone or it is fresh.
func (r *restorer) key(rule int, key []byte, s algorithms.State) error {
	live := r.live[rule]
	if live == nil {
		r.stats.Orphan++
		return nil
	}
	if r.saved[rule] != live.Params {
		s = algorithms.Rescale(r.saved[rule], live.Params, s, r.now)
	}
	if algorithms.FreshAt(live.Params, s) <= r.now {
		r.stats.Fresh++
		return nil
	}
	r.stats.Loaded++
	if r.loader == nil {
		r.perRule[rule]++
		return nil
	}
	return r.loader.Add(keyspace.Item{Rule: live, Key: key, State: s})
}

// plain loads one plain key, unless its TTL has run out.
func (r *restorer) plain(key, value []byte, expireAt int64) error {
	if expireAt != 0 && expireAt <= r.now {
		r.stats.Expired++
		return nil
	}
	r.stats.Plain++
	if r.loader == nil {
		r.plainKeys++
		return nil
	}
	return r.loader.Add(keyspace.Item{Key: key, Value: value, ExpireAt: expireAt})
}

// typed loads one plain key holding a hash, list or sorted set, unless its
// TTL has run out. Such keys count as plain keys.
func (r *restorer) typed(key []byte, v typedValue, expireAt int64) error {
	if expireAt != 0 && expireAt <= r.now {
		r.stats.Expired++
		return nil
	}
	r.stats.Plain++
	if r.loader == nil {
		r.plainKeys++
		return nil
	}
	return r.loader.Add(keyspace.Item{Key: key, Object: v, ExpireAt: expireAt})
}
