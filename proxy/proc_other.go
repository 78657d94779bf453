//go:build !unix

package proxy

import "os/exec"

func setProcessGroup(*exec.Cmd) {}

func killProcessGroup(p *process) {
	if p != nil && p.Process != nil {
		_ = p.Process.Kill()
	}
}
