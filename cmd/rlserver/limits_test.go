package main

import (
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/resp"
)

// TestLimitFlags: with no flags the server gets the protocol layer's own
// defaults, and each limit flag reaches resp.Limits.
func TestLimitFlags(t *testing.T) {
	c, err := loadConfig(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.limits(); got != resp.DefaultLimits {
		t.Fatalf("default limits %+v, want %+v", got, resp.DefaultLimits)
	}
	c, err = loadConfig([]string{"--handshake-timeout", "3", "--max-auth-failures", "0", "--max-args", "100",
		"--proto-max-bulk-len", "1000", "--client-query-buffer-limit", "2000", "--client-output-buffer-limit", "3000",
		"--client-output-timeout", "4s"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := resp.Limits{MaxBulkLen: 1000, MaxArgs: 100, QueryBufferLimit: 2000, OutputLimit: 3000,
		OutputTimeout: 4 * time.Second, HandshakeTimeout: 3 * time.Second, MaxAuthFailures: 0}
	if got := c.limits(); got != want {
		t.Fatalf("limits %+v, want %+v", got, want)
	}
	for _, args := range [][]string{{"--handshake-timeout", "-1s"}, {"--max-auth-failures", "-1"}} {
		if _, err := loadConfig(args, nil); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
