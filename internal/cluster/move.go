package cluster

import (
	"fmt"
	"sync"
)

// Slot moves. When a map gives a slot another owner while its old owner is
// still in the map, the old owner's state for the slot's keys must reach
// the new owner before the new owner decides for them, or each key would
// get its budget again. So a node taking such a map does not switch at
// once:
//
//   - the old owner keeps serving the slots it gives away (outgoing)
//     until it has handed them over (HandOff): it pauses them, waits until
//     no command it admitted for them is still running (the gate), sends
//     their keys' state to the new owner, and on the new owner's
//     acknowledgement flips them to the new map's owner;
//   - the new owner does not serve the slots it gains (incoming) until
//     their state arrives (FinishIncoming): it forwards their commands to
//     the old owner, or answers ASK to it.
//
// A slot whose old owner is not in the new map (a node lost and removed)
// is served by its new owner at once, with no state.

// moveState is a slot's part in a move, from this node's side.
type moveState uint8

const (
	notMoving moveState = iota
	outgoing            // this node serves it until handed over
	paused              // outgoing, and held while its state is copied
	incoming            // this node waits for its state from the old owner
)

// moves is the move part of a View: each slot's state, and the old map,
// whose owner an incoming slot waits for. Immutable once in a View.
type moves struct {
	state [Slots]moveState
	prev  *Map
	// resume is closed when the paused slots are handed over (or the
	// hand-over failed and they are served here again).
	resume chan struct{}
}

// computeMoves returns the moves from map cur to next for the node with
// id self, or nil if none of its slots moves with its owner still there.
func computeMoves(cur, next *Map, self string) *moves {
	if cur == nil {
		return nil
	}
	was, is := cur.Index(self), next.Index(self)
	var mv *moves
	for s := range Slots {
		oldID, newID := cur.Node(cur.Owner(uint16(s))).ID, next.Node(next.Owner(uint16(s))).ID
		if oldID == newID {
			continue
		}
		var st moveState
		switch {
		case was >= 0 && oldID == self:
			st = outgoing
		case is >= 0 && newID == self && next.Index(oldID) >= 0:
			st = incoming
		default:
			continue
		}
		if mv == nil {
			mv = &moves{prev: cur}
		}
		mv.state[s] = st
	}
	return mv
}

// Gate lets the node wait until no command it admitted for an outgoing
// slot is still running: a connection holds it shared (Enter) from the
// first such command it admits until its batch of work has run (Leave);
// HandOff takes it exclusively, after pausing the slots, so that every
// decision made for them is in the state it then copies. The zero value
// is ready.
type Gate struct{ mu sync.RWMutex }

// Enter holds the gate shared.
func (g *Gate) Enter() { g.mu.RLock() }

// Leave releases a hold taken by Enter.
func (g *Gate) Leave() { g.mu.RUnlock() }

// drain waits until every shared hold taken before it is released.
func (g *Gate) drain() {
	g.mu.Lock() // only the wait for the holders matters
	defer g.mu.Unlock()
}

// Outgoing returns the slots this node is handing over, grouped by the
// index (in the node's map) of the node that takes them; nil if none.
func (v *View) Outgoing() map[int][]uint16 {
	if v.mv == nil {
		return nil
	}
	var out map[int][]uint16
	for s := range Slots {
		if st := v.mv.state[s]; st == outgoing || st == paused {
			if out == nil {
				out = map[int][]uint16{}
			}
			o := v.m.Owner(uint16(s))
			out[o] = append(out[o], uint16(s))
		}
	}
	return out
}

// Resumed returns a channel closed when the slots paused in this view are
// served again (handed over, or back here after a failed hand-over).
func (v *View) Resumed() <-chan struct{} {
	if v.mv == nil || v.mv.resume == nil {
		closed := make(chan struct{})
		close(closed)
		return closed
	}
	return v.mv.resume
}

// Incoming reports whether this node waits for slot's state.
func (v *View) Incoming(slot uint16) bool { return v.mv != nil && v.mv.state[slot] == incoming }

// update replaces the view with one whose move states f changes, under
// the State's lock. f gets a copy of the current moves.
func (s *State) update(f func(mv *moves)) *View {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.view.Load()
	next := *cur
	if cur.mv != nil {
		mv := *cur.mv
		f(&mv)
		next.mv = &mv
		if !mv.any() {
			next.mv = nil
		}
	}
	s.view.Store(&next)
	return &next
}

func (mv *moves) any() bool {
	for _, st := range mv.state {
		if st != notMoving {
			return true
		}
	}
	return false
}

// Pause holds the given outgoing slots (new commands for them wait for
// Resumed), then waits on the gate until every command admitted for them
// before has run. After it the slots' state is final until Resume or
// Finish.
func (s *State) Pause(slots []uint16) {
	s.update(func(mv *moves) {
		mv.resume = make(chan struct{})
		for _, sl := range slots {
			if mv.state[sl] == outgoing {
				mv.state[sl] = paused
			}
		}
	})
	s.Gate.drain()
}

// FinishOutgoing flips the paused slots to their new owner (their state
// has been handed over) and releases the commands waiting for them.
func (s *State) FinishOutgoing(slots []uint16) { s.endPause(slots, notMoving) }

// Resume serves the paused slots here again (the hand-over failed) and
// releases the commands waiting for them.
func (s *State) Resume(slots []uint16) { s.endPause(slots, outgoing) }

func (s *State) endPause(slots []uint16, to moveState) {
	old := s.View()
	s.update(func(mv *moves) {
		for _, sl := range slots {
			if mv.state[sl] == paused {
				mv.state[sl] = to
			}
		}
		mv.resume = nil
	})
	if old.mv != nil && old.mv.resume != nil {
		close(old.mv.resume)
	}
}

// FinishIncoming makes this node serve the incoming slots given (their
// state has arrived). It returns an error if one of them is not incoming
// here (the sender's map and this node's disagree).
func (s *State) FinishIncoming(slots []uint16) error {
	v := s.View()
	for _, sl := range slots {
		if !v.Incoming(sl) {
			return errNotIncoming(sl, v.Version())
		}
	}
	s.update(func(mv *moves) {
		for _, sl := range slots {
			mv.state[sl] = notMoving
		}
	})
	return nil
}

func errNotIncoming(slot uint16, version uint64) error {
	return fmt.Errorf("slot %d is not waiting for its state on this node (map version %d): push the same map to every node first", slot, version)
}
