//go:build linux

package proxy

import (
	"syscall"
	"unsafe"
)

// exited reports whether process pid has exited, or is no child of
// provlog's any more, waiting for it to exit if wait is set. It leaves the
// process to be waited for: the session's close waits for it
// (exec.Cmd.Wait), and tells how it ended.
func exited(pid int, wait bool) bool {
	const pPID = 1 // P_PID
	opts := syscall.WEXITED | syscall.WNOWAIT
	if !wait {
		opts |= syscall.WNOHANG
	}
	for {
		// siginfo_t, whose si_signo the kernel leaves 0 if WNOHANG
		// found the process running.
		var info [32]int32
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info)), uintptr(opts), 0, 0)
		switch errno {
		case syscall.EINTR:
			continue
		case 0:
			return info[0] != 0
		}
		return true // ECHILD: waited for already
	}
}

const canWatchExit = true
