package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// cli runs the binary once, as an operator would, with the variables env
// (and no other RLSERVER_ ones), in a scratch directory, and returns its
// exit code and output. A process still running at testDeadline is killed and
// reported.
func cli(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	bin := binary(t) // waits for the build, which the timeout must not count
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = testEnv(env...)
	cmd.Dir = t.TempDir()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("rlserver %v was still running after %v:\n%s", args, testDeadline, errOut.String())
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

func TestHelpAndVersionGoToStdout(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--help"}, "Usage: rlserver [flags]"},
		{[]string{"-h"}, "--tls-cert PATH"},
		{[]string{"--version"}, "rlserver test-docker\n"},
	} {
		code, stdout, stderr := cli(t, nil, tt.args...)
		if code != 0 || !strings.Contains(stdout, tt.want) || stderr != "" {
			t.Errorf("%v: exit %d, stdout %.80q, stderr %q; want exit 0 and %q on stdout alone", tt.args, code, stdout, stderr, tt.want)
		}
	}
}

// TestCommandLineErrors: each mistake is reported once, on stderr, saying
// what is wrong with the value as written and what would be right; usage
// mistakes point at --help instead of printing it.
func TestCommandLineErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "plain-file")
	os.WriteFile(file, nil, 0o644)
	badRules := filepath.Join(dir, "bad.yaml")
	os.WriteFile(badRules, []byte("rules:\n  - name: a\n    algorithm: token_bucket\n   limit: 1\n"), 0o644)
	// Never a fixed port, never ./data; a case's own variables come later
	// and win (exec keeps the last of duplicates).
	safe := []string{"RLSERVER_ADDR=127.0.0.1:0", "RLSERVER_DATA_DIR="}
	tests := []struct {
		args []string
		env  []string
		code int
		want []string
	}{
		{[]string{"--adr", "1"}, nil, 2, []string{"unknown flag --adr (did you mean --addr?)", "rlserver --help"}},
		{[]string{"--metrics", "x"}, nil, 2, []string{"unknown flag --metrics (did you mean --metrics-addr?)"}},
		{[]string{"stray"}, nil, 2, []string{`unexpected argument "stray"`}},
		{[]string{"--protected-mode", "false"}, nil, 2, []string{"--protected-mode=false"}},
		{[]string{"--addr", "17009"}, nil, 2, []string{"--addr 17009: ", "127.0.0.1:17009"}},
		{[]string{"--log-level", "verbose"}, nil, 2, []string{"--log-level verbose: must be one of debug, info, warn, error"}},
		{[]string{"--snapshot-interval", "5x"}, nil, 2, []string{"--snapshot-interval 5x: want whole seconds (60) or a duration"}},
		{[]string{"--timeout", "-1s"}, nil, 2, []string{"--timeout -1s: must not be negative"}},
		{[]string{"--shards", "3"}, nil, 2, []string{"--shards 3: must be a power of two"}},
		{[]string{"--maxkeys-policy", "lru"}, nil, 2, []string{"--maxkeys-policy lru: must be one of evict, reject"}},
		{[]string{"--proto-max-bulk-len", "lots"}, nil, 2, []string{"--proto-max-bulk-len lots: want a size in bytes"}},
		{[]string{"--tls-cert", "x.pem"}, nil, 2, []string{"--tls-cert and --tls-key go together"}},
		{[]string{"--rules-authoritative"}, nil, 2, []string{"--rules-authoritative true: needs --rules"}},
		{nil, []string{"RLSERVER_LOG_LEVEL=verbose"}, 2, []string{"RLSERVER_LOG_LEVEL=verbose: must be one of debug, info, warn, error"}},
		{[]string{"--addr", "0.0.0.0:0"}, nil, 2, []string{"--addr 0.0.0.0:0 is not a loopback address and no password is set", "--protected-mode=false"}},
		{[]string{"--metrics-addr", "0.0.0.0:0"}, nil, 2, []string{"--metrics-addr 0.0.0.0:0 is not a loopback address", "read the metrics"}},
		{[]string{"--pprof-addr", ":0"}, nil, 2, []string{"--pprof-addr :0 is not a loopback address", "profile the server"}},
		{nil, []string{"RLSERVER_ADDR=0.0.0.0:0"}, 2, []string{"RLSERVER_ADDR=0.0.0.0:0 is not a loopback address"}},
		{[]string{"--requirepass-file", filepath.Join(dir, "nopass")}, nil, 2, []string{"--requirepass-file " + filepath.Join(dir, "nopass") + ": open", "no such file"}},
		{[]string{"--addr", "256.0.0.1:1", "--protected-mode=false"}, nil, 1, []string{"listen on 256.0.0.1:1"}},
		{[]string{"--rules", badRules}, nil, 1, []string{"rules file " + badRules + ": line 4: "}},
		{[]string{"--rules", filepath.Join(dir, "missing.yaml")}, nil, 1, []string{"missing.yaml: no such file"}},
		{[]string{"--data-dir", file}, nil, 1, []string{"--data-dir " + file + " is a file, not a directory"}},
		{[]string{"--data-dir", filepath.Join(dir, "rlserver.snap")}, nil, 1, []string{"names the snapshot file", "--data-dir " + dir + ")"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(append(tt.env, tt.args...), " "), func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := cli(t, append(append([]string{}, safe...), tt.env...), tt.args...)
			if code != tt.code || stdout != "" {
				t.Errorf("exit %d (want %d), stdout %q; stderr:\n%s", code, tt.code, stdout, stderr)
			}
			for _, w := range tt.want {
				if n := strings.Count(stderr, w); n != 1 {
					t.Errorf("stderr holds %q %d times, want once:\n%s", w, n, stderr)
				}
			}
			// One error line (and, for usage mistakes, a pointer to
			// --help): no help text, and no log record repeating it.
			if strings.Count(stderr, "\nrlserver: ")+strings.Count(stderr[:min(len(stderr), 10)], "rlserver: ") != 1 ||
				strings.Contains(stderr, "level=ERROR") || strings.Contains(stderr, "Usage:") {
				t.Errorf("want one error line, got:\n%s", stderr)
			}
		})
	}
}
