package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/server"
	"github.com/provlog/provlog/proxy/authn"
)

// countingReader counts the entries read through it.
type countingReader struct {
	entryReader
	n atomic.Int64
}

func (c *countingReader) Entries(ctx context.Context, start, end uint64) ([][]byte, error) {
	c.n.Add(int64(end - start))
	return c.entryReader.Entries(ctx, start, end)
}

// TestClaimNamespacesReadsNewEntries: a sidecar adding an issuer reads
// the log for static actors' entries in its namespace (claimNamespaces).
// It read the whole log each time, so each issuer added to a big log
// (on a reload, within namespaceWriteTimeout) cost a read of every
// entry again. What an earlier read found holds: the entries it read
// do not change, so only those since are read, and a static actor's
// entries from before are still found, named and counted.
func TestClaimNamespacesReadsNewEntries(t *testing.T) {
	ctx := context.Background()
	const n = 5000
	data := makeDataDir(t, n) // n entries by static actor "bench"
	k, err := loadKeys(data)
	if err != nil {
		t.Fatal(err)
	}
	store, err := openStore(data, false)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	seq, err := server.OpenSequencer(ctx, store, k.signer, k.verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	cr := &countingReader{entryReader: store}
	lg := nsLog{entryReader: cr, append: seq.Append, size: func(context.Context) (uint64, error) {
		size, _ := seq.Checkpoint()
		return size, nil
	}}
	logger := slog.New(slog.DiscardHandler)
	logged := map[string]bool{}
	auth := func(prefixes ...string) *authn.Config {
		c := &authn.Config{Resource: "https://provlog.test/mcp"}
		for _, p := range prefixes {
			c.Issuers = append(c.Issuers, authn.IssuerConfig{Issuer: "https://" + strings.TrimSuffix(p, ":") + ".test/", ActorPrefix: p})
		}
		return c
	}
	claim := func(prefixes ...string) (int64, error) {
		before := cr.n.Load()
		err := claimNamespaces(ctx, data, auth(prefixes...), lg, logged, logger)
		return cr.n.Load() - before, err
	}
	if _, err := claim("idp1:"); err != nil {
		t.Fatal(err)
	}
	// Static idp3:carol writes after the first issuer was added.
	carol := appendEntry(t, seq, &log.Entry{Kind: log.KindCall, Time: time.Now(), Actor: "idp3:carol", Fields: map[string]any{
		"server": "s", "tool": "t", "started": time.Now().UTC().Format(log.TimeFormat)}})
	for range 9 {
		appendEntry(t, seq, &log.Entry{Kind: log.KindCall, Time: time.Now(), Actor: "dave", Fields: map[string]any{
			"server": "s", "tool": "t", "started": time.Now().UTC().Format(log.TimeFormat)}})
	}
	read, err := claim("idp1:", "idp2:")
	if err != nil {
		t.Fatal(err)
	}
	if read > 100 {
		t.Errorf("adding a second issuer read %d entries of a log of %d, want only the 11 written since the first was added", read, n+12)
	}
	// What the reads found is still found: carol's entry, written after
	// the first read, and bench's n, before it.
	if _, err := claim("idp1:", "idp2:", "idp3:"); err == nil || !strings.Contains(err.Error(), `"idp3:carol"`) || !strings.Contains(err.Error(), "entry "+strconv.FormatUint(carol, 10)) {
		t.Errorf("issuer idp3: added where static idp3:carol wrote entry %d: %v", carol, err)
	}
	if _, err := claim("idp1:", "idp2:", "ben"); err == nil || !strings.Contains(err.Error(), `"bench"`) || !strings.Contains(err.Error(), strconv.Itoa(n)+" entries") || !strings.Contains(err.Error(), "entry 1,") {
		t.Errorf("issuer ben added where static bench wrote entries 1 to %d: %v", n, err)
	}
}

// TestStaticActorsFileDamaged: a damaged auth-static-actors (a flipped
// byte) refuses the issuer's claim with an error naming the file and
// what to do, and writes nothing to the log.
func TestStaticActorsFileDamaged(t *testing.T) {
	ctx := context.Background()
	data := makeDataDir(t, 3)
	k, err := loadKeys(data)
	if err != nil {
		t.Fatal(err)
	}
	store, err := openStore(data, false)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	seq, err := server.OpenSequencer(ctx, store, k.signer, k.verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	size := func(context.Context) (uint64, error) { n, _ := seq.Checkpoint(); return n, nil }
	lg := nsLog{entryReader: store, append: seq.Append, size: size}
	cfg := func(p string) *authn.Config {
		return &authn.Config{Issuers: []authn.IssuerConfig{{Issuer: "https://" + p + "test/", ActorPrefix: p}}}
	}
	logger := slog.New(slog.DiscardHandler)
	if err := claimNamespaces(ctx, data, cfg("a:"), lg, map[string]bool{}, logger); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(data, staticActorsFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"bench"`) {
		t.Fatalf("%s holds no line for static bench: %q", path, b)
	}
	b[bytes.IndexByte(b, '"')] ^= 0x01 // the quote before bench's id
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := size(ctx)
	err = claimNamespaces(ctx, data, cfg("b:"), lg, map[string]bool{}, logger)
	if err == nil || !strings.Contains(err.Error(), staticActorsFile) || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("a claim over a damaged %s: %v", staticActorsFile, err)
	}
	if after, _ := size(ctx); after != before {
		t.Errorf("log size %d -> %d", before, after)
	}
}

// FuzzReadStaticActors: whatever the file holds, readStaticActors
// returns an error or what writeStaticActors writes back the same.
func FuzzReadStaticActors(f *testing.F) {
	f.Add([]byte("read 12\n1 5 \"bench\"\n7 2 \"idp:bob\"\n"))
	f.Add([]byte("read 0\n"))
	f.Add([]byte("read 3\n4 1 \"x\"\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, staticActorsFile), b, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := readStaticActors(dir)
		if err != nil {
			return
		}
		if err := writeStaticActors(dir, s); err != nil {
			t.Fatal(err)
		}
		again, err := readStaticActors(dir)
		if err != nil {
			t.Fatalf("read back: %v", err)
		}
		if again.read != s.read || len(again.by) != len(s.by) {
			t.Fatalf("read back %d actors to %d, want %d to %d", len(again.by), again.read, len(s.by), s.read)
		}
		for id, w := range s.by {
			if g := again.by[id]; g == nil || *g != *w {
				t.Fatalf("actor %q read back as %v, want %v", id, g, w)
			}
		}
	})
}
