package logpg_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg/pgtest"
	"github.com/provlog/provlog/log/server"
)

// A shownSidecar is a sequencer on a shared log with its log API, whose
// SequencerOptions.Shown keeps the newest size shown (as provlog keeps the
// newest checkpoint in the data dir, so that a start after a failover
// that lost it is refused), or fails while refuse is set.
type shownSidecar struct {
	t        *testing.T
	seq      *server.Sequencer
	url      string
	recorded atomic.Uint64
	refuse   atomic.Bool
}

func openShownSidecar(t *testing.T, dsn string, k keyPair) *shownSidecar {
	s := &shownSidecar{t: t}
	seq, st := openSeqOpts(t, dsn, k, nil, &server.SequencerOptions{Shown: func(cp []byte) error {
		if s.refuse.Load() {
			return errors.New("the record of checkpoints shown failed")
		}
		c, err := log.ParseCheckpointNote(cp)
		if err != nil {
			return err
		}
		s.recorded.Store(c.Size)
		return nil
	}})
	srv := httptest.NewServer(server.NewAPI(server.APIOptions{Store: st, Seq: seq}))
	t.Cleanup(srv.Close)
	s.seq, s.url = seq, srv.URL
	return s
}

// get returns the status of GET path, failing the test if the answer
// hands out a checkpoint (itself, or in a receipt) larger than any the
// sequencer recorded as shown.
func (s *shownSidecar) get(path string) int {
	t := s.t
	t.Helper()
	resp, err := http.Get(s.url + path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode
	}
	cp := body
	if r, err := log.ParseReceipt(body); err == nil {
		cp = r.Checkpoint
	}
	if c, err := log.ParseCheckpointNote(cp); err == nil && c.Size > s.recorded.Load() {
		t.Errorf("GET %s handed out the checkpoint of size %d; the largest the sidecar recorded as shown is %d", path, c.Size, s.recorded.Load())
	}
	return resp.StatusCode
}

func appendN(t *testing.T, seq *server.Sequencer, n int, what string) {
	t.Helper()
	for i := range n {
		if _, err := seq.Append(t.Context(), fmt.Appendf(nil, "%s %d", what, i)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAPIShowsOpenedCheckpoint: a sidecar that opens a shared log another
// sidecar wrote serves the stored checkpoint only once it is on record as
// shown.
func TestAPIShowsOpenedCheckpoint(t *testing.T) {
	dsn := pgtest.DSN(t)
	k := newKey(t, "provlog.test/api-opened")
	b, _ := openSeq(t, dsn, k)
	appendN(t, b, 3, "from B")
	a := openShownSidecar(t, dsn, k)
	for _, path := range []string{"/log/checkpoint", "/log/proof/inclusion?index=0", "/log/proof/inclusion?index=0&size=4"} {
		if got := a.get(path); got != http.StatusOK {
			t.Errorf("GET %s: %d", path, got)
		}
	}
}

// TestAPIHandsOutOnlyShown: a sidecar on a shared log whose record of
// checkpoints shown failed (its log stops: "nobody gets it") hands out
// none of the checkpoints another sidecar commits after, in a receipt
// for an explicit size or otherwise.
func TestAPIHandsOutOnlyShown(t *testing.T) {
	dsn := pgtest.DSN(t)
	k := newKey(t, "provlog.test/api-shown")
	a := openShownSidecar(t, dsn, k)
	appendN(t, a.seq, 2, "from A")
	b, _ := openSeq(t, dsn, k)
	a.refuse.Store(true)
	appendN(t, b, 3, "from B")
	size, _ := b.Checkpoint()
	for _, path := range []string{
		fmt.Sprintf("/log/proof/inclusion?index=%d&size=%d", size-1, size),
		"/log/proof/inclusion?index=0",
		"/log/checkpoint",
	} {
		a.get(path)
	}
	for path, want := range map[string]int{
		fmt.Sprintf("/log/proof/inclusion?index=0&size=%d", size): http.StatusNotFound,
		fmt.Sprintf("/log/proof/consistency?old=1&new=%d", size):  http.StatusNotFound,
		fmt.Sprintf("/log/entry/%d", size-1):                      http.StatusNotFound,
		"/log/" + log.Tile{Level: 0, N: 0, W: int(size)}.Path():   http.StatusNotFound,
		"/log/" + log.Tile{Level: -1, N: 0, W: int(size)}.Path():  http.StatusNotFound,
	} {
		if got := a.get(path); got != want {
			t.Errorf("GET %s: %d, want %d (A showed no checkpoint of size %d)", path, got, want, size)
		}
	}
}
