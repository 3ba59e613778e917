package commands_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testserver"
)

// TestThrottleAgainstRedisCell replays vectors from the real redis-cell
// module (v0.5.0) and the rule its source gives for them, at fixed instants
// of the injected clock. redis-cell reads the clock at each call, so two
// calls pipelined to it are microseconds apart; here "+1µs" steps stand in
// for that.
func TestThrottleAgainstRedisCell(t *testing.T) { testserver.Models(t, testThrottleAgainstRedisCell) }

func testThrottleAgainstRedisCell(t *testing.T) {
	ts := startServer(t)
	c := ts.Client(t, 2)
	ctx := context.Background()
	for _, tt := range []struct {
		advance time.Duration
		args    []any
		want    [5]int64
	}{
		// Emission interval 1 ms. The first call resets in exactly 1 ms,
		// a whole millisecond: 1 s.
		{0, []any{"pk1", 0, 1000, 1}, [5]int64{0, 1, 0, -1, 1}},
		// The same instant: the retry is exactly 1 ms away, 1 s.
		{0, []any{"pk1", 0, 1000, 1}, [5]int64{1, 1, 0, 1, 1}},
		// 1 µs later 999 µs are left, under a millisecond: 0. redis-cell
		// answers [1,1,0,0,0] to the second of two pipelined calls.
		{time.Microsecond, []any{"pk1", 0, 1000, 1}, [5]int64{1, 1, 0, 0, 0}},
		// redis-cell's first call of pk2 and of k, from the module.
		{0, []any{"pk2", 0, 1000000, 1}, [5]int64{0, 1, 0, -1, 0}},
		{0, []any{"k", 1, 1000000000, 1}, [5]int64{0, 2, 0, -1, 0}},
		// remaining is whole microseconds over whole microseconds: 1.5
		// intervals of 1 ms left count as 1 (integer division of
		// nanoseconds agrees), and 5 µs over a 0 µs interval is +Inf,
		// which Rust converts to the int64 maximum.
		{0, []any{"r1", 2, 1000, 1}, [5]int64{0, 3, 2, -1, 1}},
		{500 * time.Microsecond, []any{"r1", 2, 1000, 1}, [5]int64{0, 3, 1, -1, 1}},
		{0, []any{"r2", 5000, 1000000000, 1}, [5]int64{0, 5001, 9223372036854775807, -1, 0}},
		// redis-cell's README example and its documented refill.
		{0, []any{"user123", 15, 30, 60}, [5]int64{0, 16, 15, -1, 2}},
		{0, []any{"r3", 0, 1, 2, 1}, [5]int64{0, 1, 0, -1, 2}},
		{1999 * time.Millisecond, []any{"r3", 0, 1, 2, 1}, [5]int64{1, 1, 0, 1, 1}},
		{500 * time.Microsecond, []any{"r3", 0, 1, 2, 1}, [5]int64{1, 1, 0, 0, 0}},
		{500 * time.Microsecond, []any{"r3", 0, 1, 2, 1}, [5]int64{0, 1, 0, -1, 2}},
		// A quantity above the burst can never pass: retry_after is -1.
		{0, []any{"r4", 1, 1, 1, 3}, [5]int64{1, 2, 2, -1, 0}},
		// redis-cell reads numbers as Rust does: a sign, leading zeros.
		{0, []any{"r5", "+1", "01", "0010"}, [5]int64{0, 2, 1, -1, 10}},
	} {
		ts.Clock.Advance(tt.advance)
		got, err := c.Do(ctx, append([]any{"CL.THROTTLE"}, tt.args...)...).Int64Slice()
		if err != nil || len(got) != 5 || [5]int64(got) != tt.want {
			t.Errorf("+%v CL.THROTTLE %v: %v %v, want %v", tt.advance, tt.args, got, err, tt.want)
		}
	}
}

// TestThrottleErrors: redis-cell's errors in its words, and rlserver's
// refusals of what redis-cell would compute nonsense from.
func TestThrottleErrors(t *testing.T) { testserver.Models(t, testThrottleErrors) }

func testThrottleErrors(t *testing.T) {
	c := startServer(t).Client(t, 2)
	usage := "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]"
	for _, tt := range []struct {
		args []any
		want string
	}{
		{[]any{"k", "x", 1, 1}, "Cell error: Store error: Couldn't parse as integer: x"},
		{[]any{"k", 1, 1, 1, "1.5"}, "Cell error: Store error: Couldn't parse as integer: 1.5"},
		{[]any{"k", 1, 1, "99999999999999999999"}, "Cell error: Store error: Couldn't parse as integer: 99999999999999999999"},
		{[]any{"k", "+", 1, 1}, "Cell error: Store error: Couldn't parse as integer: +"},
		{[]any{"k", 1, 0, 1}, "Cell error: Store error: Zero rates are not supported"},
		{[]any{"k", 1, 1, 0}, "Cell error: Store error: Zero rates are not supported"},
		{[]any{"k", 1, 2000000000, 1}, "Cell error: Store error: Zero rates are not supported"},
		{[]any{}, usage},
		{[]any{"k", 1, 1}, usage},
		{[]any{"k", 1, 1, 1, 1, 1}, usage},
		{[]any{"k", -1, 1, 1}, "ERR value is not an integer or out of range"},
		{[]any{"k", 1, 1, 1, -1}, "ERR value is not an integer or out of range"},
		{[]any{"k", 1, 1, 9223372037}, "ERR value is not an integer or out of range"},
		{[]any{"k", fmt.Sprint(int64(1) << 62), 1, 1}, "ERR value is not an integer or out of range"},
	} {
		if got := testserver.RedisError(t, c, append([]any{"CL.THROTTLE"}, tt.args...)...); got != tt.want {
			t.Errorf("CL.THROTTLE %v:\n got %q\nwant %q", tt.args, got, tt.want)
		}
	}
}
