//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package proxy

import (
	"errors"
	"net"
	"syscall"
)

// connAlive reports whether an idle connection is still open: nothing to
// read yet (EAGAIN). End of stream, an error or unexpected bytes from the
// server all mean it must not carry a request.
func connAlive(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = errors.Is(err, syscall.EAGAIN)
		return true // never wait for readiness
	})
	return err == nil && alive
}
