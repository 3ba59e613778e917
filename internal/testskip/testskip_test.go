package testskip

import (
	"strings"
	"testing"
)

func TestSummaryNamesEachMissingToolOnce(t *testing.T) {
	mu.Lock()
	clear(missing) // -count=N runs this again in the same process
	mu.Unlock()
	if Summary() != "" {
		t.Fatal("a summary before any skip")
	}
	for _, tool := range []string{"ioredis", "redis-cli", "ioredis"} {
		t.Run(tool, func(t *testing.T) { Skip(t, tool, "install "+tool) })
	}
	got := Summary()
	want := "testskip: SKIPPED tests that need ioredis (install ioredis), redis-cli (install redis-cli); .ci/run installs them"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if strings.Count(got, "ioredis (") != 1 {
		t.Fatal("a tool skipped twice is named twice")
	}
}
