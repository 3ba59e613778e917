package server_test

import (
	"os"
	"testing"

	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/testserver"
	"github.com/rlserver/rlserver/internal/testskip"
)

// TestMain serves as a child server when asked to (child_test.go), and
// reports, in a plain go test run, the tests skipped for want of a client
// library.
func TestMain(m *testing.M) {
	runChildIfAsked()
	code := m.Run()
	testskip.Report(code)
	os.Exit(code)
}

// startServer runs a server with the given rules (the built-in defaults
// when none) for the test, in the connection model the test's name picks
// (see testserver.Models).
func startServer(t testing.TB, defs ...rules.Def) *testserver.Server {
	t.Helper()
	return testserver.Start(t, testserver.Options{Rules: defs})
}
