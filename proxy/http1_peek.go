//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package proxy

import (
	"errors"
	"net"
	"syscall"
)

// A peeker looks whether an idle connection is still open without
// reading from it or waiting. It is made once with its connection, so
// that a look costs the one recvfrom and no allocation.
type peeker struct {
	rc    syscall.RawConn // nil: the connection has no descriptor to look at
	open  bool
	buf   [1]byte
	check func(fd uintptr) bool
}

func newPeeker(nc net.Conn) *peeker {
	pk := new(peeker)
	if sc, ok := nc.(syscall.Conn); ok {
		pk.rc, _ = sc.SyscallConn()
		if pk.rc == nil {
			pk.rc = deadConn{}
		}
	}
	pk.check = func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), pk.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		pk.open = errors.Is(err, syscall.EAGAIN)
		return true // never wait for readiness
	}
	return pk
}

// alive reports whether the idle connection is still open: nothing to
// read yet (EAGAIN). End of stream, an error or unexpected bytes from the
// server all mean it must not carry a request.
func (pk *peeker) alive() bool {
	if pk.rc == nil {
		return true
	}
	pk.open = false
	err := pk.rc.Read(pk.check)
	return err == nil && pk.open
}

// deadConn is the RawConn of a connection whose descriptor could not be
// had: it is never alive.
type deadConn struct{}

func (deadConn) Control(func(uintptr)) error    { return errDeadConn }
func (deadConn) Read(func(uintptr) bool) error  { return errDeadConn }
func (deadConn) Write(func(uintptr) bool) error { return errDeadConn }

var errDeadConn = errors.New("the connection has no descriptor")
