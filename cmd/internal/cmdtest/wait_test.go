package cmdtest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// fatalTB records what Fatalf says and ends its goroutine, as testing's
// does, so that a test can look at a helper failing.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestWaitUpExited: the command ends before it is up. WaitUp fails naming
// how it ended and what it logged, and leaves the end in exited, where a
// cleanup that waits for the command (readme_onelog_test.go's kills it
// and receives from exited) would otherwise wait for good.
func TestWaitUpExited(t *testing.T) {
	exited := make(chan error, 1)
	exited <- fmt.Errorf("exit status 2")
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		WaitUp(tb, func() bool { return false }, exited, stringer("serve: bad flag"))
	}()
	<-done
	if !strings.Contains(tb.msg, "exit status 2") || !strings.Contains(tb.msg, "serve: bad flag") {
		t.Errorf("WaitUp said %q, want how the command ended and what it logged", tb.msg)
	}
	select {
	case err := <-exited:
		if err == nil || err.Error() != "exit status 2" {
			t.Errorf("exited gave back %v", err)
		}
	default:
		t.Error("WaitUp kept the command's end: a cleanup waiting for it would wait for good")
	}
}

type stringer string

func (s stringer) String() string { return string(s) }
