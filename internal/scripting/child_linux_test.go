package scripting

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// dieWithTest makes a redis-server started by a test die with the test
// process, even one killed by the test timeout, before its cleanup runs.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: unix.SIGKILL}
}
