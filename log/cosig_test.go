package log_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
)

// atTime makes a CosignatureSigner sign at a fixed time, so that note.Sign
// produces a reproducible cosignature.
type atTime struct {
	*log.CosignatureSigner
	t time.Time
}

func (s atTime) Sign(msg []byte) ([]byte, error) { return s.SignAt(msg, s.t) }

// seq32 is the 32-byte seed 00 01 02 ... 1f.
func seq32() []byte {
	b := make([]byte, 32)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// TestCosignatureVectors signs the c2sp.org/tlog-checkpoint example with a
// fixed key at the timestamp of the c2sp.org/tlog-cosignature example and
// compares with a fixed result. The vkey and the signature line were
// checked independently: filippo.io/torchwood v0.6.1's CosignatureSigner
// with the same seed has this vkey and its verifier accepts the line, and
// so does transparency-dev/formats' NewVerifierForCosignatureV1.
func TestCosignatureVectors(t *testing.T) {
	const (
		name  = "witness.example/w1"
		skey  = "PRIVATE+KEY+witness.example/w1+e75f6532+BAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f"
		vkey  = "witness.example/w1+e75f6532+BAOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4"
		text  = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
		line  = "— witness.example/w1 519lMgAAAABkGFDLBuRDazBLVac2NE+Y+IjbjQOcXLfF9CSDZVUIoS83rE1nFZsVE8YiWV6Ngr7lV8H6bdoBQGP/l73euDMQ9k+bBQ==\n"
		stamp = 1679315147
	)
	s, err := log.NewCosignatureSigner(name, ed25519.NewKeyFromSeed(seq32()))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.String(); got != skey {
		t.Errorf("private key\ngot  %s\nwant %s", got, skey)
	}
	if got := s.Verifier().String(); got != vkey {
		t.Errorf("vkey\ngot  %s\nwant %s", got, vkey)
	}
	if got, want := s.KeyHash(), uint32(0xe75f6532); got != want {
		t.Errorf("key ID %08x, want %08x", got, want)
	}
	msg, err := note.Sign(&note.Note{Text: text}, atTime{s, time.Unix(stamp, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if want := text + "\n" + line; string(msg) != want {
		t.Errorf("signed note\ngot  %q\nwant %q", msg, want)
	}

	// The parsed keys give the same signer and verifier.
	ps, err := log.ParseCosignerKey(skey)
	if err != nil {
		t.Fatal(err)
	}
	if ps.String() != skey || ps.KeyHash() != s.KeyHash() {
		t.Errorf("ParseCosignerKey(%q) = %s", skey, ps)
	}
	v, err := log.NewCosignatureVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open([]byte(text+"\n"+line), note.VerifierList(v))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if len(n.Sigs) != 1 || n.Sigs[0].Name != name {
		t.Fatalf("Open verified %v", n.Sigs)
	}
	ts, err := log.CosignatureTime(n.Sigs[0])
	if err != nil || !ts.Equal(time.Unix(stamp, 0)) {
		t.Errorf("CosignatureTime = %v, %v; want %v", ts, err, time.Unix(stamp, 0).UTC())
	}

	// The signed message is exactly the one the spec shows; check it with
	// crypto/ed25519 directly.
	raw, _ := base64.StdEncoding.DecodeString(strings.Fields(line)[2])
	if got := binary.BigEndian.Uint64(raw[4:12]); got != stamp {
		t.Errorf("timestamp %d, want %d", got, stamp)
	}
	signed := fmt.Sprintf("cosignature/v1\ntime %d\n%s", stamp, text)
	if !ed25519.Verify(v.PublicKey(), []byte(signed), raw[12:]) {
		t.Error("the signature is not Ed25519 over the cosignature/v1 message")
	}
}

func TestCosignerKeys(t *testing.T) {
	skey, vkey, err := log.GenerateCosignerKey(rand.Reader, "w.example/x")
	if err != nil {
		t.Fatal(err)
	}
	s, err := log.ParseCosignerKey(skey)
	if err != nil {
		t.Fatal(err)
	}
	if s.String() != skey || s.Verifier().String() != vkey {
		t.Fatalf("keys do not round-trip: %s %s", s, s.Verifier())
	}
	v, err := log.NewCosignatureVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	cp := "log.example/a\n5\n" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n"
	msg, err := note.Sign(&note.Note{Text: cp}, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open(msg, note.VerifierList(v)); err != nil {
		t.Fatalf("Open: %v", err)
	}
	ts, err := log.CosignatureTime(mustOpen(t, msg, v).Sigs[0])
	if err != nil || time.Since(ts) > time.Minute || time.Until(ts) > time.Second {
		t.Errorf("CosignatureTime = %v, %v; want about now", ts, err)
	}

	// An Ed25519 note signer key (type 0x01) is accepted, and cosigns with
	// the cosignature/v1 key ID of the same key.
	nskey, nvkey, err := note.GenerateKey(rand.Reader, "w.example/y")
	if err != nil {
		t.Fatal(err)
	}
	ns, err := log.ParseCosignerKey(nskey)
	if err != nil {
		t.Fatalf("ParseCosignerKey(type 0x01): %v", err)
	}
	nv, _ := note.NewVerifier(nvkey)
	if ns.KeyHash() == nv.KeyHash() {
		t.Error("cosigner made from a type 0x01 key kept the type 0x01 key ID")
	}
	_, _, nk := splitVKey(nvkey)
	pub, _ := base64.StdEncoding.DecodeString(nk)
	if !bytes.Equal(ns.Verifier().PublicKey(), pub[1:]) {
		t.Error("cosigner from a type 0x01 key has another public key")
	}

	for _, bad := range []string{
		"",
		"PRIVATE+KEY+w.example/x",
		strings.Replace(skey, "PRIVATE+KEY", "PUBLIC+KEY", 1),
		strings.Replace(skey, "+w.example/x+", "+w.example/z+", 1), // ID no longer matches
		skey[:len(skey)-4] + "AAA=",                                // key no longer matches the ID
		strings.Replace(nskey, "w.example/y", "w example/y", 1),
	} {
		if _, err := log.ParseCosignerKey(bad); err == nil {
			t.Errorf("ParseCosignerKey(%q) succeeded", bad)
		}
	}
	if _, err := log.NewCosignatureSigner("bad+name", ed25519.NewKeyFromSeed(seq32())); err == nil {
		t.Error("NewCosignatureSigner accepted a name with '+'")
	}
}

func mustOpen(t *testing.T, msg []byte, vs ...note.Verifier) *note.Note {
	t.Helper()
	n, err := note.Open(msg, note.VerifierList(vs...))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return n
}

func TestNewCosignatureVerifierRefuses(t *testing.T) {
	s, _ := log.NewCosignatureSigner("w.example/x", ed25519.NewKeyFromSeed(seq32()))
	good := s.Verifier().String()
	name, id, k := splitVKey(good)
	key, _ := base64.StdEncoding.DecodeString(k)
	ed := append([]byte{0x01}, key[1:]...)
	for _, tc := range []struct{ why, vkey string }{
		{"empty", ""},
		{"no key", name + "+" + id},
		{"name with space", "w example/x+" + id + "+" + k},
		{"empty name", "+" + id + "+" + k},
		{"upper-case ID", name + "+" + strings.ToUpper(id) + "+" + k},
		{"short ID", name + "+" + id[:7] + "+" + k},
		{"wrong ID", name + "+00000000+" + k},
		{"other name", "w.example/y+" + id + "+" + k},
		{"type 0x01", name + "+" + id + "+" + base64.StdEncoding.EncodeToString(ed)},
		{"short key", name + "+" + id + "+" + base64.StdEncoding.EncodeToString(key[:32])},
		{"base64 with a line break", name + "+" + id + "+" + k[:10] + "\n" + k[10:]},
		{"URL base64", name + "+" + id + "+" + strings.NewReplacer("+", "-", "/", "_").Replace(k)},
	} {
		if _, err := log.NewCosignatureVerifier(tc.vkey); err == nil {
			t.Errorf("%s: NewCosignatureVerifier(%q) succeeded", tc.why, tc.vkey)
		}
	}
	if _, err := log.NewCosignatureVerifier(good); err != nil {
		t.Errorf("NewCosignatureVerifier(%q): %v", good, err)
	}
}

func splitVKey(vkey string) (name, id, key string) {
	parts := strings.SplitN(vkey, "+", 3)
	return parts[0], parts[1], parts[2]
}

func TestCosignatureVerifyRefuses(t *testing.T) {
	s, _ := log.NewCosignatureSigner("w.example/x", ed25519.NewKeyFromSeed(seq32()))
	v := s.Verifier()
	cp := []byte("log.example/a\n5\n" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n")
	sig, err := s.SignAt(cp, time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !v.Verify(cp, sig) {
		t.Fatal("Verify refused a good cosignature")
	}
	big := slices.Clone(sig)
	binary.BigEndian.PutUint64(big, math.MaxInt64+1)
	later := slices.Clone(sig)
	binary.BigEndian.PutUint64(later, 1700000001)
	for _, tc := range []struct {
		why      string
		msg, sig []byte
	}{
		{"short signature", cp, sig[:len(sig)-1]},
		{"long signature", cp, append(slices.Clone(sig), 0)},
		{"timestamp above 2^63-1", cp, big},
		{"other timestamp", cp, later},
		{"other checkpoint", bytes.Replace(cp, []byte("\n5\n"), []byte("\n6\n"), 1), sig},
		{"not a checkpoint", []byte("hello\n"), sig},
	} {
		if v.Verify(tc.msg, tc.sig) {
			t.Errorf("%s: Verify succeeded", tc.why)
		}
	}
	if _, err := s.SignAt([]byte("not a checkpoint\n"), time.Now()); err == nil {
		t.Error("SignAt signed something that is not a checkpoint")
	}
	if _, err := s.SignAt(cp, time.Unix(0, 0)); err == nil {
		t.Error("SignAt signed with timestamp 0")
	}
}

// cosigners returns n witness signers and their verifiers.
func cosigners(t testing.TB, n int) ([]*log.CosignatureSigner, []note.Verifier) {
	var ss []*log.CosignatureSigner
	var vs []note.Verifier
	for i := range n {
		skey, _, err := log.GenerateCosignerKey(rand.Reader, fmt.Sprintf("witness.example/w%d", i))
		if err != nil {
			t.Fatal(err)
		}
		s, err := log.ParseCosignerKey(skey)
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
		vs = append(vs, s.Verifier())
	}
	return ss, vs
}

// cosignTree builds a tree of n leaves, signs its checkpoint with the log
// key and has the given witnesses cosign it; it returns the stored nodes,
// the leaves and the signed note.
func cosignTree(t testing.TB, n int, logS note.Signer, ws ...note.Signer) (map[compact.NodeID][]byte, [][]byte, []byte) {
	t.Helper()
	nodes := map[compact.NodeID][]byte{}
	rf := &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	rng := rf.NewEmptyRange(0)
	var leaves [][]byte
	for i := range n {
		l := fmt.Appendf(nil, "entry %d", i)
		leaves = append(leaves, l)
		if err := rng.Append(log.LeafHash(l), func(id compact.NodeID, h []byte) { nodes[id] = h }); err != nil {
			t.Fatal(err)
		}
	}
	root, err := rng.GetRootHash(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := log.Checkpoint{Origin: logS.Name(), Size: uint64(n), Hash: root}
	msg, err := note.Sign(&note.Note{Text: c.String()}, append([]note.Signer{logS}, ws...)...)
	if err != nil {
		t.Fatal(err)
	}
	return nodes, leaves, msg
}

type nodes map[compact.NodeID][]byte

func (m nodes) ReadNodes(_ context.Context, ids []compact.NodeID) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		h, ok := m[id]
		if !ok {
			return nil, log.ErrNotFound
		}
		out[i] = h
	}
	return out, nil
}

func TestVerifyWitnessed(t *testing.T) {
	ctx := context.Background()
	logS, logV := logtest.NewKey(t, "log.example/witnessed")
	ws, wvs := cosigners(t, 3)
	const size = 21
	const index = 13
	receipt := func(signers ...note.Signer) *log.Receipt {
		nm, leaves, msg := cosignTree(t, size, logS, signers...)
		p, err := log.ProveInclusion(ctx, nodes(nm), index, size)
		if err != nil {
			t.Fatal(err)
		}
		return &log.Receipt{Extra: log.LeafHash(leaves[index]), Index: index, Proof: p, Checkpoint: msg}
	}
	leaf := log.LeafHash(fmt.Appendf(nil, "entry %d", index))
	_, other := cosigners(t, 1)
	otherS, _ := log.NewCosignatureSigner("witness.example/other", ed25519.NewKeyFromSeed(seq32()))

	for _, tc := range []struct {
		name      string
		signers   []note.Signer
		witnesses []note.Verifier
		threshold int
		wantErr   string // "" for success
	}{
		{"no witnesses needed", nil, nil, 0, ""},
		{"threshold 0, cosigned", []note.Signer{ws[0]}, wvs, 0, ""},
		{"2 of 3", []note.Signer{ws[0], ws[2]}, wvs, 2, ""},
		{"3 of 3", []note.Signer{ws[0], ws[1], ws[2]}, wvs, 3, ""},
		{"1 of 3, need 2", []note.Signer{ws[1]}, wvs, 2, "cosigned by 1 of the 3 trusted witnesses (witness.example/w1), and 2 are required"},
		{"none, need 1", nil, wvs, 1, "cosigned by 0 of the 3 trusted witnesses (none of them), and 1 are required"},
		{"untrusted cosigner does not count", []note.Signer{ws[0], otherS}, wvs, 2, "cosigned by 1 of the 3"},
		{"untrusted cosigner, trusted policy", []note.Signer{otherS, ws[0], ws[1]}, wvs[:2], 2, ""},
		{"threshold above n", []note.Signer{ws[0]}, wvs[:1], 2, "threshold 2 is not between 0 and the 1 witnesses"},
		{"negative threshold", nil, nil, -1, "threshold -1"},
		{"same witness twice", []note.Signer{ws[0]}, []note.Verifier{wvs[0], wvs[0]}, 2, "listed twice"},
		{"log key as witness", nil, []note.Verifier{logV}, 1, "the log's own key"},
		{"other witness list", []note.Signer{ws[0], ws[1]}, other, 1, "cosigned by 0 of the 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := receipt(tc.signers...)
			c, err := r.VerifyWitnessed(leaf, logV, tc.witnesses, tc.threshold)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("VerifyWitnessed: %v", err)
				}
				if c.Size != size || c.Origin != logV.Name() {
					t.Errorf("checkpoint %+v", c)
				}
				// And the same receipt passes Verify, which ignores cosignatures.
				if _, err := r.Verify(leaf, logV); err != nil {
					t.Errorf("Verify: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("VerifyWitnessed error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}

	// A policy shortfall is a *WitnessPolicyError naming who cosigned.
	_, err := receipt(ws[2]).VerifyWitnessed(leaf, logV, wvs, 3)
	var pe *log.WitnessPolicyError
	if !errors.As(err, &pe) || pe.Threshold != 3 || pe.Witnesses != 3 || !slices.Equal(pe.Cosigned, []string{"witness.example/w2"}) {
		t.Errorf("error %v (%#v), want a WitnessPolicyError naming w2", err, pe)
	}

	// A bad cosignature by a trusted witness fails the whole receipt, even
	// when enough others verify.
	r := receipt(ws[0], ws[1], ws[2])
	r.Checkpoint = logtest.CorruptSignature(t, r.Checkpoint, "witness.example/w1")
	if _, err := r.VerifyWitnessed(leaf, logV, wvs, 2); err == nil || !strings.Contains(err.Error(), "witness.example/w1") {
		t.Errorf("tampered cosignature: error %v", err)
	}
	// A checkpoint the log did not sign is refused, however many witnesses
	// cosigned it.
	r = receipt(ws[0], ws[1], ws[2])
	r.Checkpoint = dropSig(t, r.Checkpoint, logV.Name())
	if _, err := r.VerifyWitnessed(leaf, logV, wvs, 2); err == nil || !strings.Contains(err.Error(), "not signed by the log's key") {
		t.Errorf("checkpoint without the log's signature: error %v", err)
	}
	// Wrong leaf, wrong index: as Verify.
	r = receipt(ws[0])
	if _, err := r.VerifyWitnessed(log.LeafHash([]byte("other")), logV, wvs, 1); err == nil {
		t.Error("VerifyWitnessed accepted another entry")
	}
	r.Extra = nil
	r.Index++
	if _, err := r.VerifyWitnessed(leaf, logV, wvs, 1); err == nil {
		t.Error("VerifyWitnessed accepted a proof for another index")
	}
}

// TestRelabeledCosignature: a cosignature/v1 does not sign the cosigner's
// name, so a cosignature by one key can be relabeled for another name with
// the same key. A policy listing one key under two names is refused.
func TestRelabeledCosignature(t *testing.T) {
	key := ed25519.NewKeyFromSeed(seq32())
	a, _ := log.NewCosignatureSigner("witness.example/a", key)
	b, _ := log.NewCosignatureSigner("witness.example/b", key)
	p := log.WitnessPolicy{Witnesses: []note.Verifier{a.Verifier(), b.Verifier()}, Threshold: 2}
	if err := p.Check(); err == nil || !strings.Contains(err.Error(), "share one public key") {
		t.Fatalf("Check = %v, want a shared-key error", err)
	}
	logS, logV := logtest.NewKey(t, "log.example/relabel")
	_, _, msg := cosignTree(t, 3, logS, a)
	// Relabel a's cosignature as b's: same signature bytes, b's name and ID.
	n := mustOpen(t, msg, logV, a.Verifier())
	sig, _ := base64.StdEncoding.DecodeString(n.Sigs[1].Base64)
	binary.BigEndian.PutUint32(sig, b.KeyHash())
	forged := append(slices.Clone(msg), []byte("— witness.example/b "+base64.StdEncoding.EncodeToString(sig)+"\n")...)
	if _, err := note.Open(forged, note.VerifierList(b.Verifier())); err != nil {
		t.Fatalf("the relabeled cosignature does not verify for b (%v); the test is wrong", err)
	}
	if _, _, err := log.OpenWitnessedCheckpoint(forged, logV, p); err == nil {
		t.Error("OpenWitnessedCheckpoint counted one key twice")
	}
}

// dropSig removes the signature by name.
func dropSig(t *testing.T, msg []byte, name string) []byte {
	t.Helper()
	var out []string
	for _, l := range strings.SplitAfter(string(msg), "\n") {
		if !strings.HasPrefix(l, "— "+name+" ") {
			out = append(out, l)
		}
	}
	if len(out) == len(strings.SplitAfter(string(msg), "\n")) {
		t.Fatalf("no signature by %s", name)
	}
	return []byte(strings.Join(out, ""))
}

func FuzzNewCosignatureVerifier(f *testing.F) {
	f.Add("witness.example/w1+e75f6532+BAOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4")
	f.Add("example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k")
	f.Add("a+00000000+BA==")
	f.Fuzz(func(t *testing.T, vkey string) {
		v, err := log.NewCosignatureVerifier(vkey)
		if err != nil {
			return
		}
		// Whatever parses is the one spelling String writes.
		if v.String() != vkey {
			t.Errorf("NewCosignatureVerifier(%q).String() = %q", vkey, v.String())
		}
	})
}

// BenchmarkVerifyWitnessedReceipt measures offline receipt checking: parse
// a receipt for an entry of a 1,000,000-entry log (a 20-hash inclusion
// proof) whose checkpoint carries the log's signature and three witness
// cosignatures, and verify it: the log's signature only (Verify), and
// under a 2-of-3 witness policy (VerifyWitnessed, which checks every
// trusted signature present: four Ed25519 verifications).
func BenchmarkVerifyWitnessedReceipt(b *testing.B) {
	const size, index = 1_000_000, 765_432
	logS, logV := logtest.NewKey(b, "log.example/bench")
	ws, wvs := cosigners(b, 3)
	leaf := log.LeafHash([]byte("the entry"))
	// A valid proof needs no tree: any sibling hashes lead to some root,
	// and the checkpoint signs that root.
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		b.Fatal(err)
	}
	var p [][]byte
	for i := range nodes.IDs {
		h := sha256.Sum256(fmt.Appendf(nil, "node %d", i))
		p = append(p, h[:])
	}
	p, err = nodes.Rehash(p, rfc6962.DefaultHasher.HashChildren)
	if err != nil {
		b.Fatal(err)
	}
	root, err := proof.RootFromInclusionProof(rfc6962.DefaultHasher, index, size, leaf, p)
	if err != nil {
		b.Fatal(err)
	}
	c := log.Checkpoint{Origin: logS.Name(), Size: size, Hash: root}
	msg, err := note.Sign(&note.Note{Text: c.String()}, logS, ws[0], ws[1], ws[2])
	if err != nil {
		b.Fatal(err)
	}
	text := []byte((&log.Receipt{Extra: leaf, Index: index, Proof: p, Checkpoint: msg}).String())
	for _, bc := range []struct {
		name   string
		verify func(r *log.Receipt) error
	}{
		{"log-only", func(r *log.Receipt) error { _, err := r.Verify(leaf, logV); return err }},
		{"2-of-3-witnesses", func(r *log.Receipt) error { _, err := r.VerifyWitnessed(leaf, logV, wvs, 2); return err }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r, err := log.ParseReceipt(text)
				if err != nil {
					b.Fatal(err)
				}
				if err := bc.verify(r); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "receipts/s")
		})
	}
}
