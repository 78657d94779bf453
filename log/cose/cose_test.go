package cose

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
	"golang.org/x/mod/sumdb/note"
)

const testOrigin = "example.org/cose-test"

func testKeys(t testing.TB) (note.Signer, *VerifierKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := note.NewEd25519VerifierKey(testOrigin, pub)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParseVerifierKey(vkey)
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(signerKey(t, priv, k.Hash))
	if err != nil {
		t.Fatal(err)
	}
	return s, k, priv
}

// signerKey spells a note signer key (x/mod's PRIVATE+KEY form) for priv.
func signerKey(t testing.TB, priv ed25519.PrivateKey, hash uint32) string {
	t.Helper()
	seed := append([]byte{0x01}, priv.Seed()...)
	return fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s", testOrigin, hash, b64(seed))
}

// tree returns a reference tree of n leaves.
func tree(n int) *testonly.Tree {
	tr := testonly.New(rfc6962.DefaultHasher)
	for i := range n {
		tr.AppendData([]byte(fmt.Sprintf("entry %d", i)))
	}
	return tr
}

func TestSignParseVerify(t *testing.T) {
	s, k, _ := testKeys(t)
	for _, size := range []int{1, 2, 3, 7, 8, 9, 100, 257} {
		tr := tree(size)
		root := tr.Hash()
		for _, idx := range []int{0, size / 2, size - 1} {
			p, err := tr.InclusionProof(uint64(idx), uint64(size))
			if err != nil {
				t.Fatal(err)
			}
			leaf := tr.LeafHash(uint64(idx))
			b, err := Sign(s, uint64(size), uint64(idx), leaf, p, root)
			if err != nil {
				t.Fatalf("size %d index %d: %v", size, idx, err)
			}
			r, err := Parse(b)
			if err != nil {
				t.Fatalf("size %d index %d: parse: %v", size, idx, err)
			}
			if got, err := r.Verify(leaf, k); err != nil || !bytes.Equal(got, root) {
				t.Fatalf("size %d index %d: verify: %v (root %x, want %x)", size, idx, err, got, root)
			}
			if r.Issuer != testOrigin || r.Size != uint64(size) || r.Index != uint64(idx) {
				t.Errorf("parsed %+v", r)
			}
			if !bytes.Equal(r.Marshal(), b) {
				t.Errorf("size %d index %d: Marshal does not give back the parsed bytes", size, idx)
			}
			if idx > 0 {
				if _, err := r.Verify(tr.LeafHash(0), k); err == nil {
					t.Errorf("size %d: receipt for %d verifies for leaf 0", size, idx)
				}
			}
		}
	}
}

func TestSignRefusesWrongRoot(t *testing.T) {
	s, _, _ := testKeys(t)
	tr := tree(5)
	p, _ := tr.InclusionProof(2, 5)
	if _, err := Sign(s, 5, 2, tr.LeafHash(2), p, tr.HashAt(4)); err == nil {
		t.Fatal("Sign signed a root the proof does not lead to")
	}
}

func TestVerifyRefusesOtherKeys(t *testing.T) {
	s, k, _ := testKeys(t)
	_, other, _ := testKeys(t)
	tr := tree(10)
	p, _ := tr.InclusionProof(3, 10)
	b, err := Sign(s, 10, 3, tr.LeafHash(3), p, tr.Hash())
	if err != nil {
		t.Fatal(err)
	}
	r, _ := Parse(b)
	if _, err := r.Verify(tr.LeafHash(3), other); err == nil {
		t.Error("verified under another key with the same origin")
	}
	renamed := *k
	renamed.Name = "other.example/log"
	if _, err := r.Verify(tr.LeafHash(3), &renamed); err == nil || !strings.Contains(err.Error(), "issued by") {
		t.Errorf("other issuer: %v", err)
	}
	// A key with the right name and hash but other bits fails the signature.
	forged := *k
	forged.Public = other.Public
	if _, err := r.Verify(tr.LeafHash(3), &forged); err == nil || !strings.Contains(err.Error(), "signature") {
		t.Errorf("forged key: %v", err)
	}
}

// TestEveryByteMatters flips each bit of a receipt: the result either
// does not parse or does not verify, or (RFC 9942 signs only the root) it
// is a changed tree size or index whose path still leads to the same
// signed root.
func TestEveryByteMatters(t *testing.T) {
	s, k, _ := testKeys(t)
	tr := tree(13)
	p, _ := tr.InclusionProof(6, 13)
	leaf := tr.LeafHash(6)
	b, err := Sign(s, 13, 6, leaf, p, tr.Hash())
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		for bit := range 8 {
			c := bytes.Clone(b)
			c[i] ^= 1 << bit
			r, err := Parse(c)
			if err != nil {
				continue
			}
			root, err := r.Verify(leaf, k)
			if err != nil {
				continue
			}
			if !bytes.Equal(root, tr.Hash()) || (r.Size == 13 && r.Index == 6) {
				t.Fatalf("byte %d bit %d flipped: still verifies (size %d, index %d)", i, bit, r.Size, r.Index)
			}
		}
	}
	for n := range b {
		if _, err := Parse(b[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: parses", n)
		}
	}
	if _, err := Parse(append(bytes.Clone(b), 0)); err == nil {
		t.Fatal("trailing byte: parses")
	}
}

func TestParseVerifierKey(t *testing.T) {
	_, k, _ := testKeys(t)
	if k.Name != testOrigin || len(k.Public) != ed25519.PublicKeySize {
		t.Fatalf("%+v", k)
	}
	for _, bad := range []string{"", "nope", testOrigin + "+00000000+AQ=="} {
		if _, err := ParseVerifierKey(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestRFC8949Vectors restates encodings from RFC 8949 Appendix A for the
// items receipts use, through the encoder and the decoder.
func TestRFC8949Vectors(t *testing.T) {
	ints := []struct {
		v   int64
		hex string
	}{
		{0, "00"}, {1, "01"}, {10, "0a"}, {23, "17"}, {24, "1818"}, {25, "1819"},
		{100, "1864"}, {1000, "1903e8"}, {1000000, "1a000f4240"},
		{1000000000000, "1b000000e8d4a51000"}, {-1, "20"}, {-10, "29"},
		{-100, "3863"}, {-1000, "3903e7"},
	}
	for _, c := range ints {
		if got := hex.EncodeToString(appendInt(nil, c.v)); got != c.hex {
			t.Errorf("encode %d: %s, want %s", c.v, got, c.hex)
		}
		b, _ := hex.DecodeString(c.hex)
		d := &decoder{b: b}
		if got, err := d.int(); err != nil || got != c.v || d.end() != nil {
			t.Errorf("decode %s: %d, %v", c.hex, got, err)
		}
	}
	if got := hex.EncodeToString(appendHead(nil, majorUint, 18446744073709551615)); got != "1bffffffffffffffff" {
		t.Errorf("max uint: %s", got)
	}
	strs := []struct {
		b   []byte
		s   string
		hex string
	}{
		{b: []byte{}, hex: "40"}, {b: []byte{1, 2, 3, 4}, hex: "4401020304"},
		{s: "", hex: "60"}, {s: "a", hex: "6161"}, {s: "IETF", hex: "6449455446"},
		{s: "\u00fc", hex: "62c3bc"}, {s: "\u6c34", hex: "63e6b0b4"},
	}
	for _, c := range strs {
		var got []byte
		if c.b != nil {
			got = appendBytes(nil, c.b)
		} else {
			got = appendText(nil, c.s)
		}
		if hex.EncodeToString(got) != c.hex {
			t.Errorf("encode %q%x: %x, want %s", c.s, c.b, got, c.hex)
		}
	}
	// [1, [2, 3], [4, 5]] and {1: 2, 3: 4}
	arr := appendHead(nil, majorArray, 3)
	arr = appendInt(arr, 1)
	arr = appendInt(appendHead(arr, majorArray, 2), 2)
	arr = appendInt(arr, 3)
	arr = appendInt(appendHead(arr, majorArray, 2), 4)
	arr = appendInt(arr, 5)
	if got := hex.EncodeToString(arr); got != "8301820203820405" {
		t.Errorf("nested array: %s", got)
	}
	m := appendHead(nil, majorMap, 2)
	for _, v := range []int64{1, 2, 3, 4} {
		m = appendInt(m, v)
	}
	if got := hex.EncodeToString(m); got != "a201020304" {
		t.Errorf("map: %s", got)
	}
	// The decoder refuses what deterministic encoding forbids.
	for _, bad := range []string{
		"1817",               // 23 in two bytes
		"190017",             // 23 in three bytes
		"1a0000ffff",         // 65535 in five bytes
		"5f42010243030405ff", // indefinite byte string
		"1c",                 // reserved
	} {
		b, _ := hex.DecodeString(bad)
		d := &decoder{b: b}
		if _, _, err := d.head(); err == nil && d.end() == nil {
			t.Errorf("%s decoded", bad)
		}
	}
	// Map keys out of order or repeated.
	for _, bad := range []string{"a203040102", "a201020102"} {
		b, _ := hex.DecodeString(bad)
		d := &decoder{b: b}
		d.mapLen()
		var prev []byte
		var err error
		for range 2 {
			if _, prev, err = d.intKey(prev); err != nil {
				break
			}
			d.int()
		}
		if err == nil {
			t.Errorf("map %s accepted", bad)
		}
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
