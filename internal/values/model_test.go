package values

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Property tests: random sequences of operations applied to a value and to
// a naive model written independently (slices and maps, sorting on every
// read), compared after every operation together with the value's
// invariants. A failure names the seed and step.

const (
	modelSeeds = 60
	modelSteps = 400
)

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

var (
	modelKeys   = []string{"a", "b", "c", "d", "e", "f", "", "long-field-name-0123456789"}
	modelValues = []string{"", "x", "1", "-5", "9223372036854775806", "-9223372036854775807", "05", "abc",
		"0", "-0", "10", strings.Repeat("v", 64), strings.Repeat("w", 100)}
)

func bs(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// hashModel keeps fields in first-added order, as Hash documents.
type hashModel struct {
	order []string
	vals  map[string]string
}

func (m *hashModel) set(f, v string) int {
	if _, ok := m.vals[f]; ok {
		m.vals[f] = v
		return 0
	}
	m.order = append(m.order, f)
	m.vals[f] = v
	return 1
}

func (m *hashModel) del(f string) int {
	if _, ok := m.vals[f]; !ok {
		return 0
	}
	delete(m.vals, f)
	m.order = slices.DeleteFunc(m.order, func(x string) bool { return x == f })
	return 1
}

// incrBy follows HINCRBY: a stored integer must be in canonical decimal
// form, which is exactly what FormatInt writes back.
func (m *hashModel) incrBy(f string, incr int64) string {
	var cur int64
	if s, ok := m.vals[f]; ok {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || strconv.FormatInt(v, 10) != s {
			return fmt.Sprint(0, ErrHashValueNotInteger)
		}
		cur = v
	}
	sum := cur + incr
	if (incr > 0 && sum < cur) || (incr < 0 && sum > cur) {
		return fmt.Sprint(0, ErrOverflow)
	}
	m.set(f, strconv.FormatInt(sum, 10))
	return fmt.Sprint(sum, nil)
}

func (m *hashModel) dump() string {
	var b strings.Builder
	for _, f := range m.order {
		fmt.Fprintf(&b, "%q=%q ", f, m.vals[f])
	}
	return b.String()
}

func dumpHash(h *Hash) string {
	var b strings.Builder
	for f, v := range h.All() {
		fmt.Fprintf(&b, "%q=%q ", f, v)
	}
	return b.String()
}

func TestHashAgainstModel(t *testing.T) {
	for seed := range uint64(modelSeeds) {
		r := rand.New(rand.NewPCG(seed, 1))
		h, m := NewHash(), &hashModel{vals: map[string]string{}}
		for step := range modelSteps {
			f, f2, v, v2 := pick(r, modelKeys), pick(r, modelKeys), pick(r, modelValues), pick(r, modelValues)
			var got, want string
			switch r.IntN(6) {
			case 0, 1:
				n, err := h.Set(Limits{}, bs(f, v, f2, v2))
				got, want = fmt.Sprint(n, err), fmt.Sprint(m.set(f, v)+m.set(f2, v2), nil)
			case 2:
				ok, err := h.SetNX(Limits{}, []byte(f), []byte(v))
				_, exists := m.vals[f]
				if !exists {
					m.set(f, v)
				}
				got, want = fmt.Sprint(ok, err), fmt.Sprint(!exists, nil)
			case 3:
				got = fmt.Sprint(h.Del([]byte(f), []byte(f), []byte(f2)))
				want = fmt.Sprint(m.del(f) + m.del(f) + m.del(f2))
			case 4:
				incr := pick(r, []int64{1, -1, 7, math.MaxInt64, math.MinInt64, 0})
				sum, err := h.IncrBy(Limits{}, []byte(f), incr)
				got, want = fmt.Sprint(sum, err), m.incrBy(f, incr)
			case 5:
				val, ok := h.Get([]byte(f))
				mv, mok := m.vals[f]
				got = fmt.Sprint(string(val), ok, h.Exists([]byte(f)), h.Len())
				want = fmt.Sprint(mv, mok, mok, len(m.vals))
			}
			if got != want {
				t.Fatalf("seed %d step %d: got %s, model %s", seed, step, got, want)
			}
			if err := h.checkConsistency(); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			if d := dumpHash(h); d != m.dump() {
				t.Fatalf("seed %d step %d:\nhash  %s\nmodel %s", seed, step, d, m.dump())
			}
		}
	}
}

// listModel is a plain slice; its index rules are restated from Redis's
// documentation rather than shared with IndexRange.
type listModel []string

// span returns the positions LRANGE start stop covers.
func (m listModel) span(start, stop int) []int {
	n := len(m)
	if start < 0 {
		start = max(n+start, 0)
	}
	if stop < 0 {
		stop = n + stop
	}
	var out []int
	for i := 0; i < n; i++ {
		if i >= start && i <= stop {
			out = append(out, i)
		}
	}
	return out
}

func dumpList(l *List) string {
	var b strings.Builder
	for e := range l.All() {
		fmt.Fprintf(&b, "%q ", e)
	}
	return b.String()
}

func (m listModel) dump() string {
	var b strings.Builder
	for _, e := range m {
		fmt.Fprintf(&b, "%q ", e)
	}
	return b.String()
}

func TestListAgainstModel(t *testing.T) {
	idx := []int{0, 1, 2, 3, -1, -2, -3, -50, 50, 7, -8}
	for seed := range uint64(modelSeeds) {
		r := rand.New(rand.NewPCG(seed, 2))
		l, m := NewList(), listModel{}
		for step := range modelSteps {
			v, v2 := pick(r, modelValues[:8]), pick(r, modelValues)
			var got, want string
			switch r.IntN(10) {
			case 0, 1:
				n, err := l.PushLeft(Limits{}, []byte(v), []byte(v2))
				m = append(listModel{v2, v}, m...)
				got, want = fmt.Sprint(n, err), fmt.Sprint(len(m), nil)
			case 2, 3:
				n, err := l.PushRight(Limits{}, []byte(v), []byte(v2), []byte(v))
				m = append(m, v, v2, v)
				got, want = fmt.Sprint(n, err), fmt.Sprint(len(m), nil)
			case 4:
				count := r.IntN(4)
				if r.IntN(2) == 0 {
					got = fmt.Sprintf("%q", l.AppendPopLeft(nil, count))
					k := min(count, len(m))
					want = fmt.Sprintf("%q", bs(m[:k]...))
					m = m[k:]
				} else {
					got = fmt.Sprintf("%q", l.AppendPopRight(nil, count))
					var w []string
					for ; count > 0 && len(m) > 0; count-- {
						w, m = append(w, m[len(m)-1]), m[:len(m)-1]
					}
					want = fmt.Sprintf("%q", bs(w...))
				}
			case 5:
				i := pick(r, idx)
				e, ok := l.Index(i)
				got = fmt.Sprintf("%q %v", e, ok)
				want = "\"\" false"
				if j := i + len(m)*boolInt(i < 0); j >= 0 && j < len(m) {
					want = fmt.Sprintf("%q true", m[j])
				}
			case 6:
				start, stop := pick(r, idx), pick(r, idx)
				got = fmt.Sprintf("%q", l.AppendRange(nil, start, stop))
				var w []string
				for _, i := range m.span(start, stop) {
					w = append(w, m[i])
				}
				want = fmt.Sprintf("%q", bs(w...))
			case 7:
				start, stop := pick(r, idx), pick(r, idx)
				got = fmt.Sprint(l.Trim(start, stop))
				var kept listModel
				for _, i := range m.span(start, stop) {
					kept = append(kept, m[i])
				}
				want = fmt.Sprint(len(m) - len(kept))
				m = kept
			case 8:
				count := r.IntN(7) - 3
				got = fmt.Sprint(l.Rem(count, []byte(v)))
				want = fmt.Sprint(m.rem(&m, count, v))
			case 9:
				i := pick(r, idx)
				err := l.Set(Limits{}, i, []byte(v2))
				got, want = fmt.Sprint(err), fmt.Sprint(ErrIndexOutOfRange)
				if j := i + len(m)*boolInt(i < 0); j >= 0 && j < len(m) {
					m[j], want = v2, fmt.Sprint(nil)
				}
			}
			if got != want {
				t.Fatalf("seed %d step %d: got %s, model %s", seed, step, got, want)
			}
			if err := l.checkConsistency(); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			if d := dumpList(l); d != m.dump() || l.Len() != len(m) {
				t.Fatalf("seed %d step %d:\nlist  %s\nmodel %s", seed, step, d, m.dump())
			}
		}
	}
}

// rem removes as LREM documents and stores the result in *out.
func (m listModel) rem(out *listModel, count int, v string) int {
	keep := make([]bool, len(m))
	removed := 0
	order := make([]int, len(m))
	for i := range order {
		order[i] = i
		if count < 0 {
			order[i] = len(m) - 1 - i
		}
	}
	limit := count
	if limit < 0 {
		limit = -limit
	}
	for _, i := range order {
		if m[i] == v && (limit == 0 || removed < limit) {
			removed++
			continue
		}
		keep[i] = true
	}
	var kept listModel
	for i, k := range keep {
		if k {
			kept = append(kept, m[i])
		}
	}
	*out = kept
	return removed
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// zsetModel is a member → score map, sorted on every read.
type zsetModel map[string]float64

func (m zsetModel) sorted() []ScoredMember {
	out := make([]ScoredMember, 0, len(m))
	for k, s := range m {
		out = append(out, ScoredMember{k, s})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score < out[j].Score
		}
		return out[i].Member < out[j].Member
	})
	return out
}

// add restates zsetAdd's rules for one pair; it returns the reply pieces
// (added, updated, resulting score or NaN for no change) or a NaN error.
func (m zsetModel) add(o ZAddOptions, score float64, member string) (int, int, float64, error) {
	cur, ok := m[member]
	switch {
	case !ok && o.XX:
		return 0, 0, math.NaN(), nil
	case !ok:
		m[member] = score + 0 // -0 is stored as 0
		return 1, 0, score, nil
	case o.NX:
		return 0, 0, math.NaN(), nil
	}
	if o.Incr {
		score += cur
		if math.IsNaN(score) {
			return 0, 0, 0, ErrScoreNaN
		}
	}
	if o.GT && score <= cur || o.LT && score >= cur {
		return 0, 0, math.NaN(), nil
	}
	if score != cur {
		m[member] = score + 0
		return 0, 1, score, nil
	}
	return 0, 0, score, nil
}

func (m zsetModel) inRange(r ScoreRange) []ScoredMember {
	var out []ScoredMember
	for _, sm := range m.sorted() {
		lowOK := sm.Score > r.Min || !r.MinExclusive && sm.Score == r.Min
		highOK := sm.Score < r.Max || !r.MaxExclusive && sm.Score == r.Max
		if lowOK && highOK {
			out = append(out, sm)
		}
	}
	return out
}

var (
	modelScores = []float64{0, 1, 1, 2, 2.5, -1, -3, 0.1, 1e300, math.Inf(1), math.Inf(-1), math.Copysign(0, -1)}
	modelBounds = []float64{0, 1, 2, -1, 2.5, math.Inf(1), math.Inf(-1), 1e300, math.NaN()}
)

func randomRange(r *rand.Rand) ScoreRange {
	b := func() float64 {
		x := pick(r, modelBounds)
		if math.IsNaN(x) {
			return float64(r.IntN(5) - 2)
		}
		return x
	}
	return ScoreRange{Min: b(), Max: b(), MinExclusive: r.IntN(3) == 0, MaxExclusive: r.IntN(3) == 0}
}

func scoreText(f float64) []byte { return AppendScore(nil, f) }

func TestZSetAgainstModel(t *testing.T) {
	members := []string{"a", "b", "c", "d", "e", "f", "g", "", "m1", "m2"}
	idx := []int{0, 1, 2, 3, -1, -2, -3, -50, 50, 7, -8}
	for seed := range uint64(modelSeeds) {
		r := rand.New(rand.NewPCG(seed, 3))
		z, m := NewZSet(), zsetModel{}
		for step := range modelSteps {
			var got, want string
			switch r.IntN(9) {
			case 0, 1, 2:
				o := ZAddOptions{NX: r.IntN(6) == 0, XX: r.IntN(6) == 0, GT: r.IntN(6) == 0, LT: r.IntN(6) == 0,
					CH: r.IntN(2) == 0, Incr: r.IntN(5) == 0}
				pairs := 1 + r.IntN(3)
				if o.Incr {
					pairs = 1
				}
				var args [][]byte
				var scores []float64
				var names []string
				for range pairs {
					s, mem := pick(r, modelScores), pick(r, members)
					args = append(args, scoreText(s), []byte(mem))
					scores, names = append(scores, s), append(names, mem)
				}
				res, err := z.Add(Limits{}, o, args)
				got = fmt.Sprint(res, err)
				want = m.zadd(o, scores, names)
			case 3:
				a, b := pick(r, members), pick(r, members)
				got = fmt.Sprint(z.Rem([]byte(a), []byte(b)))
				n := 0
				for _, x := range []string{a, b} {
					if _, ok := m[x]; ok {
						delete(m, x)
						n++
					}
				}
				want = fmt.Sprint(n)
			case 4:
				rg := randomRange(r)
				got, want = fmt.Sprint(z.Count(rg)), fmt.Sprint(len(m.inRange(rg)))
			case 5:
				start, stop, rev := pick(r, idx), pick(r, idx), r.IntN(2) == 0
				got = fmt.Sprint(z.AppendRangeByRank(nil, start, stop, rev))
				all := m.sorted()
				if rev {
					slices.Reverse(all)
				}
				var w []ScoredMember
				for _, i := range listModel(make([]string, len(all))).span(start, stop) {
					w = append(w, all[i])
				}
				want = fmt.Sprint(w)
			case 6:
				rg, rev := randomRange(r), r.IntN(2) == 0
				offset, count := r.IntN(4)-1, r.IntN(5)-1
				got = fmt.Sprint(z.AppendRangeByScore(nil, rg, rev, offset, count))
				in := m.inRange(rg)
				if rev {
					slices.Reverse(in)
				}
				var w []ScoredMember
				if offset >= 0 {
					for i := offset; i < len(in) && (count < 0 || i < offset+count); i++ {
						w = append(w, in[i])
					}
				}
				want = fmt.Sprint(w)
			case 7:
				rg := randomRange(r)
				in := m.inRange(rg)
				for _, sm := range in {
					delete(m, sm.Member)
				}
				got, want = fmt.Sprint(z.RemRangeByScore(rg)), fmt.Sprint(len(in))
			case 8:
				start, stop := pick(r, idx), pick(r, idx)
				all := m.sorted()
				span := listModel(make([]string, len(all))).span(start, stop)
				for _, i := range span {
					delete(m, all[i].Member)
				}
				got, want = fmt.Sprint(z.RemRangeByRank(start, stop)), fmt.Sprint(len(span))
			}
			if got != want {
				t.Fatalf("seed %d step %d: got %s, model %s", seed, step, got, want)
			}
			if err := z.checkConsistency(); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			all := fmt.Sprint(z.AppendRangeByRank(nil, 0, -1, false))
			if all != fmt.Sprint(m.sorted()) || z.Card() != len(m) {
				t.Fatalf("seed %d step %d:\nzset  %s\nmodel %v", seed, step, all, m.sorted())
			}
		}
	}
}

// zadd restates ZADD over the model: option errors first, then each pair.
func (m zsetModel) zadd(o ZAddOptions, scores []float64, names []string) string {
	switch {
	case o.NX && o.XX:
		return fmt.Sprint(ZAddResult{}, ErrXXAndNX)
	case o.NX && (o.GT || o.LT) || o.GT && o.LT:
		return fmt.Sprint(ZAddResult{}, ErrGTLTNX)
	}
	var res ZAddResult
	for i := range scores {
		added, updated, s, err := m.add(o, scores[i], names[i])
		if err != nil {
			return fmt.Sprint(ZAddResult{}, err)
		}
		res.Added += added
		res.Updated += updated
		if o.Incr && !math.IsNaN(s) {
			res.Score, res.Done = s, true
		}
	}
	return fmt.Sprint(res, nil)
}
