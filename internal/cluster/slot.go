package cluster

// Slots is the number of hash slots, as in Redis Cluster: every key belongs
// to exactly one slot in 0..Slots-1.
const Slots = 16384

// crc16Table is CRC-16/XMODEM (polynomial 0x1021, initial value 0, no
// reflection, no final xor), the checksum Redis Cluster hashes keys with,
// one entry per byte value.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

// bytesOrString lets one implementation serve []byte and string keys
// without a conversion (which would copy a key longer than 32 bytes).
type bytesOrString interface{ ~[]byte | ~string }

// crc16 returns the CRC-16/XMODEM of b ("123456789" gives 0x31C3).
func crc16[B bytesOrString](b B) uint16 {
	var crc uint16
	for i := 0; i < len(b); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^b[i]]
	}
	return crc
}

// hashTag returns the part of key that decides its slot, by Redis's rule:
// if key has a '{', and a '}' after the first '{', and at least one byte
// between them, only those bytes (after the first '{', up to the first '}'
// after it) are hashed; otherwise the whole key is. So "{tenant:7}:user:42"
// and "{tenant:7}" share a slot, while "foo{}{bar}" hashes whole.
func hashTag[B bytesOrString](key B) B {
	for i := 0; i < len(key); i++ {
		if key[i] != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j == i+1 {
					return key
				}
				return key[i+1 : j]
			}
		}
		return key
	}
	return key
}

// KeySlot returns key's hash slot, 0..Slots-1, as Redis Cluster computes it
// (CRC16 of the hash tag or the whole key, modulo 16384). It does not
// allocate and is safe for concurrent use.
func KeySlot(key []byte) uint16 {
	return crc16(hashTag(key)) & (Slots - 1)
}

// KeySlotString is KeySlot for a string key; it does not allocate.
func KeySlotString(key string) uint16 {
	return crc16(hashTag(key)) & (Slots - 1)
}

// KeysSlot returns the one slot that the keys of a command hash to. The keys
// are args[first], args[first+step], ... up to args[last]; a negative last
// counts from the end (-1 is the last argument), as COMMAND's key
// positions do. It returns ErrCrossSlot if two keys hash to different
// slots, and ok false if the positions name no key (a keyless command, or
// too few arguments). It does not allocate.
func KeysSlot(args [][]byte, first, last, step int) (slot uint16, ok bool, err error) {
	if last < 0 {
		last += len(args)
	}
	if step < 1 {
		step = 1
	}
	if first < 1 || first >= len(args) {
		return 0, false, nil
	}
	last = min(last, len(args)-1)
	for i := first; i <= last; i += step {
		s := KeySlot(args[i])
		if ok && s != slot {
			return 0, false, ErrCrossSlot
		}
		slot, ok = s, true
	}
	return slot, ok, nil
}
