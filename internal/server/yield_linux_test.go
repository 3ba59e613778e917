//go:build linux

package server

import (
	"testing"
	"time"
)

// TestLoopYieldsWhenOthersMayWait: an event loop gives up its processor
// after a round that started a goroutine (a handed-off pipeline, which
// would otherwise wait behind a loop that never parks), and after
// yieldEvery without parking; not after a round whose wait parked, nor more
// often than that.
func TestLoopYieldsWhenOthersMayWait(t *testing.T) {
	yields := 0
	l := &eventLoop{yield: func() { yields++ }}
	ms := int64(time.Millisecond)
	steps := []struct {
		what    string
		now     int64
		started bool
		polls   int // > 1: the round's wait parked
		want    int // yields so far
	}{
		{"busy round, soon after the last yield", ms / 2, false, 1, 0},
		{"round that handed a pipeline off", ms / 2, true, 1, 1},
		{"busy round within yieldEvery of it", ms, false, 1, 1},
		{"busy round yieldEvery after it", ms/2 + ms, false, 1, 2},
		{"round after a parked wait, long after", 10 * ms, false, 2, 2},
		{"busy round soon after parking", 10*ms + ms/2, false, 1, 2},
		{"busy round yieldEvery after parking", 11 * ms, false, 1, 3},
	}
	for _, s := range steps {
		l.started, l.polls = s.started, s.polls
		l.yieldIfDue(s.now)
		if yields != s.want || l.started {
			t.Fatalf("%s: %d yields (want %d), started %v", s.what, yields, s.want, l.started)
		}
	}
}
