// Package testskip makes tests skipped for a missing tool visible in a
// plain `go test ./...`.
//
// A skip shows only with -v, and `go test` prints nothing but "ok" for a
// package that passes, so a run that skipped every client-library test
// looks the same as one that ran them. A test that needs a tool calls Skip
// instead of t.Skip; the package's TestMain calls Report after its runs,
// which prints one line naming what was skipped and how to install it, both
// to the test's own output (shown with -v or on failure) and to the
// terminal or pipe the go command writes to, so that it shows in a plain
// run too.
package testskip

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

var (
	mu      sync.Mutex
	missing = map[string]string{} // tool → how to install it
)

// Skip skips t because tool is missing, and records it for Report.
func Skip(t testing.TB, tool, install string) {
	t.Helper()
	mu.Lock()
	missing[tool] = install
	mu.Unlock()
	t.Skipf("%s not installed (%s); .ci/run installs it", tool, install)
}

// Summary is the line Report prints, or "" when nothing was skipped.
func Summary() string {
	mu.Lock()
	defer mu.Unlock()
	if len(missing) == 0 {
		return ""
	}
	var parts []string
	for _, tool := range slices.Sorted(maps.Keys(missing)) {
		parts = append(parts, fmt.Sprintf("%s (%s)", tool, missing[tool]))
	}
	return fmt.Sprintf("%s: SKIPPED tests that need %s; .ci/run installs them",
		strings.TrimSuffix(filepath.Base(os.Args[0]), ".test"), strings.Join(parts, ", "))
}

// Report prints Summary, if any, to stdout. When the tests passed (code is
// TestMain's exit code, 0), go test will not show that output, so it also
// writes the line to the go command's own standard error.
func Report(code int) {
	line := Summary()
	if line == "" {
		return
	}
	fmt.Println(line)
	if code != 0 {
		return
	}
	if w := goCommandStderr(); w != nil {
		fmt.Fprintln(w, line)
		w.Close()
	}
}

// goCommandStderr opens the standard error of the go command that runs
// this test binary (its parent), when it is a terminal or a pipe. A
// regular file is left alone: a second open description of it would
// write at its own offset, over the go command's output.
func goCommandStderr() io.WriteCloser {
	ppid := os.Getppid()
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(ppid) + "/comm")
	if err != nil || strings.TrimSpace(string(comm)) != "go" {
		return nil
	}
	f, err := os.OpenFile("/proc/"+strconv.Itoa(ppid)+"/fd/2", os.O_WRONLY, 0)
	if err != nil {
		return nil
	}
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || (st.Mode&unix.S_IFMT != unix.S_IFIFO && st.Mode&unix.S_IFMT != unix.S_IFCHR) {
		f.Close()
		return nil
	}
	return f
}
