package cmdtest

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// upWait is how long a command may take to come up before the test says
// it did not: far beyond what one that comes up takes, not a bound on its
// speed.
const upWait = time.Minute

// WaitUp waits until up reports the command is up (it is polled), failing
// t if the command ends first, which it says by sending on exited, or if
// it is not up after a minute. out is what the command logged, for the
// failure's message. exited gets back the value WaitUp took from it, so
// that a cleanup waiting for the command still can; it may be nil for a
// command whose end nobody watches.
func WaitUp[T any](t testing.TB, up func() bool, exited chan T, out fmt.Stringer) {
	t.Helper()
	if err := Up(up, exited, out); err != nil {
		t.Fatalf("%v", err)
	}
}

// Up is WaitUp for a test that goes on when the command ends first (a
// command that may refuse to start): it returns what WaitUp fails with.
// Whether the command ended, exited holds.
func Up[T any](up func() bool, exited chan T, out fmt.Stringer) error {
	for deadline := time.Now().Add(upWait); !up(); time.Sleep(20 * time.Millisecond) {
		select {
		case v := <-exited:
			select {
			case exited <- v:
			default:
			}
			return fmt.Errorf("the command ended (%v) before it was up: %s", v, out)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the command was not up after %v: %s", upWait, out)
		}
	}
	return nil
}

// WaitHealthy is WaitUp until the server at base (http://host:port)
// answers GET /healthz, with any status.
func WaitHealthy[T any](t testing.TB, base string, exited chan T, out fmt.Stringer) {
	t.Helper()
	WaitUp(t, healthz(base), exited, out)
}

// Healthy is Up until the server at base answers GET /healthz.
func Healthy[T any](base string, exited chan T, out fmt.Stringer) error {
	return Up(healthz(base), exited, out)
}

// healthz reports whether the server at base answers GET /healthz, with
// any status.
func healthz(base string) func() bool {
	return func() bool {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}
}
