package values

import (
	"iter"
	"math"

	"github.com/tidwall/btree"
)

// Ranges of a sorted set. Every range is first turned into a half-open
// range of ranks [lo, hi) (rank 0 is the lowest score), then read or
// removed by rank: one rule for ZCOUNT, ZRANGE, ZRANGEBYSCORE,
// ZREMRANGEBYSCORE and ZREMRANGEBYRANK.

// rankOf returns the number of members ordered before pivot, by binary
// search over ranks: O(log² n).
func (z *ZSet) rankOf(pivot zitem) int {
	lo, hi := 0, z.tree.Len()
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if it, _ := z.tree.GetAt(mid); zless(it, pivot) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// scoreRanks returns the ranks [lo, hi) of the members whose scores lie in
// r. A member sorts after the pivot (s, "") exactly when its score is at
// least s, so each bound is the rank of one pivot.
func (z *ZSet) scoreRanks(r ScoreRange) (lo, hi int) {
	if r.Min > r.Max || r.Min == r.Max && (r.MinExclusive || r.MaxExclusive) {
		return 0, 0
	}
	lo = z.ranksBelow(r.Min, !r.MinExclusive)
	hi = z.ranksBelow(r.Max, r.MaxExclusive)
	return lo, max(lo, hi)
}

// ranksBelow returns the number of members whose score is below bound:
// strictly below with strict, else at most bound.
func (z *ZSet) ranksBelow(bound float64, strict bool) int {
	if strict {
		return z.rankOf(zitem{bound, ""})
	}
	if math.IsInf(bound, 1) {
		return z.tree.Len()
	}
	return z.rankOf(zitem{math.Nextafter(bound, math.Inf(1)), ""})
}

// Count returns the number of members whose scores lie in r (ZCOUNT).
func (z *ZSet) Count(r ScoreRange) int {
	lo, hi := z.scoreRanks(r)
	return hi - lo
}

// AppendRangeByRank appends to dst the members from rank start to stop
// inclusive, clamped as ZRANGE clamps them (see IndexRange); with rev,
// ranks count from the highest score and members come highest first
// (ZREVRANGE, ZRANGE ... REV).
func (z *ZSet) AppendRangeByRank(dst []ScoredMember, start, stop int, rev bool) []ScoredMember {
	lo, hi := IndexRange(start, stop, z.Card())
	if rev {
		n := z.Card()
		lo, hi = n-hi, n-lo
	}
	return z.appendRanks(dst, lo, hi, rev)
}

// AppendRangeByScore appends to dst the members whose scores lie in r,
// lowest first, or highest first with rev (ZRANGEBYSCORE,
// ZREVRANGEBYSCORE, ZRANGE ... BYSCORE [REV]), after skipping offset of
// them and taking at most count, as LIMIT does: a negative offset gives
// nothing, a negative count means all. Without LIMIT pass 0, -1. r is
// always (min, max): ZREVRANGEBYSCORE and ZRANGE ... BYSCORE REV take max
// first, so their callers swap the bounds before ParseScoreRange.
func (z *ZSet) AppendRangeByScore(dst []ScoredMember, r ScoreRange, rev bool, offset, count int) []ScoredMember {
	lo, hi := z.scoreRanks(r)
	if offset < 0 || offset >= hi-lo {
		return dst
	}
	n := hi - lo - offset
	if count >= 0 && count < n {
		n = count
	}
	if rev {
		return z.appendRanks(dst, hi-offset-n, hi-offset, true)
	}
	return z.appendRanks(dst, lo+offset, lo+offset+n, false)
}

// appendRanks appends the members of ranks [lo, hi), ascending, or
// descending from hi-1 with rev.
func (z *ZSet) appendRanks(dst []ScoredMember, lo, hi int, rev bool) []ScoredMember {
	if lo >= hi {
		return dst
	}
	left := hi - lo
	visit := func(it zitem) bool {
		dst = append(dst, ScoredMember{Member: it.member, Score: it.score})
		left--
		return left > 0
	}
	if rev {
		last, _ := z.tree.GetAt(hi - 1)
		z.tree.Descend(last, visit)
	} else {
		first, _ := z.tree.GetAt(lo)
		z.tree.Ascend(first, visit)
	}
	return dst
}

// RemRangeByScore removes the members whose scores lie in r and returns
// how many (ZREMRANGEBYSCORE). The caller deletes the key when the set is
// left empty.
func (z *ZSet) RemRangeByScore(r ScoreRange) int {
	lo, hi := z.scoreRanks(r)
	return z.removeRanks(lo, hi)
}

// RemRangeByRank removes the members from rank start to stop inclusive,
// clamped as ZREMRANGEBYRANK clamps them, and returns how many.
func (z *ZSet) RemRangeByRank(start, stop int) int {
	lo, hi := IndexRange(start, stop, z.Card())
	return z.removeRanks(lo, hi)
}

// removeRanks removes the members of ranks [lo, hi).
func (z *ZSet) removeRanks(lo, hi int) int {
	n := hi - lo
	if n <= 0 {
		return 0
	}
	if n == z.tree.Len() {
		clear(z.dict)
		z.tree.Clear()
		z.bytes = 0
		return n
	}
	first, _ := z.tree.GetAt(lo)
	last, _ := z.tree.GetAt(hi - 1)
	left := n
	z.tree.Ascend(first, func(it zitem) bool {
		delete(z.dict, it.member)
		z.bytes -= len(it.member)
		left--
		return left > 0
	})
	z.tree.DeleteRange(first, last, &btree.DeleteRangeOptions{NoReturn: true, MaxInclusive: true})
	return n
}

// All yields every member and its score, lowest first. The set must not
// change during the walk.
func (z *ZSet) All() iter.Seq2[string, float64] {
	return func(yield func(string, float64) bool) {
		z.tree.Scan(func(it zitem) bool { return yield(it.member, it.score) })
	}
}
