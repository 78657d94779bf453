package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
)

// TestSequencerCommitPanics: a commit that panics (a bug, or a store that
// panics on what it finds) stops the log. The caller that led the commit
// gets the panic; an append queued behind it, and every later one, gets
// an error that says so; Close returns. Before appends were committed by
// their callers, such a panic ended the process; a caller that recovers
// panics (net/http does) must not leave the others waiting for ever.
func TestSequencerCommitPanics(t *testing.T) {
	st := &heldStore{Storage: logtest.NewMemory(), entered: make(chan struct{}, 1), panics: "boom in the store"}
	signer, verifier := logtest.NewKey(t, "provlog.test/panic")
	seq, err := OpenSequencer(context.Background(), st, signer, verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.hold.Lock()
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		seq.Append(context.Background(), []byte("a"))
	}()
	<-st.entered // a leads a commit, held
	b := appendAsync(seq, nil, "b")
	eventually(t, "b queued", func() bool { return seq.queued() == 1 })
	st.hold.Unlock()
	select {
	case v := <-panicked:
		if fmt.Sprint(v) != "boom in the store" {
			t.Fatalf("a's caller got panic %v, want the store's", v)
		}
	case <-time.After(time.Minute):
		t.Fatal("a's caller got nothing within a minute")
	}
	select {
	case got := <-b:
		if got.err == nil || !strings.Contains(got.err.Error(), "a commit panicked: boom in the store") {
			t.Fatalf("b: %v, want the log stopped by the panic", got.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("b: no answer within a minute")
	}
	if _, err := seq.Append(context.Background(), []byte("c")); !errors.Is(err, log.ErrUnavailable) || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("append after the panic: %v, want refused as unavailable", err)
	}
	if err := seq.Err(); err == nil {
		t.Fatal("Err() is nil after a commit panicked")
	}
	closed := make(chan struct{})
	go func() { seq.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("Close still waiting after a minute")
	}
}

// TestSequencerCloseFailsQueued: Close lets the commit under way finish
// and fails what is queued behind it with ErrClosed.
func TestSequencerCloseFailsQueued(t *testing.T) {
	st := &heldStore{Storage: logtest.NewMemory(), entered: make(chan struct{}, 1)}
	signer, verifier := logtest.NewKey(t, "provlog.test/close")
	seq, err := OpenSequencer(context.Background(), st, signer, verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.hold.Lock()
	a := appendAsync(seq, nil, "a")
	<-st.entered
	b, c := appendAsync(seq, nil, "b"), appendAsync(seq, nil, "c")
	eventually(t, "b and c queued", func() bool { return seq.queued() == 2 })
	closed := make(chan struct{})
	go func() { seq.Close(); close(closed) }()
	eventually(t, "closing", func() bool {
		select {
		case <-seq.done:
			return true
		default:
			return false
		}
	})
	st.hold.Unlock()
	if r := await(t, a, "a"); r.Index != 0 {
		t.Fatalf("a at index %d, want 0", r.Index)
	}
	for name, ch := range map[string]chan appended{"b": b, "c": c} {
		select {
		case got := <-ch:
			if !errors.Is(got.err, ErrClosed) {
				t.Fatalf("%s: %v, want ErrClosed", name, got.err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s: no answer within a minute", name)
		}
	}
	<-closed
	if size, _ := seq.Checkpoint(); size != 1 {
		t.Fatalf("log size %d after Close, want 1", size)
	}
}
