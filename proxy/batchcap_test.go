package proxy

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// TestRefusalBatchCap: a batch of MaxBatchMessages pings on a revision
// with batches is the SDK's to serve; one more is refused -32600, id
// null, naming the count, by the stdio front and a joined serve alike.
func TestRefusalBatchCap(t *testing.T) {
	batch := func(n int) []byte {
		var b strings.Builder
		b.WriteByte('[')
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)
		}
		return []byte(b.String() + "]")
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if a := Refusal(batch(MaxBatchMessages), "2025-03-26", logger); a != nil {
		t.Errorf("a batch of %d was refused: %s", MaxBatchMessages, a)
	}
	a := string(Refusal(batch(MaxBatchMessages+1), "2025-03-26", logger))
	want := fmt.Sprintf("holds %d messages, more than the %d", MaxBatchMessages+1, MaxBatchMessages)
	if !strings.HasPrefix(a, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`) || !strings.Contains(a, want) {
		t.Errorf("a batch of %d was answered %.300s", MaxBatchMessages+1, a)
	}
}
