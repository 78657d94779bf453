package logpg_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg"
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

// apiTiles is an x/mod sumdb/tlog TileReader over a log API's hash tiles,
// so that tlog.TileHashReader authenticates each against a tree hash.
type apiTiles struct{ url string }

func (r apiTiles) Height() int { return log.TileHeight }

func (r apiTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		path := "/log/" + log.Tile{Level: t.L, N: uint64(t.N), W: t.W}.Path()
		resp, err := http.Get(r.url + path)
		if err != nil {
			return nil, err
		}
		out[i], _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
		}
	}
	return out, nil
}

func (r apiTiles) SaveTiles([]tlog.Tile, [][]byte) {}

// TestAPIServesOtherSidecarsCheckpoint: a client that got a checkpoint
// from one sidecar of a shared log (behind a load balancer, say) reads its
// tree from the other: the tiles, entries and proofs for it, all verified
// against that checkpoint, right after the commit that made it.
func TestAPIServesOtherSidecarsCheckpoint(t *testing.T) {
	dsn := pgtest.DSN(t)
	k := newKey(t, "provlog.test/api-other")
	a, sa := openSeq(t, dsn, k)
	b, sb := openSeq(t, dsn, k)
	apis := map[*server.Sequencer]string{}
	for seq, st := range map[*server.Sequencer]*logpg.Store{a: sa, b: sb} {
		srv := httptest.NewServer(server.NewAPI(server.APIOptions{Store: st, Seq: seq}))
		t.Cleanup(srv.Close)
		apis[seq] = srv.URL
	}
	const n = 300
	failed := 0
	for i := range n {
		from, other := b, a
		if i%2 == 0 {
			from, other = a, b
		}
		r, err := from.Append(t.Context(), fmt.Appendf(nil, "entry %d", i))
		if err != nil {
			t.Fatal(err)
		}
		c, _, err := log.OpenCheckpoint(r.Checkpoint, k.v)
		if err != nil {
			t.Fatal(err)
		}
		tree := tlog.Tree{N: int64(c.Size)}
		copy(tree.Hash[:], c.Hash)
		url := apis[other]
		errs := []error{}
		if th, err := tlog.TreeHash(tree.N, tlog.TileHashReader(tree, apiTiles{url})); err != nil || th != tree.Hash {
			errs = append(errs, fmt.Errorf("tree hash from its tiles: %v", err))
		}
		for _, path := range []string{
			fmt.Sprintf("/log/entry/%d", r.Index),
			fmt.Sprintf("/log/proof/inclusion?index=%d&size=%d", r.Index, c.Size),
			fmt.Sprintf("/log/proof/consistency?old=1&new=%d", c.Size),
		} {
			resp, err := http.Get(url + path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				errs = append(errs, fmt.Errorf("GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(body)))
			}
		}
		if len(errs) > 0 {
			if failed == 0 {
				t.Errorf("the checkpoint of size %d, from one sidecar, read from the other: %v", c.Size, errs)
			}
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d checkpoints could not be read from the other sidecar right after their commit", failed, n)
	}
}

// TestAPIProvesOtherSidecarsEntry: a client that got a receipt from one
// sidecar of a shared log asks the other for the entry's receipt on its
// latest checkpoint, by index or by leaf hash, right after the commit.
func TestAPIProvesOtherSidecarsEntry(t *testing.T) {
	dsn := pgtest.DSN(t)
	k := newKey(t, "provlog.test/api-other-entry")
	a, sa := openSeq(t, dsn, k)
	b, _ := openSeq(t, dsn, k)
	srv := httptest.NewServer(server.NewAPI(server.APIOptions{Store: sa, Seq: a}))
	t.Cleanup(srv.Close)
	const n = 100
	failed := 0
	for i := range n {
		e := fmt.Appendf(nil, "entry %d", i)
		r, err := b.Append(t.Context(), e)
		if err != nil {
			t.Fatal(err)
		}
		query := fmt.Sprintf("index=%d", r.Index)
		if i%2 == 1 {
			query = fmt.Sprintf("hash=%x", log.LeafHash(e))
		}
		resp, err := http.Get(srv.URL + "/log/proof/inclusion?" + query)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			if failed == 0 {
				t.Errorf("the entry at %d, from one sidecar, proven by the other (%s): %s: %s", r.Index, query, resp.Status, bytes.TrimSpace(body))
			}
			failed++
			continue
		}
		rc, err := log.ParseReceipt(body)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rc.Verify(log.LeafHash(e), k.v); err != nil || rc.Index != r.Index {
			t.Fatalf("receipt for %d (%s): index %d, %v", r.Index, query, rc.Index, err)
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d entries could not be proven by the other sidecar right after their commit", failed, n)
	}
}

// TestAPICheckpointNotBehindOtherSidecar: a client that got a receipt
// from one sidecar of a shared log, then reads /log/checkpoint from the
// other, gets a checkpoint at least as new as the receipt's: never one
// that looks like a rollback.
func TestAPICheckpointNotBehindOtherSidecar(t *testing.T) {
	dsn := pgtest.DSN(t)
	k := newKey(t, "provlog.test/api-other-checkpoint")
	a, sa := openSeq(t, dsn, k)
	b, _ := openSeq(t, dsn, k)
	srv := httptest.NewServer(server.NewAPI(server.APIOptions{Store: sa, Seq: a}))
	t.Cleanup(srv.Close)
	const n = 200
	behind := 0
	for i := range n {
		r, err := b.Append(t.Context(), fmt.Appendf(nil, "entry %d", i))
		if err != nil {
			t.Fatal(err)
		}
		rc, _, err := log.OpenCheckpoint(r.Checkpoint, k.v)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := getCheckpointSize(t, srv.URL, k), rc.Size; got < want {
			if behind == 0 {
				t.Errorf("after a receipt on the checkpoint of size %d from one sidecar, the other's /log/checkpoint served size %d", want, got)
			}
			behind++
		}
	}
	if behind > 0 {
		t.Errorf("%d of %d reads of /log/checkpoint were behind the receipt the other sidecar had just handed out", behind, n)
	}
}

// getCheckpointSize returns the size of the checkpoint GET /log/checkpoint
// of url serves, verified with k.
func getCheckpointSize(t *testing.T, url string, k keyPair) uint64 {
	t.Helper()
	resp, err := http.Get(url + "/log/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	c, _, err := log.OpenCheckpoint(body, k.v)
	if resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("GET /log/checkpoint: %s (%v): %s", resp.Status, err, body)
	}
	return c.Size
}
