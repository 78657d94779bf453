//go:build linux

package proxy

import (
	"os/exec"
	"runtime"
	"sync"
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

// startProcess starts cmd, a stdio server, tied to the sidecar: the
// kernel kills it (SIGKILL) when the sidecar dies, however it dies, so
// that a server whose calls no sidecar records any more does not go on
// (a kill -9 of the sidecar left one running: a go-sdk server until it
// read the end of its stdin, one that lingers after it without end).
// The signal is the parent-death signal, which fires when the thread
// that started the process ends (go.dev/issue/27505): the process is
// started from spawner's thread, locked to a goroutine that never ends.
// Only the process provlog started is tied: what it starts in turn (npx
// runs the server as its child) is not, and reads the end of its stdin.
func startProcess(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	spawner.once.Do(func() {
		spawner.start = make(chan func())
		go func() {
			runtime.LockOSThread() // and never unlocked: the thread lives as long as the sidecar
			for f := range spawner.start {
				f()
			}
		}()
	})
	done := make(chan error, 1)
	spawner.start <- func() { done <- cmd.Start() }
	return <-done
}

// spawner is the one thread of the process that starts stdio servers
// (startProcess): process-wide, as the thread is.
var spawner struct {
	once  sync.Once
	start chan func()
}
