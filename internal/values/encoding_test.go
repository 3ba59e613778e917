package values

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// randomHash, randomList and randomZSet build values by random operations
// (so with deletions, tombstones and wrapped rings), of up to n elements.
func randomHash(r *rand.Rand, n int) *Hash {
	h := NewHash()
	for range n {
		f, v := pick(r, modelKeys)+pick(r, modelKeys), pick(r, modelValues)
		if r.IntN(4) == 0 {
			h.Del([]byte(f))
		} else {
			_, _ = h.Set(Limits{}, bs(f, v))
		}
	}
	return h
}

func randomList(r *rand.Rand, n int) *List {
	l := NewList()
	for range n {
		switch r.IntN(4) {
		case 0:
			l.PopLeft()
		case 1:
			_, _ = l.PushRight(Limits{}, []byte(pick(r, modelValues)))
		default:
			_, _ = l.PushLeft(Limits{}, []byte(pick(r, modelValues)))
		}
	}
	return l
}

func randomZSet(r *rand.Rand, n int) *ZSet {
	z := NewZSet()
	for range n {
		m := pick(r, modelKeys) + pick(r, modelKeys)
		if r.IntN(4) == 0 {
			z.Rem([]byte(m))
		} else {
			_, _ = z.Add(Limits{}, ZAddOptions{}, [][]byte{scoreText(pick(r, modelScores)), []byte(m)})
		}
	}
	return z
}

// roundTrip checks that v's encoding decodes into a value that encodes to
// the same bytes, with the same Size, consistent, and within Size plus
// maxHeader.
func roundTrip[T value](t *testing.T, v T, decode func([]byte) (T, error), check func(T) error) {
	t.Helper()
	enc := v.AppendBinary([]byte("prefix"))[len("prefix"):]
	if len(enc) > v.Size()+maxHeader {
		t.Fatalf("encoding of %d bytes exceeds Size %d + %d", len(enc), v.Size(), maxHeader)
	}
	got, err := decode(bytes.Clone(enc))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if err := check(got); err != nil {
		t.Fatalf("decoded value: %v", err)
	}
	if again := got.AppendBinary(nil); !bytes.Equal(again, enc) || got.Size() != v.Size() {
		t.Fatalf("round trip changed the value: %q (Size %d) became %q (Size %d)", enc, v.Size(), again, got.Size())
	}
}

func TestRoundTrips(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 9))
		n := r.IntN(300)
		roundTrip(t, randomHash(r, n), DecodeHash, (*Hash).checkConsistency)
		roundTrip(t, randomList(r, n), DecodeList, (*List).checkConsistency)
		roundTrip(t, randomZSet(r, n), DecodeZSet, (*ZSet).checkConsistency)
	}
	// The decoded values work as any other: mutate one.
	z, _ := DecodeZSet(zsetOf(t, "1", "a", "2", "b").AppendBinary(nil))
	if _, err := z.Add(Limits{}, ZAddOptions{}, bs("0", "c")); err != nil || members(z.AppendRangeByRank(nil, 0, -1, false)) != "cab" {
		t.Errorf("decoded set after ZADD: %v", err)
	}
	l, _ := DecodeList(listOf(t, "a", "b").AppendBinary(nil))
	if _, err := l.PushLeft(Limits{}, []byte("c")); err != nil || dumpList(l) != `"c" "a" "b" ` {
		t.Errorf("decoded list after LPUSH: %s, %v", dumpList(l), err)
	}
}

// TestEncodingsAreBounded checks Size's promise at the extremes: many
// empty elements (length prefixes only) and one huge one.
func TestEncodingsAreBounded(t *testing.T) {
	h, l, z := NewHash(), NewList(), NewZSet()
	for i := range 1000 {
		k := []byte(strings.Repeat("k", i%3))
		_, _ = h.Set(Limits{}, [][]byte{append(k, byte(i), byte(i>>8)), nil})
		_, _ = l.PushRight(Limits{}, nil)
		_, _ = z.Add(Limits{}, ZAddOptions{}, [][]byte{[]byte("1"), {byte(i), byte(i >> 8)}})
	}
	big := bytes.Repeat([]byte("x"), 1<<20)
	_, _ = h.Set(Limits{}, [][]byte{big, big})
	_, _ = l.PushRight(Limits{}, big)
	_, _ = z.Add(Limits{}, ZAddOptions{}, [][]byte{[]byte("2"), big})
	for _, v := range []value{h, l, z} {
		if n := len(v.AppendBinary(nil)); n > v.Size()+maxHeader {
			t.Errorf("%T: encoding of %d bytes, Size %d", v, n, v.Size())
		}
	}
}

func uv(vs ...uint64) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func score(f float64) []byte { return binary.LittleEndian.AppendUint64(nil, math.Float64bits(f)) }

func TestDecodersRefuseGarbage(t *testing.T) {
	one := []byte("a")
	tests := []struct {
		name   string
		decode func([]byte) error
		in     []byte
	}{
		{"hash empty input", decodeHashErr, nil},
		{"hash huge count", decodeHashErr, uv(1 << 62)},
		{"hash count past the bytes", decodeHashErr, uv(3, 0, 0, 0, 0)},
		{"hash field cut short", decodeHashErr, uv(1, 5, 'a')},
		{"hash duplicate field", decodeHashErr, cat(uv(2, 1), one, uv(0, 1), one, uv(0))},
		{"hash trailing byte", decodeHashErr, cat(uv(1, 1), one, uv(0), []byte{0})},
		{"hash long varint", decodeHashErr, []byte{0x81, 0x00, 0, 0}},
		{"hash varint overflow", decodeHashErr, bytes.Repeat([]byte{0xff}, 11)},
		{"list huge length", decodeListErr, cat(uv(1), uv(math.MaxUint64))},
		{"list count past the bytes", decodeListErr, uv(2, 0)},
		{"list trailing", decodeListErr, cat(uv(1, 0), one)},
		{"zset NaN", decodeZSetErr, cat(uv(1, 1), one, score(math.NaN()))},
		{"zset -0", decodeZSetErr, cat(uv(1, 1), one, score(math.Copysign(0, -1)))},
		{"zset score cut short", decodeZSetErr, cat(uv(1, 1), one, score(1)[:7])},
		{"zset out of order", decodeZSetErr, cat(uv(2, 1), []byte("b"), score(1), uv(1), one, score(1))},
		{"zset same item twice", decodeZSetErr, cat(uv(2, 1), one, score(1), uv(1), one, score(1))},
		{"zset duplicate member", decodeZSetErr, cat(uv(2, 1), one, score(1), uv(1), one, score(2))},
		{"zset count past the bytes", decodeZSetErr, cat(uv(2, 1), one, score(1))},
	}
	for _, tt := range tests {
		if err := tt.decode(tt.in); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", tt.name, err)
		}
	}
	// The boundary cases decode.
	for name, in := range map[string][]byte{
		"hash":  cat(uv(1, 1), one, uv(0)),
		"empty": uv(0),
	} {
		if err := decodeHashErr(in); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := decodeZSetErr(cat(uv(2, 0), score(math.Inf(-1)), uv(1), one, score(math.Inf(1)))); err != nil {
		t.Errorf("zset of the empty member at -inf and a at +inf: %v", err)
	}
}

func decodeHashErr(b []byte) error { _, err := DecodeHash(b); return err }
func decodeListErr(b []byte) error { _, err := DecodeList(b); return err }
func decodeZSetErr(b []byte) error { _, err := DecodeZSet(b); return err }

// fuzzDecode checks a decoder on any input: no panic, and whatever it
// accepts is consistent and encodes back to the very same bytes.
func fuzzDecode[T value](f *testing.F, seeds []T, decode func([]byte) (T, error), check func(T) error) {
	for _, s := range seeds {
		f.Add(s.AppendBinary(nil))
	}
	f.Add([]byte{})
	f.Add(uv(1 << 40))
	f.Fuzz(func(t *testing.T, in []byte) {
		v, err := decode(in)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if err := check(v); err != nil {
			t.Fatal(err)
		}
		if out := v.AppendBinary(nil); !bytes.Equal(out, in) {
			t.Fatalf("accepted %q but encodes it as %q", in, out)
		}
	})
}

func FuzzDecodeHash(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 1))
	fuzzDecode(f, []*Hash{NewHash(), randomHash(r, 5), randomHash(r, 40)}, DecodeHash, (*Hash).checkConsistency)
}

func FuzzDecodeList(f *testing.F) {
	r := rand.New(rand.NewPCG(2, 2))
	fuzzDecode(f, []*List{NewList(), randomList(r, 5), randomList(r, 40)}, DecodeList, (*List).checkConsistency)
}

func FuzzDecodeZSet(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 3))
	fuzzDecode(f, []*ZSet{NewZSet(), randomZSet(r, 5), randomZSet(r, 40)}, DecodeZSet, (*ZSet).checkConsistency)
}
