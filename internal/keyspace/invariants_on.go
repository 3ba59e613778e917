//go:build invariants

package keyspace

import (
	"bytes"
	"fmt"
	"runtime"
	"sync/atomic"
)

// invariants turns on the ownership checks below (go test -tags
// invariants, as CI's race run does); see invariants_off.go.
const invariants = true

// owners records, per shard, the goroutine allowed to touch its state: the
// shard's own, or the coordinator it is lent to (hold.go). It exists only
// in builds tagged invariants.
type owners struct {
	owner  atomic.Int64 // goroutine id touching the state now
	runner atomic.Int64 // the shard's own goroutine
	lentTo atomic.Int64 // the coordinator holding the shard, 0 if none
}

// goid returns the calling goroutine's id, read from its stack header
// ("goroutine 123 [running]:"). Slow: for checks only.
func goid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	var id int64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		id = 10*id + int64(c-'0')
	}
	return id
}

// started records that the calling goroutine is s's own.
func (s *shard) started() {
	id := goid()
	s.own.runner.Store(id)
	s.own.owner.Store(id)
}

// claim records that the calling goroutine runs s's state now, holding
// s.running: its own, or a Dispatcher running a batch in place.
func (s *shard) claim() {
	s.own.owner.Store(goid())
}

// lend records that the calling coordinator now holds s; reclaim that it
// gave s back.
func (s *shard) lend() {
	id := goid()
	s.own.lentTo.Store(id)
	s.own.owner.Store(id)
}

func (s *shard) reclaim() {
	s.own.lentTo.Store(0)
	s.own.owner.Store(s.own.runner.Load())
}

// assertOwner panics unless the calling goroutine may touch s's state: a
// shard's state belongs to its goroutine, or to the coordinator it is lent
// to, and to nobody else.
func (s *shard) assertOwner() {
	if id := goid(); id != s.own.owner.Load() {
		panic(fmt.Sprintf("keyspace: goroutine %d touched shard %d, owned by goroutine %d", id, s.id, s.own.owner.Load()))
	}
}

// assertNotHeldByCaller panics if the calling goroutine holds s: a message
// to a shard the sender holds would never be answered (a command that asks
// for Stats by message inside a transaction, say).
func (s *shard) assertNotHeldByCaller() {
	if id := goid(); id == s.own.lentTo.Load() {
		panic(fmt.Sprintf("keyspace: goroutine %d sent a message to shard %d, which it holds: it would wait forever", id, s.id))
	}
}
