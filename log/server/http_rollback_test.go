package server

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
)

// TestCheckpointNeverRollsBack: /log/checkpoint never serves a checkpoint
// older than one it served, on a Pebble log, though the cosigned
// checkpoint it prefers comes later than the latest it served before any
// witness had cosigned (a sidecar's first seconds), and is older.
func TestCheckpointNeverRollsBack(t *testing.T) {
	for _, b := range backends {
		if b.name != "pebble" {
			continue
		}
		store, _ := b.open(t)
		l := buildLog(t, store, 600)
		var cosigned atomic.Pointer[[]byte]
		srv := httptest.NewServer(NewAPI(APIOptions{Store: l.store, Seq: l.seq, Cosigned: func() []byte {
			if p := cosigned.Load(); p != nil {
				return *p
			}
			return nil
		}}))
		defer srv.Close()
		c := &client{t: t, base: srv.URL}
		size := func() uint64 {
			t.Helper()
			_, b := c.get("/log/checkpoint")
			cp, _, err := log.OpenCheckpoint(b, l.verifier)
			if err != nil {
				t.Fatal(err)
			}
			return cp.Size
		}
		served := size()
		if served != uint64(len(l.entries)) {
			t.Fatalf("served size %d before any cosignature, want the latest, %d", served, len(l.entries))
		}
		// cosign has a witness cosign the log's checkpoint of size n.
		ws, _ := logtest.NewKey(t, "witness.test/w1")
		cosign := func(n uint64) {
			t.Helper()
			own, err := l.store.Checkpoint(context.Background(), n)
			if err != nil {
				t.Fatal(err)
			}
			nt, err := note.Open(own, note.VerifierList(l.verifier))
			if err != nil {
				t.Fatal(err)
			}
			cn, err := note.Sign(nt, ws)
			if err != nil {
				t.Fatal(err)
			}
			cosigned.Store(&cn)
		}
		cosign(l.sizes[len(l.sizes)/2])
		if got := size(); got < served {
			t.Fatalf("/log/checkpoint rolled back from size %d to the cosigned checkpoint of size %d", served, got)
		}
		// Once a witness cosigns the latest, it is served, cosignature and all.
		cosign(served)
		if _, b := c.get("/log/checkpoint"); string(b) != string(*cosigned.Load()) {
			t.Fatalf("/log/checkpoint serves\n%s\nnot the cosigned checkpoint of size %d", b, served)
		}
	}
}
