package values

import (
	"math"
	"unsafe"

	"github.com/tidwall/btree"
)

// ZSet is a Redis sorted set: members (byte strings) with float64 scores,
// ordered by score, then by member bytes (Go's string order, which is
// Redis's memcmp order).
//
// It keeps two views of the same members: a B-tree of (score, member)
// items for order and rank (github.com/tidwall/btree, whose nodes count
// their items, so the item at a rank is found in O(log n)), and a map from
// member to score for O(1) ZSCORE and membership. The member's string is
// shared by both. Ranks of a score bound are found by binary search over
// ranks, O(log² n); ranges then walk the tree from there.
//
// Scores are never NaN. A score of -0 is stored as 0, as Redis stores it
// in its small (listpack) sorted sets, so ZSCORE answers "0".
//
// Size is Σ len(member) + ZSetEntryOverhead per member, kept up to date in
// O(1) per member changed.
//
// A ZSet is not safe for concurrent use: it belongs to the goroutine that
// owns its key. Member strings it returns are immutable and stay valid.
type ZSet struct {
	tree  *btree.BTreeG[zitem]
	dict  map[string]float64
	bytes int // Σ len(member)
}

// zitem is a member in the tree.
type zitem struct {
	score  float64
	member string
}

func zless(a, b zitem) bool {
	return a.score < b.score || a.score == b.score && a.member < b.member
}

// ScoredMember is a member and its score, as ranges return them.
type ScoredMember struct {
	Member string
	Score  float64
}

// zsetDegree is the B-tree's degree (nodes hold up to 2·degree-1 items):
// the library's default, a good balance of node scans against depth for
// 24-byte items.
const zsetDegree = 32

// NewZSet returns an empty sorted set.
func NewZSet() *ZSet {
	return &ZSet{
		tree: btree.NewBTreeGOptions(zless, btree.Options{Degree: zsetDegree, NoLocks: true}),
		dict: make(map[string]float64),
	}
}

// Size implements keyspace.Value: the bytes the set holds, with
// ZSetEntryOverhead per member.
func (z *ZSet) Size() int { return z.bytes + len(z.dict)*ZSetEntryOverhead }

// Card returns the number of members (ZCARD).
func (z *ZSet) Card() int { return len(z.dict) }

// Score returns member's score and whether it is a member (ZSCORE).
func (z *ZSet) Score(member []byte) (float64, bool) {
	s, ok := z.dict[string(member)]
	return s, ok
}

// ZAddOptions are ZADD's flags.
type ZAddOptions struct {
	NX   bool // only add new members
	XX   bool // only update existing members
	GT   bool // update an existing member only to a greater score
	LT   bool // update an existing member only to a lower score
	CH   bool // count updated members too (see ZAddResult.Reply)
	Incr bool // add the score to the member's (ZINCRBY); one pair only
}

// ZAddResult is what ZADD did.
type ZAddResult struct {
	Added   int // new members
	Updated int // existing members whose score changed
	// With Incr: Score is the member's new score when Done, and when not
	// Done (NX, XX or GT/LT prevented the change) Redis replies nil.
	Score float64
	Done  bool
}

// Count returns ZADD's integer reply without Incr: Added, plus Updated
// with CH.
func (r ZAddResult) Count(opts ZAddOptions) int {
	if opts.CH {
		return r.Added + r.Updated
	}
	return r.Added
}

// check returns ZADD's error for incompatible options over pairs
// arguments, in Redis's order.
func (o ZAddOptions) check(pairs int) error {
	switch {
	case pairs == 0 || pairs%2 != 0:
		return ErrSyntax
	case o.NX && o.XX:
		return ErrXXAndNX
	case o.GT && o.NX || o.LT && o.NX || o.GT && o.LT:
		return ErrGTLTNX
	case o.Incr && pairs > 2:
		return ErrIncrPair
	}
	return nil
}

// Add applies ZADD's score/member pairs (score, member, score, member,
// ...), scores as text, in order, as Redis does: a member named twice is
// added, then updated. Errors, all before any change: the option errors
// (ErrSyntax, ErrXXAndNX, ErrGTLTNX, ErrIncrPair) then ErrNotFloat for a
// score that does not parse (ParseScore), a *LimitError, and ErrScoreNaN
// when Incr makes +inf plus -inf.
//
// A ZADD with XX on a missing key adds nothing: the caller, which created
// an empty set for it, does not store it.
func (z *ZSet) Add(lim Limits, opts ZAddOptions, pairs [][]byte) (ZAddResult, error) {
	if err := opts.check(len(pairs)); err != nil {
		return ZAddResult{}, err
	}
	for i := 0; i < len(pairs); i += 2 {
		if _, err := ParseScore(pairs[i]); err != nil {
			return ZAddResult{}, err
		}
	}
	if !opts.XX {
		if err := z.checkNewMembers(lim, len(pairs)/2, func(i int) []byte { return pairs[2*i+1] }); err != nil {
			return ZAddResult{}, err
		}
	}
	if opts.Incr {
		incr, _ := ParseScore(pairs[0])
		return z.incr(opts, incr, pairs[1])
	}
	var res ZAddResult
	for i := 0; i < len(pairs); i += 2 {
		score, _ := ParseScore(pairs[i])
		added, updated, _ := z.addOne(opts, score, pairs[i+1])
		if added {
			res.Added++
		}
		if updated {
			res.Updated++
		}
	}
	return res, nil
}

// IncrBy adds incr to member's score, adding the member with score incr
// if it is new, and returns the new score (ZINCRBY). Errors: a
// *LimitError, ErrScoreNaN (a NaN incr, or +inf plus -inf); nothing
// changes on an error.
func (z *ZSet) IncrBy(lim Limits, incr float64, member []byte) (float64, error) {
	if err := z.checkNewMembers(lim, 1, func(int) []byte { return member }); err != nil {
		return 0, err
	}
	res, err := z.incr(ZAddOptions{Incr: true}, incr, member)
	return res.Score, err
}

// incr applies ZADD INCR's single pair. A NaN increment is refused
// whatever the options, as zsetAdd refuses one.
func (z *ZSet) incr(opts ZAddOptions, incr float64, member []byte) (ZAddResult, error) {
	if math.IsNaN(incr) {
		return ZAddResult{}, ErrScoreNaN
	}
	if cur, ok := z.dict[string(member)]; ok && !opts.NX && math.IsNaN(cur+incr) {
		return ZAddResult{}, ErrScoreNaN
	}
	added, updated, score := z.addOne(opts, incr, member)
	var res ZAddResult
	if !math.IsNaN(score) { // NaN: the options prevented the change
		res.Score, res.Done = score, true
	}
	if added {
		res.Added = 1
	}
	if updated {
		res.Updated = 1
	}
	return res, nil
}

// addOne applies one pair under opts (zsetAdd) and returns whether it
// added the member, whether it changed an existing member's score, and
// the member's resulting score (NaN when opts prevented any change, which
// ZADD INCR replies as nil). With Incr, score is the increment; the caller
// has ruled out a NaN sum.
func (z *ZSet) addOne(opts ZAddOptions, score float64, member []byte) (added, updated bool, result float64) {
	cur, exists := z.dict[string(member)]
	if !exists {
		if opts.XX {
			return false, false, math.NaN()
		}
		m := string(member)
		z.dict[m] = normalZero(score)
		z.tree.Set(zitem{normalZero(score), m})
		z.bytes += len(m)
		return true, false, score
	}
	if opts.NX {
		return false, false, math.NaN()
	}
	if opts.Incr {
		score += cur
	}
	if opts.LT && score >= cur || opts.GT && score <= cur {
		return false, false, math.NaN()
	}
	if score != cur {
		old, _ := z.tree.Delete(zitem{cur, lookupString(member)})
		z.tree.Set(zitem{normalZero(score), old.member})
		z.dict[old.member] = normalZero(score)
		updated = true
	}
	return false, updated, score
}

// lookupString returns b's bytes as a string without copying them, for a
// key that is only compared, never kept: the tree's Delete uses its
// argument to find the item and returns the stored one. b must not change
// meanwhile.
func lookupString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// normalZero turns -0 into 0 and leaves every other score as it is.
func normalZero(f float64) float64 {
	if f == 0 {
		return 0
	}
	return f
}

// checkNewMembers checks lim for adding the distinct members among
// member(0..n-1) that are not in the set yet.
func (z *ZSet) checkNewMembers(lim Limits, n int, member func(int) []byte) error {
	newMembers, delta := 0, 0
	forLastOccurrences(n, member, func(i int) {
		if _, ok := z.dict[string(member(i))]; !ok {
			newMembers++
			delta += len(member(i)) + ZSetEntryOverhead
		}
	})
	c := len(z.dict)
	return lim.check("sorted set", c, c+newMembers, z.Size(), z.Size()+delta)
}

// Rem removes the members and returns how many there were (ZREM). The
// caller deletes the key when the set is left empty, as Redis does.
func (z *ZSet) Rem(members ...[]byte) int {
	n := 0
	for _, m := range members {
		score, ok := z.dict[string(m)]
		if !ok {
			continue
		}
		old, _ := z.tree.Delete(zitem{score, lookupString(m)})
		delete(z.dict, old.member)
		z.bytes -= len(old.member)
		n++
	}
	return n
}
