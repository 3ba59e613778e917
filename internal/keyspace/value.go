package keyspace

import (
	"math"

	"github.com/rlserver/rlserver/internal/ttl"
)

// Value is what a plain key holds. The keyspace stores values, expires them
// on its timing wheel and saves them in snapshots; what they mean is the
// business of the code that reads and writes them through a DB.
type Value interface {
	// Size is the bytes the value holds, checked against
	// Config.MaxValueSize.
	Size() int
}

// String is a byte-string value. Its bytes belong to the keyspace: a Task
// may read them, and change them only through DB.SetString (or in place,
// followed by DB.Put).
type String struct{ B []byte }

// Size implements Value.
func (s *String) Size() int { return len(s.B) }

// lookupPlain returns key's live entry, expiring it first if its expiry has
// passed.
func (s *shard) lookupPlain(key []byte, now int64) *entry {
	e := s.plain[string(key)]
	if e != nil && e.state.Stamp != 0 && e.state.Stamp <= now {
		s.reuseValue(e)
		s.remove(e)
		s.expired++
		return nil
	}
	return e
}

// plainEntry returns key's live entry, creating it (with no value yet) if
// mayCreate allows.
func (s *shard) plainEntry(key []byte, now int64) (*entry, error) {
	if e := s.lookupPlain(key, now); e != nil {
		return e, nil
	}
	if err := s.mayCreate(key); err != nil {
		return nil, err
	}
	return s.insertPlain(key), nil
}

// insertPlain creates an empty plain key.
func (s *shard) insertPlain(key []byte) *entry {
	e := s.newEntry(key)
	s.plain[e.key()] = e
	s.indexPlain(e)
	s.keys++
	s.slotAdded(key)
	return e
}

// storedValue records that e now holds v: its size is counted in the
// shard's valueBytes.
func (s *shard) storedValue(e *entry, v Value) {
	e.value = v
	size := uint32(min(v.Size(), math.MaxUint32)) // at most MaxValueSize: never clipped
	s.valueBytes += int(size) - int(e.size)
	e.size = size
}

// checkValue refuses a value of n bytes larger than Config.MaxValueSize.
func (s *shard) checkValue(n int) error {
	if n > s.limits.maxValue {
		return &TooLargeError{What: "value", Size: n, Limit: s.limits.maxValue}
	}
	return nil
}

// newString returns an empty String, reusing one a removed key left.
func (s *shard) newString() *String {
	if n := len(s.freeStrings); n > 0 {
		str := s.freeStrings[n-1]
		s.freeStrings = s.freeStrings[:n-1]
		return str
	}
	return &String{}
}

// setExpiry gives e an expiry at instant at, or none if at is 0.
func (s *shard) setExpiry(e *entry, at int64) {
	switch {
	case at == 0 && e.state.Stamp != 0:
		s.wheel.Cancel(&e.timer)
		s.expiring--
	case at != 0:
		if e.state.Stamp == 0 {
			s.expiring++
		}
		s.wheel.Schedule(&e.timer, at)
	}
	e.state.Stamp = at
}

// flush drops every key the shard holds, limiter state and plain keys. The
// rules' tables stay, emptied, so their decision counters keep counting:
// counters are monotonic, restarting only when a rule is deleted or its
// algorithm changes (a new rule ID, a new table).
func (s *shard) flush(now int64) {
	for _, t := range s.tables {
		t.empty(now)
	}
	s.plain = make(map[string]*entry)
	if s.scanIndex != nil {
		s.dropScanIndex() // the next SCAN indexes the new, empty map at once
	}
	s.wheel = ttl.New[*entry](now)
	s.keys, s.expiring, s.valueBytes = 0, 0, 0
	if s.slots != nil {
		clear(s.slots.n[:])
	}
	if s.dirty != nil {
		s.dirty.all = true
	}
	s.abortScan()
	s.changes++
}
