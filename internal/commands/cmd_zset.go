package commands

import (
	"math"

	"github.com/rlserver/rlserver/internal/service"
	"github.com/rlserver/rlserver/internal/values"
)

// The sorted-set commands, over values.ZSet, with Redis 7.0's semantics
// and words. Lexicographic ranges (BYLEX, ZRANGEBYLEX) are not offered.

var (
	errLimitNeedsRange = replyError("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
	errByLex           = replyError("ERR BYLEX is not supported: rlserver's sorted sets have no lexicographic ranges")
)

// zsetCommands returns the sorted-set commands.
func zsetCommands() []*command {
	return []*command{
		&command{name: "zadd", arity: -4, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysUpdate,
			group: groupSortedSet, since: "1.2.0",
			summary: "Add members with scores, or update them: ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member ...",
			exec:    execZAdd},
		&command{name: "zincrby", arity: 4, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysReadWrite,
			group: groupSortedSet, since: "1.2.0",
			summary: "Add to a member's score; returns the new score.", exec: execZIncrBy},
		&command{name: "zrem", arity: -3, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysDelete,
			group: groupSortedSet, since: "1.2.0",
			summary: "Remove members; returns how many existed.", exec: execZRem},
		&command{name: "zscore", arity: 3, flags: flagReadonly | flagFast, keys: oneKey, keyFlags: keysRead,
			group: groupSortedSet, since: "1.2.0",
			summary: "A member's score.", exec: execZScore},
		&command{name: "zcard", arity: 2, flags: flagReadonly | flagFast, keys: oneKey, keyFlags: keysReadNoData,
			group: groupSortedSet, since: "1.2.0",
			summary: "The number of members.", exec: execZCard},
		&command{name: "zcount", arity: 4, flags: flagReadonly | flagFast, keys: oneKey, keyFlags: keysRead,
			group: groupSortedSet, since: "2.0.0",
			summary: "The number of members with scores between min and max.", exec: execZCount},
		&command{name: "zrange", arity: -4, flags: flagReadonly, keys: oneKey, keyFlags: keysRead,
			group: groupSortedSet, since: "1.2.0",
			summary: "Members by rank or score: ZRANGE key start stop [BYSCORE] [REV] [LIMIT offset count] [WITHSCORES].",
			exec:    execZRange(zrangeAuto), valueReply: always},
		&command{name: "zrevrange", arity: -4, flags: flagReadonly, keys: oneKey, keyFlags: keysRead,
			group: groupSortedSet, since: "1.2.0",
			summary: "Members by rank, highest score first [WITHSCORES].",
			exec:    execZRange(zrangeRevRank), valueReply: always},
		&command{name: "zrangebyscore", arity: -4, flags: flagReadonly, keys: oneKey, keyFlags: keysRead,
			group: groupSortedSet, since: "1.0.5",
			summary: "Members with scores between min and max [WITHSCORES] [LIMIT offset count].",
			exec:    execZRange(zrangeScore), valueReply: always},
		&command{name: "zrevrangebyscore", arity: -4, flags: flagReadonly, keys: oneKey, keyFlags: keysRead,
			group: groupSortedSet, since: "2.2.0",
			summary: "Members with scores between max and min, highest first [WITHSCORES] [LIMIT offset count].",
			exec:    execZRange(zrangeRevScore), valueReply: always},
		&command{name: "zremrangebyscore", arity: 4, flags: flagWrite, keys: oneKey, keyFlags: keysDelete,
			group: groupSortedSet, since: "1.2.0",
			summary: "Remove the members with scores between min and max.", exec: execZRemRange(true)},
		&command{name: "zremrangebyrank", arity: 4, flags: flagWrite, keys: oneKey, keyFlags: keysDelete,
			group: groupSortedSet, since: "2.0.0",
			summary: "Remove the members from rank start to stop.", exec: execZRemRange(false)},
	}
}

// parseZAddOptions reads ZADD's options, which come before the first score:
// it returns them and the index of the first score.
func parseZAddOptions(args [][]byte) (values.ZAddOptions, int) {
	var o values.ZAddOptions
	i := 2
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case equalFold(a, "nx"):
			o.NX = true
		case equalFold(a, "xx"):
			o.XX = true
		case equalFold(a, "gt"):
			o.GT = true
		case equalFold(a, "lt"):
			o.LT = true
		case equalFold(a, "ch"):
			o.CH = true
		case equalFold(a, "incr"):
			o.Incr = true
		default:
			return o, i
		}
	}
	return o, i
}

// zsetForWrite returns key's sorted set, or a new one (not yet stored) if
// the key is missing, and whether the key existed.
func zsetForWrite(db *service.DB, key []byte) (*values.ZSet, bool, error) {
	z, ok, err := lookupValue[*values.ZSet](db, key)
	if err == nil && !ok {
		z = values.NewZSet()
	}
	return z, ok, err
}

func execZAdd(x *keyed, db *service.DB) error {
	opts, first := parseZAddOptions(x.args)
	z, existed, err := zsetForWrite(db, x.args[1])
	if err != nil {
		return zaddArgsError(opts, x.args[first:], err)
	}
	r, err := z.Add(valueLimits(db), opts, x.args[first:])
	if err != nil {
		return err
	}
	if err := store(db, x.args[1], z, existed, z.Card()); err != nil {
		return err
	}
	switch {
	case opts.Incr && r.Done:
		writeScore(x, r.Score)
	case opts.Incr:
		x.out.Null()
	default:
		x.out.Integer(int64(r.Count(opts)))
	}
	return nil
}

// zaddArgsError returns the error ZADD answers when its key holds another
// type (lookupErr): Redis checks the options and scores first, so their
// error, if any, comes before WRONGTYPE. They are checked by adding them to
// an empty set that is then dropped; a limit it crosses is not ZADD's
// error here.
func zaddArgsError(opts values.ZAddOptions, pairs [][]byte, lookupErr error) error {
	_, err := values.NewZSet().Add(values.Limits{MaxElements: math.MaxInt, MaxSize: math.MaxInt}, opts, pairs)
	if err != nil {
		return err
	}
	return lookupErr
}

func execZIncrBy(x *keyed, db *service.DB) error {
	incr, err := values.ParseScore(x.args[2])
	if err != nil {
		return err
	}
	z, existed, err := zsetForWrite(db, x.args[1])
	if err != nil {
		return err
	}
	score, err := z.IncrBy(valueLimits(db), incr, x.args[3])
	if err != nil {
		return err
	}
	if err := store(db, x.args[1], z, existed, z.Card()); err != nil {
		return err
	}
	writeScore(x, score)
	return nil
}

// writeScore writes a score as Redis does: a bulk string in RESP2, a
// double in RESP3, in "%.17g".
func writeScore(x *keyed, score float64) {
	var buf [32]byte
	x.out.Double(values.AppendScore(buf[:0], score))
}

func execZRem(x *keyed, db *service.DB) error {
	return execRemove(x, db, (*values.ZSet).Rem, (*values.ZSet).Card)
}

func execZScore(x *keyed, db *service.DB) error {
	z, ok, err := lookupValue[*values.ZSet](db, x.args[1])
	if err != nil {
		return err
	}
	if ok {
		if s, found := z.Score(x.args[2]); found {
			writeScore(x, s)
			return nil
		}
	}
	x.out.Null()
	return nil
}

func execZCard(x *keyed, db *service.DB) error { return execCount(x, db, (*values.ZSet).Card) }

func execZCount(x *keyed, db *service.DB) error {
	r, err := values.ParseScoreRange(x.args[2], x.args[3])
	if err != nil {
		return err
	}
	z, ok, err := lookupValue[*values.ZSet](db, x.args[1])
	if err != nil {
		return err
	}
	n := 0
	if ok {
		n = z.Count(r)
	}
	x.out.Integer(int64(n))
	return nil
}

// zrangeForm is which command a range comes from: ZRANGE reads its options
// to choose; the others are fixed.
type zrangeForm uint8

const (
	zrangeAuto zrangeForm = iota
	zrangeRevRank
	zrangeScore
	zrangeRevScore
)

// zrangeQuery is a parsed range request.
type zrangeQuery struct {
	byScore, rev, withScores bool
	offset, count            int
	start, stop              int
	scores                   values.ScoreRange
}

// parseZRange reads a range command's arguments as Redis 7.0's
// zrangeGenericCommand does: options after the two bounds, in any order
// (ZREVRANGE takes WITHSCORES only), then the bounds by the form chosen.
func parseZRange(args [][]byte, form zrangeForm) (zrangeQuery, error) {
	q := zrangeQuery{count: -1, byScore: form == zrangeScore || form == zrangeRevScore,
		rev: form == zrangeRevRank || form == zrangeRevScore}
	limit := false
	for i := 4; i < len(args); i++ {
		a := args[i]
		switch {
		case equalFold(a, "withscores"):
			q.withScores = true
		case equalFold(a, "limit") && i+2 < len(args):
			off, ok1 := parseInt(args[i+1])
			cnt, ok2 := parseInt(args[i+2])
			if !ok1 || !ok2 {
				return q, errNotInteger
			}
			q.offset, q.count, limit = int(off), int(cnt), true
			i += 2
		case form == zrangeAuto && equalFold(a, "rev"):
			q.rev = true
		case form == zrangeAuto && equalFold(a, "byscore"):
			q.byScore = true
		case form == zrangeAuto && equalFold(a, "bylex"):
			return q, errByLex
		default:
			return q, errSyntax
		}
	}
	if limit && !q.byScore {
		return q, errLimitNeedsRange
	}
	lo, hi := args[2], args[3]
	if q.byScore {
		if q.rev {
			lo, hi = hi, lo // the reversed forms take max first
		}
		r, err := values.ParseScoreRange(lo, hi)
		q.scores = r
		return q, err
	}
	start, err := parseIndex(lo)
	if err != nil {
		return q, err
	}
	stop, err := parseIndex(hi)
	q.start, q.stop = start, stop
	return q, err
}

// execZRange runs ZRANGE, ZREVRANGE, ZRANGEBYSCORE and ZREVRANGEBYSCORE.
// WITHSCORES pairs each member with its score: flat in RESP2, as [member,
// score] arrays in RESP3, as Redis replies.
func execZRange(form zrangeForm) func(x *keyed, db *service.DB) error {
	return func(x *keyed, db *service.DB) error {
		q, err := parseZRange(x.args, form)
		if err != nil {
			return err
		}
		z, ok, err := lookupValue[*values.ZSet](db, x.args[1])
		if err != nil {
			return err
		}
		if !ok {
			x.out.Array(0)
			return nil
		}
		var buf [32]values.ScoredMember
		var ms []values.ScoredMember
		if q.byScore {
			ms = z.AppendRangeByScore(buf[:0], q.scores, q.rev, q.offset, q.count)
		} else {
			ms = z.AppendRangeByRank(buf[:0], q.start, q.stop, q.rev)
		}
		pairs := q.withScores && x.out.Proto() == 3
		switch {
		case q.withScores && !pairs:
			x.out.Array(2 * len(ms))
		default:
			x.out.Array(len(ms))
		}
		for _, m := range ms {
			if pairs {
				x.out.Array(2)
			}
			x.out.BulkString(m.Member)
			if q.withScores {
				writeScore(x, m.Score)
			}
		}
		return nil
	}
}

// execZRemRange runs ZREMRANGEBYSCORE (byScore) and ZREMRANGEBYRANK.
func execZRemRange(byScore bool) func(x *keyed, db *service.DB) error {
	return func(x *keyed, db *service.DB) error {
		var r values.ScoreRange
		var start, stop int
		var err error
		if byScore {
			r, err = values.ParseScoreRange(x.args[2], x.args[3])
		} else if start, err = parseIndex(x.args[2]); err == nil {
			stop, err = parseIndex(x.args[3])
		}
		if err != nil {
			return err
		}
		z, ok, err := lookupValue[*values.ZSet](db, x.args[1])
		switch {
		case err != nil:
			return err
		case !ok:
			x.out.Integer(0)
			return nil
		}
		var n int
		if byScore {
			n = z.RemRangeByScore(r)
		} else {
			n = z.RemRangeByRank(start, stop)
		}
		if n > 0 {
			if err := store(db, x.args[1], z, true, z.Card()); err != nil {
				return err
			}
		}
		x.out.Integer(int64(n))
		return nil
	}
}
