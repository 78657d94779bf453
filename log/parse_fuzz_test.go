package log_test

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
)

// fuzzSigner is a fixed key, so seeds are reproducible.
func fuzzSigner(f *testing.F) note.Signer {
	s, err := note.NewSigner("PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz")
	if err != nil {
		f.Fatal(err)
	}
	return s
}

// FuzzParseReceipt checks that ParseReceipt never panics and that a receipt
// it accepts prints back to the same bytes.
func FuzzParseReceipt(f *testing.F) {
	s := fuzzSigner(f)
	leaves := numberedLeaves(5)
	nodes, ref := buildTree(f, leaves)
	cp, err := log.SignCheckpoint(log.Checkpoint{Origin: s.Name(), Size: 5, Hash: ref.Hash()}, s)
	if err != nil {
		f.Fatal(err)
	}
	for i := range uint64(5) {
		p, err := log.ProveInclusion(context.Background(), nodes, i, 5)
		if err != nil {
			f.Fatal(err)
		}
		r := &log.Receipt{Extra: log.LeafHash(leaves[i]), Index: i, Proof: p, Checkpoint: cp}
		f.Add([]byte(r.String()))
		r.Extra = nil
		f.Add([]byte(r.String()))
	}
	f.Add([]byte("c2sp.org/tlog-proof@v1\nextra AA\r==\nindex 0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\r\n\nx"))
	f.Add([]byte("c2sp.org/tlog-proof@v1\nextra \nindex 0\n\nx"))
	f.Add([]byte("c2sp.org/tlog-proof@v1\nindex 18446744073709551615\n\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := log.ParseReceipt(data)
		if err != nil {
			return
		}
		if got := r.String(); got != string(data) {
			t.Fatalf("ParseReceipt(%q).String() = %q", data, got)
		}
		for _, h := range r.Proof {
			if len(h) != log.HashSize {
				t.Fatalf("proof hash of %d bytes", len(h))
			}
		}
	})
}

// FuzzParseCheckpoint checks that ParseCheckpoint and ParseCheckpointNote
// never panic, that accepted text prints back to the same bytes, and that
// OpenCheckpoint never accepts what its key did not sign.
func FuzzParseCheckpoint(f *testing.F) {
	s := fuzzSigner(f)
	v, err := note.NewVerifier("PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW")
	if err != nil {
		f.Fatal(err)
	}
	signed := map[string]bool{} // the only texts this key ever signed
	for _, c := range []log.Checkpoint{
		{Origin: "PeterNeumann", Size: 0, Hash: log.EmptyRoot()},
		{Origin: "PeterNeumann", Size: 20852163, Hash: log.LeafHash(nil), Extensions: []string{"ext"}},
	} {
		f.Add([]byte(c.String()))
		msg, err := log.SignCheckpoint(c, s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(msg)
		signed[c.String()] = true
	}
	// encoding/base64 skips '\r' even in strict mode.
	f.Add([]byte("PeterNeumann\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\r\n"))
	f.Add([]byte("PeterNeumann\n0\n47DEQpj8HBSa+/TImW+5JC\reuQeRkm5NMpJWZG3hSuFU=\n"))
	f.Add([]byte("example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"))
	f.Add([]byte("example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if c, err := log.ParseCheckpoint(string(data)); err == nil {
			if got := c.String(); got != string(data) {
				t.Fatalf("ParseCheckpoint(%q).String() = %q", data, got)
			}
			if len(c.Hash) != log.HashSize {
				t.Fatalf("hash of %d bytes", len(c.Hash))
			}
		}
		if c, err := log.ParseCheckpointNote(data); err == nil {
			if !bytes.HasPrefix(data, []byte(c.String())) {
				t.Fatalf("ParseCheckpointNote(%q) = %q, not the note's text", data, c.String())
			}
		}
		if c, n, err := log.OpenCheckpoint(data, v); err == nil {
			if n.Text != c.String() || c.Origin != v.Name() {
				t.Fatalf("OpenCheckpoint(%q) = %+v, text %q", data, c, n.Text)
			}
			if !signed[n.Text] {
				t.Fatalf("OpenCheckpoint accepted a text the key never signed: %q", data)
			}
		}
	})
}

// FuzzParseEntry checks that ParseEntry never panics and that an entry it
// accepts marshals back to the same bytes: the log holds one encoding per
// entry.
func FuzzParseEntry(f *testing.F) {
	for _, e := range []*log.Entry{
		{Kind: log.KindGenesis, Time: time.Unix(0, 0)},
		{Kind: log.KindGenesis, Time: time.Unix(0, 0), Actor: "provlog", Fields: map[string]any{"origin": "o", "vkey": "k", "anchor_key": "", "version": "v"}},
		{Kind: log.KindCall, Time: time.Date(2026, 7, 1, 12, 30, 45, 123456789, time.UTC), Actor: "alice",
			Fields: map[string]any{"args": map[string]any{"a": []any{1, 2.5, "x", nil, true}, "é": "\u2028\x01"}, "n": 1e21}},
		{Kind: log.KindCall, Time: time.Unix(1, 0), Actor: "idp:alice", Auth: &log.Auth{Issuer: "https://idp.example/", Subject: "alice",
			ClientID: "agent", JTI: "j", Scope: "a b", TokenSHA256: strings.Repeat("ab", 32), Via: log.AuthViaJWT,
			Act: &log.Act{Subject: "agent", Issuer: "https://idp.example/", Act: &log.Act{Subject: "orchestrator", ClientID: "o"}}}},
	} {
		b, err := e.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"actor":"a","kind":"call","time":"2026-07-01T10:30:45.123456789Z","v":1.0}`))
	f.Add([]byte(`{"actor":"a","kind":"call","time":"2026-02-30T10:30:45.123456789Z","v":1}`))
	f.Add([]byte(`{"actor":"a","kind":"call","time":"2026-07-01T10:30:45.123456789Z","v":1,"x":-0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := log.ParseEntry(data)
		if err != nil {
			return
		}
		b, err := e.Marshal()
		if err != nil {
			t.Fatalf("ParseEntry(%q) accepted an entry Marshal refuses: %v", data, err)
		}
		if !bytes.Equal(b, data) {
			t.Fatalf("ParseEntry(%q).Marshal() = %q", data, b)
		}
		if e.Kind != log.KindGenesis {
			return
		}
		g, err := log.ParseGenesis(e)
		if err != nil {
			return
		}
		gb, err := g.Marshal()
		if err != nil {
			t.Fatalf("ParseGenesis(%q) accepted fields GenesisEntry.Marshal refuses: %v", data, err)
		}
		ge, err := log.ParseEntry(gb)
		if err != nil {
			t.Fatal(err)
		}
		g2, err := log.ParseGenesis(ge)
		if err != nil {
			t.Fatalf("ParseGenesis of its own Marshal: %v", err)
		}
		if !reflect.DeepEqual(g2, g) {
			t.Fatalf("genesis %+v does not survive Marshal and ParseGenesis: %+v", g, g2)
		}
	})
}
