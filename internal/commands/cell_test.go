package commands

import (
	"testing"
	"time"
)

// TestCellSeconds walks redis-cell's rounding of a duration to seconds:
// truncate, then add a second when the remainder holds a whole millisecond.
func TestCellSeconds(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want int64
	}{
		{0, 0},
		{time.Nanosecond, 0},
		{999 * time.Microsecond, 0},
		{999_999 * time.Nanosecond, 0},
		{time.Millisecond, 1},
		{time.Second - time.Nanosecond, 1},
		{time.Second, 1},
		{time.Second + 999_999*time.Nanosecond, 1},
		{time.Second + time.Millisecond, 2},
		{720 * time.Second, 720},
		{-time.Second, -1},
		{-time.Millisecond, 0},
	} {
		if got := cellSeconds(int64(tt.d)); got != tt.want {
			t.Errorf("cellSeconds(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}
