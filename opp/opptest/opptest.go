// Package opptest gives the tests of opp and its tool wiring a real log:
// a sequencer over a store, with its genesis entry, read back from the
// store. Test code only; nothing in the product imports it.
package opptest

import (
	"context"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/log/server"
)

// A Log is a sequencer over a store; it is the log an [opp.Engine] takes.
type Log struct {
	seq      *server.Sequencer
	store    log.Storage
	Verifier note.Verifier // the verifier of its checkpoints
}

// NewLog starts a log named origin over store, with a genesis entry; it
// closes when the test ends.
func NewLog(tb testing.TB, store log.Storage, origin string) *Log {
	tb.Helper()
	s, v := logtest.NewKey(tb, origin)
	seq, err := server.OpenSequencer(context.Background(), store, s, v, &server.SequencerOptions{
		Genesis: func() ([]byte, error) { return log.Genesis(time.Now(), origin, "vkey", []byte{1}, "test") },
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { seq.Close() })
	return &Log{seq: seq, store: store, Verifier: v}
}

// Append appends entry and returns its receipt.
func (l *Log) Append(ctx context.Context, entry []byte) (*log.Receipt, error) {
	return l.seq.Append(ctx, entry)
}

// Entries returns the entries [start, end) from the store.
func (l *Log) Entries(ctx context.Context, start, end uint64) ([][]byte, error) {
	return l.store.Entries(ctx, start, end)
}

// LatestSize returns the size of the log's newest checkpoint.
func (l *Log) LatestSize(context.Context) (uint64, error) { return l.Size(), nil }

// Size returns the size of the log's newest checkpoint.
func (l *Log) Size() uint64 {
	n, _ := l.seq.Checkpoint()
	return n
}
