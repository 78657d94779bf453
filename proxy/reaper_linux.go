//go:build linux

package proxy

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// A stdio server is started through two small processes, provlog itself
// re-executed in a hidden mode (startProcess), so that everything it
// starts dies with the sidecar, however the sidecar dies:
//
//	sidecar -> reaper -> keeper -> server -> its children ...
//
// The reaper is the process the sidecar starts and waits for: it leads
// the server's process group, dies with the sidecar (parent-death
// signal), forwards SIGTERM, SIGINT and SIGHUP to the server, and exits
// as the server exited, with its status, as soon as it did. The keeper is
// a child subreaper (PR_SET_CHILD_SUBREAPER) in a process group of its
// own: every process the server starts that is orphaned, in the server's
// group or not (setsid), becomes its child, and it lives as long as any
// does. It kills them all (SIGKILL), children first, then theirs as they
// come to it, when the sidecar's end of a pipe to it closes (the sidecar
// died, or closed the server's session: killProcessGroup), or when the
// reaper dies while the server runs (the sidecar killed it). The
// server's stdin, stdout and stderr are the pipes the sidecar made,
// handed on, not copied: neither process holds them once the server
// runs, so that they end as the server's do. The pid the sidecar knows
// (cmd.Process, a server's status) is the reaper's: a SIGTERM sent to it
// reaches the server, and a SIGKILL ends the server and what it started
// (the keeper sees the reaper die while the server runs).
const (
	reaperEnv  = "PROVLOG_STDIO_REAPER"
	reaperArg0 = "provlog-stdio-reaper"
	keeperArg0 = "provlog-stdio-keeper"
	selfExe    = "/proc/self/exe"
)

// ReaperMain runs this process as a stdio server's reaper or keeper, and
// exits, if it was started as one (argv[0] and reaperEnv); otherwise it
// returns at once, and this process may start stdio servers. A stdio
// server is started through the running program re-executed
// (/proc/self/exe), so a program that starts stdio servers through the
// proxy (provlog, [Dial], a test binary whose tests do) calls it first
// in main, or in TestMain, before anything else it does; without that
// call no stdio server starts (the server's connection fails and says
// why).
func ReaperMain() {
	if len(os.Args) >= 3 && os.Getenv(reaperEnv) == "1" {
		switch os.Args[0] {
		case reaperArg0:
			os.Exit(runReaper(os.Args[1:]))
		case keeperArg0:
			os.Exit(runKeeper(os.Args[1:]))
		}
	}
	spawner.hooked.Store(true)
}

// throughReaper makes cmd start the reaper, which starts what cmd named,
// with the pipes ctl (the keeper's: its end ends the server's
// descendants) and ready (closed once the server started, or told why it
// did not).
func throughReaper(cmd *exec.Cmd, ctl, ready *os.File) {
	cmd.Env = append(cmd.Environ(), reaperEnv+"=1")
	cmd.Args = append([]string{reaperArg0, cmd.Path}, cmd.Args...)
	cmd.Path = selfExe
	cmd.ExtraFiles = []*os.File{ctl, ready}
}

// runReaper runs the reaper: args are the server's path and argv; fd 3
// is the keeper's control pipe, fd 4 the ready pipe.
func runReaper(args []string) int {
	runtime.LockOSThread() // the keeper's parent-death signal is this thread's
	ctl, ready := os.NewFile(3, "control"), os.NewFile(4, "ready")
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	sr, sw, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(ready, "starting the server's reaper: %v", err)
		return 1
	}
	forward := make(chan os.Signal, 1)
	signal.Notify(forward, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	keeper := &exec.Cmd{
		Path: selfExe, Args: append([]string{keeperArg0}, args...), Env: os.Environ(),
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		ExtraFiles:  []*os.File{ctl, ready, sw},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGUSR1},
	}
	if err := keeper.Start(); err != nil {
		fmt.Fprintf(ready, "starting the server's keeper: %v", err)
		return 1
	}
	ctl.Close()
	ready.Close()
	sw.Close()
	toDevNull(0, 1) // stderr stays the reaper's until it exits, as the server does
	var b [4]byte
	if _, err := io.ReadFull(sr, b[:]); err != nil {
		return 1 // the server did not start: the keeper said why on ready
	}
	server := int(binary.LittleEndian.Uint32(b[:]))
	go func() {
		for sig := range forward {
			syscall.Kill(server, sig.(syscall.Signal))
		}
	}()
	if _, err := io.ReadFull(sr, b[:]); err != nil {
		fmt.Fprintln(os.Stderr, "provlog: the stdio server's keeper died; the server is killed")
		syscall.Kill(server, syscall.SIGKILL)
		return 1
	}
	return exitAs(syscall.WaitStatus(binary.LittleEndian.Uint32(b[:])))
}

// exitAs ends the reaper as the server ended: with its exit code, or
// killed by its signal (the default action set back, so that the Go
// runtime does not take it; no core dumped, which would hold the
// server's environment).
func exitAs(ws syscall.WaitStatus) int {
	if !ws.Signaled() {
		return ws.ExitStatus()
	}
	sig := ws.Signal()
	signal.Reset(sig)
	syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
	var dfl [4]uint64 // struct sigaction: SIG_DFL, no flags, empty mask
	syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
	syscall.Tgkill(os.Getpid(), syscall.Gettid(), sig)
	time.Sleep(time.Second) // the signal is pending on this thread: it ends the process
	return 128 + int(sig)
}

// runKeeper runs the keeper: args are the server's path and argv; fd 3
// is the control pipe, fd 4 the ready pipe, fd 5 the reaper's status
// pipe, on which it writes the server's pid, then how it ended.
func runKeeper(args []string) int {
	ctl, ready, status := os.NewFile(3, "control"), os.NewFile(4, "ready"), os.NewFile(5, "status")
	for fd := 3; fd <= 5; fd++ {
		syscall.CloseOnExec(fd)
	}
	ends := make(chan os.Signal, 1)
	signal.Notify(ends, syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		fmt.Fprintf(ready, "starting the server's keeper: PR_SET_CHILD_SUBREAPER: %v", errno)
		return 1
	}
	group, err := syscall.Getpgid(os.Getppid())
	if err != nil || os.Getppid() == 1 {
		fmt.Fprintf(ready, "starting the server's keeper: the reaper is gone (%v)", err)
		return 1
	}
	server := &exec.Cmd{
		Path: args[0], Args: args[1:], Env: slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, reaperEnv+"=") }),
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pgid: group},
	}
	if err := server.Start(); err != nil {
		fmt.Fprint(ready, err.Error())
		return 1
	}
	ready.Close()
	spid := server.Process.Pid
	status.Write(binary.LittleEndian.AppendUint32(nil, uint32(spid)))
	toDevNull(0, 1, 2)

	var serverDone atomic.Bool
	reaped, none := make(chan struct{}, 1), make(chan struct{})
	go func() {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, 0, nil)
			if err == syscall.EINTR {
				continue
			}
			if err != nil { // ECHILD: no child, so no descendant, left
				close(none)
				return
			}
			if pid == spid {
				serverDone.Store(true)
				status.Write(binary.LittleEndian.AppendUint32(nil, uint32(ws)))
				status.Close()
			}
			select {
			case reaped <- struct{}{}:
			default:
			}
		}
	}()
	ctlEnd := make(chan struct{})
	go func() {
		io.Copy(io.Discard, ctl)
		close(ctlEnd)
	}()
	for {
		select {
		case <-none:
			return 0
		case <-ctlEnd:
		case sig := <-ends:
			if sig == syscall.SIGUSR1 && serverDone.Load() {
				continue // the reaper exited as the server did
			}
		}
		if !serverDone.Load() {
			// The server's group first, at once: its id is not free
			// (nor reused) while the server, unreaped, is in it.
			syscall.Kill(-group, syscall.SIGKILL)
		}
		killChildren(reaped, none)
		return 0
	}
}

// killChildren kills the keeper's children until it has none: those of
// a child killed come to it, the subreaper, and are killed in turn.
func killChildren(reaped, none <-chan struct{}) {
	self := os.Getpid()
	for {
		for _, pid := range childrenOf(self) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		select {
		case <-none:
			return
		case <-reaped:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// childrenOf lists the processes whose parent is pid (/proc/*/stat).
func childrenOf(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var kids []int
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			kids = append(kids, child)
		}
	}
	return kids
}

// toDevNull points fds at /dev/null, so that this process holds none of
// the server's pipes.
func toDevNull(fds ...int) {
	null, err := syscall.Open(os.DevNull, syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	for _, fd := range fds {
		syscall.Dup3(null, fd, 0)
	}
	syscall.Close(null)
}
