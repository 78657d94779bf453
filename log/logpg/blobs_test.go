package logpg

import (
	"errors"
	"strings"
	"testing"

	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/log/logpg/pgtest"
)

// TestBlobsShared: a blob put through one sidecar's store is read through
// another's, purged through the second it is gone for the first, and bytes
// changed in the table are refused as corrupt.
func TestBlobsShared(t *testing.T) {
	a, b, dsn := twoWriters(t)
	ba, bb := a.Blobs(), b.Blobs()
	data := []byte(strings.Repeat("a retained result ", 1000))
	sum, err := ba.Put(data)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := ba.Put(data); err != nil || again != sum {
		t.Fatalf("putting the same bytes again: %s, %v", again, err)
	}
	if got, err := bb.Get(sum); err != nil || string(got) != string(data) || !has(t, bb, sum) {
		t.Fatalf("reading through the other sidecar: %.20q, %v", got, err)
	}
	if _, err := bb.Get(blobs.Sum([]byte("never put"))); !errors.Is(err, blobs.ErrNotFound) {
		t.Fatalf("a blob never put: %v", err)
	}
	if _, err := bb.Get("../etc/passwd"); err == nil {
		t.Fatal("a malformed name was looked up")
	}

	other, err := ba.Put([]byte("to be changed"))
	if err != nil {
		t.Fatal(err)
	}
	pgtest.Psql(t, dsn, "UPDATE provlog_blobs SET data = 'changed' WHERE name = '"+other+"'")
	if _, err := bb.Get(other); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("a changed blob: %v", err)
	}

	if err := bb.Purge(sum); err != nil {
		t.Fatal(err)
	}
	if _, err := ba.Get(sum); !errors.Is(err, blobs.ErrNotFound) || has(t, ba, sum) {
		t.Fatalf("a blob purged through the other sidecar: %v", err)
	}
	if err := ba.Purge(sum); err != nil {
		t.Fatalf("purging an absent blob: %v", err)
	}
}

// has is bs.Has, failing t on an error.
func has(t *testing.T, bs *blobs.Store, sum string) bool {
	t.Helper()
	ok, err := bs.Has(sum)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}
