//go:build linux

package proxy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
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

// startProcess starts p, a stdio server, through a reaper
// (reaper_linux.go), so that it and every process it starts die with the
// sidecar, however the sidecar dies, and with its session
// (killProcessGroup): a kill -9 of the sidecar left a server's children
// running (npx runs the server as its child; a worker it forks, one that
// calls setsid too, went on without end). The reaper is tied to the
// sidecar by the parent-death signal SIGKILL, which fires when the
// thread that started it ends (go.dev/issue/27505): it is started from
// spawner's thread, locked to a goroutine that never ends. It returns
// once the server started, or with the error starting it gave. The
// reaper is this program re-executed: one whose main did not call
// [ReaperMain] would run its own main in the reaper's place (a test
// binary its tests, which start servers in turn), so none is started.
func startProcess(p *process) error {
	if !spawner.hooked.Load() {
		return errNoReaperMain
	}
	if p.SysProcAttr == nil {
		p.SysProcAttr = &syscall.SysProcAttr{}
	}
	p.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if p.Err != nil {
		return p.Start() // not found: as exec says
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return err
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return err
	}
	throughReaper(p.Cmd, ctlR, readyW)
	err = spawn(p.Start)
	ctlR.Close()
	readyW.Close()
	if err != nil {
		ctlW.Close()
		readyR.Close()
		return fmt.Errorf("starting the stdio server's reaper (%s): %w", selfExe, err)
	}
	// The ready pipe ends once the server started, or with why not.
	why, _ := io.ReadAll(readyR)
	readyR.Close()
	if len(why) > 0 {
		ctlW.Close()
		p.Wait()
		return errors.New(string(why))
	}
	p.keeper = ctlW
	return nil
}

// errNoReaperMain is why no stdio server starts in a program that did not
// call ReaperMain.
var errNoReaperMain = errors.New("starting a stdio server: this program does not call proxy.ReaperMain first in its main (a test binary: in its TestMain), " +
	"and a stdio server is started through the program itself re-executed as the server's reaper")

// spawn runs start on spawner's thread.
func spawn(start func() error) error {
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
	spawner.start <- func() { done <- start() }
	return <-done
}

// spawner is the one thread of the process that starts stdio servers
// (startProcess), and whether the program called ReaperMain:
// process-wide, as the thread and the program's main are.
var spawner struct {
	hooked atomic.Bool
	once   sync.Once
	start  chan func()
}
