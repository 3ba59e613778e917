package clock

import (
	"testing"
	"time"
)

func TestNowIsWallTimeAndNeverDecreases(t *testing.T) {
	c := New()
	prev := c.Now()
	if d := time.Duration(prev - time.Now().UnixNano()); d > time.Second || d < -time.Second {
		t.Fatalf("clock is %v away from the wall clock", d)
	}
	for range 100000 {
		n := c.Now()
		if n < prev {
			t.Fatalf("clock went backwards: %d after %d", n, prev)
		}
		prev = n
	}
}
