//go:build unix

package proxy

import (
	"os/exec"
	"syscall"
)

// setProcessGroup starts a stdio server in its own process group, so that
// stopping it also stops what it started (npx runs the server as a child).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killProcessGroup kills whatever is left of a stdio server's process
// group, and on Linux whatever else it started (endDescendants).
func killProcessGroup(p *process) {
	if p == nil || p.Process == nil || p.Process.Pid <= 0 {
		return
	}
	endDescendants(p)
	_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
}
