package cose

// Receipts held against COSE and CBOR stacks we did not write:
// github.com/veraison/go-cose v1.3.0 and github.com/fxamacker/cbor/v2
// v2.10.0 (test code only; package cose itself imports neither).

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"testing"

	"github.com/fxamacker/cbor/v2"
	gocose "github.com/veraison/go-cose"
)

// TestGoCOSEVerifiesOurs: go-cose parses our receipt, finds the RFC 9942
// headers, and verifies its signature over the detached root.
func TestGoCOSEVerifiesOurs(t *testing.T) {
	s, k, _ := testKeys(t)
	tr := tree(21)
	p, _ := tr.InclusionProof(17, 21)
	b, err := Sign(s, 21, 17, tr.LeafHash(17), p, tr.Hash())
	if err != nil {
		t.Fatal(err)
	}
	var m gocose.Sign1Message
	if err := m.UnmarshalCBOR(b); err != nil {
		t.Fatalf("go-cose cannot parse our receipt: %v", err)
	}
	if alg, err := m.Headers.Protected.Algorithm(); err != nil || alg != gocose.AlgorithmEdDSA {
		t.Errorf("alg %v, %v", alg, err)
	}
	if v := m.Headers.Protected[int64(HeaderVDS)]; v != int64(VDSRFC9162SHA256) {
		t.Errorf("vds %v (%T)", v, v)
	}
	if m.Payload != nil {
		t.Errorf("payload is not detached")
	}
	vdp, ok := m.Headers.Unprotected[int64(HeaderVDP)].(map[any]any)
	if !ok {
		t.Fatalf("vdp: %#v", m.Headers.Unprotected)
	}
	proofs, ok := vdp[int64(ProofInclusion)].([]any)
	if !ok || len(proofs) != 1 {
		t.Fatalf("inclusion proofs: %#v", vdp)
	}
	var ip struct {
		_     struct{} `cbor:",toarray"`
		Size  uint64
		Index uint64
		Path  [][]byte
	}
	if err := cbor.Unmarshal(proofs[0].([]byte), &ip); err != nil {
		t.Fatal(err)
	}
	if ip.Size != 21 || ip.Index != 17 || len(ip.Path) != len(p) {
		t.Fatalf("proof %+v", ip)
	}
	v, err := gocose.NewVerifier(gocose.AlgorithmEdDSA, k.Public)
	if err != nil {
		t.Fatal(err)
	}
	m.Payload = tr.Hash()
	if err := m.Verify(nil, v); err != nil {
		t.Fatalf("go-cose does not verify our receipt: %v", err)
	}
	m.Payload = tr.HashAt(20)
	if err := m.Verify(nil, v); err == nil {
		t.Fatal("go-cose verifies our receipt over another root")
	}
}

// TestOursVerifiesGoCOSE: a receipt go-cose makes from the same headers
// and key parses and verifies here, and is byte for byte the one we make
// (Ed25519 signatures are deterministic).
func TestOursVerifiesGoCOSE(t *testing.T) {
	s, k, priv := testKeys(t)
	tr := tree(9)
	p, _ := tr.InclusionProof(8, 9)
	ours, err := Sign(s, 9, 8, tr.LeafHash(8), p, tr.Hash())
	if err != nil {
		t.Fatal(err)
	}
	proof, err := cbor.Marshal([]any{uint64(9), uint64(8), p})
	if err != nil {
		t.Fatal(err)
	}
	kid := binary.BigEndian.AppendUint32(nil, k.Hash)
	m := gocose.NewSign1Message()
	m.Headers.Protected.SetAlgorithm(gocose.AlgorithmEdDSA)
	m.Headers.Protected[gocose.HeaderLabelKeyID] = kid
	if _, err := m.Headers.Protected.SetCWTClaims(gocose.CWTClaims{gocose.CWTClaimIssuer: testOrigin}); err != nil {
		t.Fatal(err)
	}
	m.Headers.Protected[int64(HeaderVDS)] = int64(VDSRFC9162SHA256)
	m.Headers.Unprotected[int64(HeaderVDP)] = map[any]any{int64(ProofInclusion): []any{proof}}
	m.Payload = tr.Hash()
	signer, err := gocose.NewSigner(gocose.AlgorithmEdDSA, priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Sign(rand.Reader, nil, signer); err != nil {
		t.Fatal(err)
	}
	m.Payload = nil // detach
	theirs, err := m.MarshalCBOR()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Parse(theirs)
	if err != nil {
		t.Fatalf("go-cose's receipt does not parse: %v\n%x", err, theirs)
	}
	if _, err := r.Verify(tr.LeafHash(8), k); err != nil {
		t.Fatalf("go-cose's receipt does not verify: %v", err)
	}
	if !bytes.Equal(ours, theirs) {
		t.Errorf("encodings differ:\nours   %x\ntheirs %x", ours, theirs)
	}
}

// TestFxamackerDeterministic: fxamacker/cbor's core deterministic
// encoding of the value fxamacker decodes from our receipt is our
// receipt, and its diagnostic notation is the structure RFC 9942 gives.
func TestFxamackerDeterministic(t *testing.T) {
	s, _, _ := testKeys(t)
	tr := tree(6)
	p, _ := tr.InclusionProof(5, 6)
	b, err := Sign(s, 6, 5, tr.LeafHash(5), p, tr.Hash())
	if err != nil {
		t.Fatal(err)
	}
	dm, err := cbor.DecOptions{DupMapKey: cbor.DupMapKeyEnforcedAPF, IndefLength: cbor.IndefLengthForbidden}.DecMode()
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := dm.Unmarshal(b, &v); err != nil {
		t.Fatalf("fxamacker cannot decode: %v", err)
	}
	em, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		t.Fatal(err)
	}
	again, err := em.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, b) {
		t.Errorf("not core deterministic:\nours       %x\nfxamacker  %x", b, again)
	}
	diag, err := cbor.Diagnose(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix([]byte(diag), []byte("18([h'a4")) || !bytes.Contains([]byte(diag), []byte("{396: {-1: [h'")) || !bytes.Contains([]byte(diag), []byte("]}}, null, h'")) {
		t.Errorf("diagnostic: %s", diag)
	}
}
