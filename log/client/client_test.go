package client_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
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
