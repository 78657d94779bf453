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
// group, and on Linux whatever else it started: its keeper kills them
// once the sidecar's end of its control pipe is closed.
func killProcessGroup(p *process) {
	if p == nil || p.Process == nil || p.Process.Pid <= 0 {
		return
	}
	if p.keeper != nil {
		p.keeper.Close()
	}
	_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
}
