// Package witnesstest holds what the witness packages' tests share: real
// provlog logs (a sequencer over an in-memory store, served by the HTTP
// log API) and keys. Two logs made with one key and different entries are
// the misbehaving log of the fork tests.
package witnesstest

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/log/server"
	"github.com/provlog/provlog/witness"
)

// A Key is a log's note key pair.
type Key struct {
	Signer   note.Signer
	Verifier note.Verifier
	VKey     string
}

// NewKey makes an Ed25519 note key for origin.
func NewKey(t testing.TB, origin string) Key {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return Key{s, v, vkey}
}

// NewCosigner makes a witness key.
func NewCosigner(t testing.TB, name string) *log.CosignatureSigner {
	t.Helper()
	skey, _, err := log.GenerateCosignerKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := log.ParseCosignerKey(skey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A Log is a running provlog log in memory with its HTTP API.
type Log struct {
	Key   Key
	Store *logtest.Memory
	Seq   *server.Sequencer
	// Entries tags this log's entries, so two logs with one key differ.
	Entries string
	// Server serves the log API; URL+"/log/" is the tlog-tiles prefix.
	Server *httptest.Server
}

// NewLog starts an empty log with key k whose entries are tagged tag.
func NewLog(t testing.TB, k Key, tag string) *Log {
	t.Helper()
	store := logtest.NewMemory()
	seq, err := server.OpenSequencer(context.Background(), store, k.Signer, k.Verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := &Log{Key: k, Store: store, Seq: seq, Entries: tag}
	l.Server = httptest.NewServer(server.NewAPI(server.APIOptions{Store: store, Seq: seq}))
	t.Cleanup(func() {
		l.Server.Close()
		seq.Close()
	})
	return l
}

// Prefix returns the log's tlog-tiles prefix.
func (l *Log) Prefix() string { return l.Server.URL + "/log/" }

// Grow appends entries until the log has at least size n, one commit per
// entry (so there is a checkpoint at every size), and returns the signed
// checkpoint at n.
func (l *Log) Grow(t testing.TB, n uint64) []byte {
	t.Helper()
	for {
		size, _ := l.Seq.Checkpoint()
		if size >= n {
			return l.Checkpoint(t, n)
		}
		if _, err := l.Seq.Append(context.Background(), fmt.Appendf(nil, `{"%s":%d}`, l.Entries, size)); err != nil {
			t.Fatal(err)
		}
	}
}

// GrowFast appends entries from many goroutines until the log has at
// least size n; commits carry many entries, so only some sizes have a
// checkpoint. It returns the latest signed checkpoint.
func (l *Log) GrowFast(t testing.TB, n uint64) []byte {
	t.Helper()
	size, _ := l.Seq.Checkpoint()
	if size >= n {
		_, cp := l.Seq.Checkpoint()
		return cp
	}
	work := make(chan uint64, n-size)
	for i := size; i < n; i++ {
		work <- i
	}
	close(work)
	errs := make(chan error, 64)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if _, err := l.Seq.Append(context.Background(), fmt.Appendf(nil, `{"%s":%d}`, l.Entries, i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	_, cp := l.Seq.Checkpoint()
	return cp
}

// Checkpoint returns the signed checkpoint committed at size n.
func (l *Log) Checkpoint(t testing.TB, n uint64) []byte {
	t.Helper()
	cp, err := l.Store.Checkpoint(context.Background(), n)
	if err != nil {
		t.Fatalf("checkpoint at size %d: %v", n, err)
	}
	return cp
}

// A Store is a witness.Store in memory, for tests.
type Store struct {
	mu sync.Mutex
	m  map[string][]byte
}

// NewStore returns an empty Store.
func NewStore() *Store { return &Store{m: map[string][]byte{}} }

// Latest implements witness.Store.
func (s *Store) Latest(_ context.Context, origin string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.m[origin]), nil
}

// Swap implements witness.Store.
func (s *Store) Swap(_ context.Context, origin string, old, note []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.m[origin]
	if ok != (old != nil) || !bytes.Equal(cur, old) {
		return fmt.Errorf("origin %q: %w", origin, witness.ErrConflict)
	}
	s.m[origin] = bytes.Clone(note)
	return nil
}
