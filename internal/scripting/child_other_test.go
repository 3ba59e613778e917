//go:build !linux

package scripting

import "os/exec"

// dieWithTest: only Linux has a parent-death signal; elsewhere a test killed
// by its timeout may leave its redis-server running.
func dieWithTest(*exec.Cmd) {}
