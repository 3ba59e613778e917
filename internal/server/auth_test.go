package server

import (
	"fmt"
	"testing"
)

// TestAuthFailureCountsAreBounded: however many addresses fail, at most
// maxAuthFailureAddrs are tracked, the ones failing most stay, and every
// failure is counted once.
func TestAuthFailureCountsAreBounded(t *testing.T) {
	var a authFailureCounts
	for range 50 {
		a.add("192.0.2.1:1000")
	}
	for i := range 1000 {
		a.add(fmt.Sprintf("[2001:db8::%x]:%d", i, 2000+i))
		a.add(fmt.Sprintf("10.0.%d.%d:3000", i/250, i%250))
	}
	a.add("not an address")
	top, other := a.snapshot()
	if len(top) != maxAuthFailureAddrs {
		t.Fatalf("%d addresses tracked, want %d", len(top), maxAuthFailureAddrs)
	}
	if top[0] != (AddrCount{"192.0.2.1", 50}) {
		t.Fatalf("the address failing most is not first: %v", top[0])
	}
	total := other
	for _, ac := range top {
		total += ac.Count
	}
	if total != 50+2000+1 {
		t.Fatalf("counts add up to %d, want %d", total, 50+2000+1)
	}
}
