package records

// arena holds long keys' bytes in blocks: a key is written once, within one
// block, and never moved while its arena lives, and growing the arena
// allocates one block rather than copying everything it holds (a large
// slice grown by append is copied whole, and a fresh one zeroed whole, which
// at millions of keys held one call for milliseconds). Blocks double from
// firstBlock up to maxBlock, so a table with few long keys holds little. A
// key longer than a block gets a block of its own.
//
// A key's place is one uint64: its block's number in the high 32 bits, its
// offset in that block in the low 32.
type arena struct {
	blocks [][]byte
	bytes  int // bytes written: live keys and garbage
	capa   int // bytes allocated
}

const (
	firstBlock = 256
	maxBlock   = 1 << 20
)

// add writes key and returns its place.
func (a *arena) add(key []byte) uint64 {
	n := len(a.blocks)
	if n == 0 || cap(a.blocks[n-1])-len(a.blocks[n-1]) < len(key) {
		size := firstBlock
		if n > 0 {
			size = min(2*cap(a.blocks[n-1]), maxBlock)
		}
		size = max(size, len(key))
		a.blocks = append(a.blocks, make([]byte, 0, size))
		a.capa += size
		n++
	}
	b := &a.blocks[n-1]
	place := uint64(n-1)<<32 | uint64(len(*b))
	*b = append(*b, key...)
	a.bytes += len(key)
	return place
}

// key returns the length bytes at place.
func (a *arena) key(place uint64, length int) []byte {
	b := a.blocks[place>>32]
	p := place & (1<<32 - 1)
	return b[p : p+uint64(length) : p+uint64(length)]
}
