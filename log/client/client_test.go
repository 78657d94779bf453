package client_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/client"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/log/server"
)

// TestClient reads a real log API: entries across an entry-bundle
// boundary, a missing tile as log.ErrNotFound, and a refused reader as a
// StatusError.
func TestClient(t *testing.T) {
	ctx := context.Background()
	skey, vkey, _ := note.GenerateKey(rand.Reader, "provlog.test/client")
	s, _ := note.NewSigner(skey)
	v, _ := note.NewVerifier(vkey)
	store := logtest.NewMemory()
	seq, err := server.OpenSequencer(ctx, store, s, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	var want [][]byte
	for i := range 300 {
		b, _ := (&log.Entry{Kind: log.KindCall, Time: time.Unix(int64(i), 0), Actor: "a", Fields: map[string]any{"n": i}}).Marshal()
		if _, err := seq.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
		want = append(want, b)
	}
	const token = "reader-token"
	api := server.NewAPI(server.APIOptions{Store: store, Seq: seq,
		Authorized: func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+token }})
	ts := httptest.NewServer(api)
	defer ts.Close()

	c := client.New(ts.URL+"/log", token, nil)
	cp, err := c.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := log.ParseCheckpointNote(cp); err != nil || got.Size != 300 {
		t.Fatalf("checkpoint: %+v, %v", got, err)
	}
	es, err := c.Entries(ctx, 250, 300)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range es {
		if string(e) != string(want[250+i]) {
			t.Fatalf("entry %d = %s, want %s", 250+i, e, want[250+i])
		}
	}
	if _, err := c.Tile(ctx, log.Tile{Level: 0, N: 9, W: 256}); !errors.Is(err, log.ErrNotFound) {
		t.Errorf("tile past the tree: %v, want ErrNotFound", err)
	}
	_, err = client.New(ts.URL+"/log/", "", nil).Entries(ctx, 0, 1)
	var se *client.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
		t.Errorf("entries without a token: %v, want a 401 StatusError", err)
	}
}

// TestClientPrefixWithQuery: a log whose prefix carries a query (an API
// key a gateway in front of it wants and takes off) is read at its paths,
// with that query kept and a request's own query (a receipt's index)
// after it.
// Before, every path was appended after the query ("/log?k=K/checkpoint").
func TestClientPrefixWithQuery(t *testing.T) {
	ctx := context.Background()
	skey, vkey, _ := note.GenerateKey(rand.Reader, "provlog.test/client")
	s, _ := note.NewSigner(skey)
	v, _ := note.NewVerifier(vkey)
	store := logtest.NewMemory()
	seq, err := server.OpenSequencer(ctx, store, s, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	for i := range 3 {
		b, _ := (&log.Entry{Kind: log.KindCall, Time: time.Unix(int64(i), 0), Actor: "a", Fields: map[string]any{"n": i}}).Marshal()
		if _, err := seq.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	api := server.NewAPI(server.APIOptions{Store: store, Seq: seq, Authorized: func(*http.Request) bool { return true }})
	var seen []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.URL.Path+" ? "+r.URL.RawQuery)
		q := r.URL.Query()
		q.Del("k") // the gateway's: the log API refuses a parameter it does not know
		r.URL.RawQuery = q.Encode()
		api.ServeHTTP(w, r)
	}))
	defer ts.Close()
	for _, prefix := range []string{ts.URL + "/log?k=K", ts.URL + "/log/?k=K"} {
		seen = nil
		c := client.New(prefix, "", nil)
		if _, err := c.Checkpoint(ctx); err != nil {
			t.Errorf("%s: checkpoint: %v", prefix, err)
		}
		if _, err := c.Entries(ctx, 0, 3); err != nil {
			t.Errorf("%s: entries: %v", prefix, err)
		}
		if _, err := c.Receipt(ctx, client.ReceiptQuery{Index: 2}); err != nil {
			t.Errorf("%s: receipt: %v", prefix, err)
		}
		want := []string{"/log/checkpoint ? k=K", "/log/tile/entries/000.p/3 ? k=K", "/log/proof/inclusion ? k=K&index=2"}
		if !slices.Equal(seen, want) {
			t.Errorf("%s: requests %q, want %q", prefix, seen, want)
		}
	}
}
