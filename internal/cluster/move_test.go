package cluster

import (
	"strings"
	"testing"
)

// moveMaps returns version 1 (three nodes, even split) and version 2
// (node 0 gives 0-2730 to node 1), and the nodes' ids.
func moveMaps(t *testing.T) (v1, v2 *Map, ids []string) {
	t.Helper()
	ids = []string{strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("c", 40)}
	var nodes []Node
	for i, id := range ids {
		nodes = append(nodes, Node{ID: id, Host: "127.0.0.1", Port: 7001 + i})
	}
	v1, err := EvenMap(1, nodes)
	if err != nil {
		t.Fatal(err)
	}
	n := []Node{*v1.Node(0), *v1.Node(1), *v1.Node(2)}
	n[0].Slots = []Range{{2731, 5460}}
	n[1].Slots = []Range{{0, 2730}, {5461, 10922}}
	v2, err = NewMap(2, n)
	if err != nil {
		t.Fatal(err)
	}
	return v1, v2, ids
}

func newMovingState(t *testing.T, self string, maps ...*Map) *State {
	t.Helper()
	s, err := NewState(Config{Mode: On, SelfID: self, HandOver: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range maps {
		if _, err := s.Apply(m); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestHandOverRouting walks a move from both sides: the old owner serves
// the slots it gives away (under the gate), holds them while paused, and
// sends them to the new owner once finished; the new owner forwards them
// to the old owner (or answers ASK) until their state arrives.
func TestHandOverRouting(t *testing.T) {
	v1, v2, ids := moveMaps(t)
	src := newMovingState(t, ids[0], v1, v2)
	dst := newMovingState(t, ids[1], v1, v2)
	moved, kept := uint16(100), uint16(3000)

	if a := src.View().Route(moved, true).Action; a != ServeMoving {
		t.Errorf("old owner, before the hand-over: %v, want ServeMoving", a)
	}
	if a := src.View().Route(kept, true).Action; a != Serve {
		t.Errorf("old owner, a slot it keeps: %v", a)
	}
	out := src.View().Outgoing()
	if len(out) != 1 || len(out[1]) != 2731 {
		t.Fatalf("outgoing: %d groups, %d slots to node 1", len(out), len(out[1]))
	}
	d := dst.View().Route(moved, true)
	if d.Action != Forward || d.Owner.ID != ids[0] {
		t.Errorf("new owner, before the state arrives: %v to %v, want Forward to the old owner", d.Action, d.Owner)
	}
	if e := dst.View().Route(moved, false).Redirect(false).Error(); e != "ASK 100 127.0.0.1:7001" {
		t.Errorf("new owner, not forwarding: %s", e)
	}

	src.Pause(out[1])
	v := src.View()
	if a := v.Route(moved, true).Action; a != Wait {
		t.Errorf("paused: %v, want Wait", a)
	}
	if _, err := src.Apply(v1); err == nil {
		t.Error("a changed map was taken while slots were paused")
	}
	if err := dst.FinishIncoming(out[1]); err != nil {
		t.Fatal(err)
	}
	if a := dst.View().Route(moved, true).Action; a != Serve {
		t.Errorf("new owner, after the state arrived: %v", a)
	}
	src.FinishOutgoing(out[1])
	select {
	case <-v.Resumed():
	default:
		t.Error("the paused view's waiters were not released")
	}
	if d := src.View().Route(moved, false); d.Action != Moved || d.Owner.ID != ids[1] {
		t.Errorf("old owner, after the hand-over: %v to %v, want MOVED to the new owner", d.Action, d.Owner)
	}
	if src.View().Outgoing() != nil || src.View().mv != nil {
		t.Error("moves left after the hand-over")
	}
	if err := dst.FinishIncoming([]uint16{moved}); err == nil {
		t.Error("a slot was taken over twice")
	}
}

// TestHandOverResume: a failed hand-over serves the slots at the old owner
// again; a slot whose old owner left the map is served by its new owner at
// once (a lost node's slots start fresh).
func TestHandOverResume(t *testing.T) {
	v1, v2, ids := moveMaps(t)
	src := newMovingState(t, ids[0], v1, v2)
	out := src.View().Outgoing()[1]
	src.Pause(out)
	src.Resume(out)
	if a := src.View().Route(100, true).Action; a != ServeMoving {
		t.Errorf("after a failed hand-over: %v, want ServeMoving", a)
	}

	n := []Node{*v1.Node(1), *v1.Node(2)}
	n[0].Slots = append(n[0].Slots, Range{0, 5460})
	lost, err := NewMap(3, n)
	if err != nil {
		t.Fatal(err)
	}
	dst := newMovingState(t, ids[1], v1, lost)
	if a := dst.View().Route(100, true).Action; a != Serve {
		t.Errorf("a lost node's slot: %v, want Serve at once", a)
	}
}
