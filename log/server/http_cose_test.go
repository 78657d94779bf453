package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/cose"
	"github.com/provlog/provlog/log/logtest"
)

// TestInclusionCOSE: format=cose answers the same proof as the tlog-proof
// receipt, as an RFC 9942 receipt that verifies with the log's key; bad
// formats and a server without a signer refuse.
func TestInclusionCOSE(t *testing.T) {
	ctx := context.Background()
	store := logtest.NewMemory()
	skey, vkey, err := note.GenerateKey(nil, "provlog.test/cose")
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := note.NewSigner(skey)
	verifier, _ := note.NewVerifier(vkey)
	seq, err := OpenSequencer(ctx, store, signer, verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	var entries [][]byte
	for i := range 300 {
		e := fmt.Appendf(nil, "entry %d", i)
		if _, err := seq.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	srv := httptest.NewServer(NewAPI(APIOptions{Store: store, Seq: seq, Authorized: authorized, Signer: signer}))
	defer srv.Close()
	c := &client{t: t, base: srv.URL, auth: true}
	k, err := cose.ParseVerifierKey(vkey)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		query       string
		index, size uint64
	}{{"index=0&format=cose", 0, 300}, {"index=299&format=cose", 299, 300}, {"index=7&size=100&format=cose", 7, 100}, {"format=cose&hash=%x", 42, 300}} {
		query := q.query
		if q.index == 42 {
			query = fmt.Sprintf(q.query, log.LeafHash(entries[42]))
		}
		resp, b := c.get("/log/proof/inclusion?" + query)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != `application/cose; cose-type="cose-sign1"` {
			t.Fatalf("%s: %d %s: %s", query, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		r, err := cose.Parse(b)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		root, err := r.Verify(log.LeafHash(entries[q.index]), k)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		cp, err := store.Checkpoint(ctx, q.size)
		if err != nil {
			t.Fatal(err)
		}
		want, _, _ := log.OpenCheckpoint(cp, verifier)
		if r.Size != q.size || r.Index != q.index || string(root) != string(want.Hash) {
			t.Errorf("%s: receipt for %d in %d, root %x; want %d in %d, root %x", query, r.Index, r.Size, root, q.index, q.size, want.Hash)
		}
	}
	if resp, _ := c.do(http.MethodGet, "/log/proof/inclusion?index=1&format=json", nil); resp.StatusCode != 400 {
		t.Errorf("format=json: %d", resp.StatusCode)
	}
	plain := httptest.NewServer(NewAPI(APIOptions{Store: store, Seq: seq, Authorized: authorized}))
	defer plain.Close()
	pc := &client{t: t, base: plain.URL, auth: true}
	if resp, _ := pc.do(http.MethodGet, "/log/proof/inclusion?index=1&format=cose", nil); resp.StatusCode != 404 {
		t.Errorf("format=cose without a signer: %d", resp.StatusCode)
	}
	if resp, b := pc.get("/log/proof/inclusion?index=1&format=tlog-proof"); resp.StatusCode != 200 {
		t.Errorf("format=tlog-proof: %d %s", resp.StatusCode, b)
	}
}
