package cluster

import "math"

// ErrInvalidSlotOrCount is CLUSTER GETKEYSINSLOT's refusal of a slot
// outside 0..16383 or a negative count, in Redis's words.
var ErrInvalidSlotOrCount = redisWords("Invalid slot or number of keys")

// ParseGetKeysInSlot reads CLUSTER GETKEYSINSLOT's slot and count as Redis
// 7.0 does: each must be an integer (ErrNotInteger, the slot checked
// first), then the slot must be in 0..Slots-1 and the count not negative
// (ErrInvalidSlotOrCount). A count past an int's range is clipped: no
// slot holds that many keys.
func ParseGetKeysInSlot(slotArg, countArg []byte) (slot uint16, count int, err error) {
	s, ok := parseInt64(slotArg)
	if !ok {
		return 0, 0, ErrNotInteger
	}
	n, ok := parseInt64(countArg)
	if !ok {
		return 0, 0, ErrNotInteger
	}
	if s < 0 || s >= Slots || n < 0 {
		return 0, 0, ErrInvalidSlotOrCount
	}
	return uint16(s), int(min(n, math.MaxInt)), nil
}
