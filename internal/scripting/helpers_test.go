package scripting

import (
	"sync"
	"testing"
	"time"
)

// testClock is an injected clock that moves only when told.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock { return &testClock{now: time.Unix(1_800_000_000, 0)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func mustLoad(t testing.TB, src string) *Script {
	t.Helper()
	s, err := NewCache(CacheLimits{}).Load([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitRunning waits until a script runs on e (a goroutine started it).
func waitRunning(t *testing.T, e *Engine) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); e.running.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the script did not start within 10 s")
		}
	}
}
