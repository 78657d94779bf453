// Package cose encodes and checks provlog's inclusion proofs as COSE
// receipts, according to RFC 9942 (COSE Receipts), for the verifiable
// data structure RFC9162_SHA256: the same RFC 6962 proof a
// c2sp.org/tlog-proof receipt carries, in the form SCITT verifiers read.
//
// # The receipt
//
// A receipt is a tagged COSE_Sign1 (RFC 9052):
//
//	18([
//	  protected:   << { 1: -8,                  / alg: EdDSA /
//	                    4: h'<key ID>',         / kid: the note key ID /
//	                    15: { 1: "<origin>" },  / CWT claims: iss /
//	                    395: 1 } >>,            / vds: RFC9162_SHA256 /
//	  unprotected: { 396: { -1: [ << [size, index, [path...]] >> ] } },
//	  payload:     null,                        / detached: the root /
//	  signature:   Ed25519 over Sig_structure
//	               ["Signature1", protected, h'', root]
//	])
//
// The signature is made with the log's own Ed25519 note key, so the log's
// verifier key is all a verifier needs ([ParseVerifierKey]). The payload is
// detached, as RFC 9942 advises: a verifier must recompute the root from
// the entry's leaf hash and the path before the signature can verify.
// RFC 9942 signs only the root: the tree size and index in the
// unprotected header are not authenticated beyond the path's shape (index
// 6 leads to the same root in trees of 12 and 13 leaves). provlog binds
// the size elsewhere: the tlog-proof receipt's signed checkpoint names it,
// and an evidence directory requires both receipts to agree.
//
// Signing a Sig_structure with the note key cannot be mistaken for a
// signed note: a note's text is UTF-8, and a Sig_structure starts with the
// byte 0x84, which no UTF-8 text does.
//
// # Encoding
//
// Receipts are written in CBOR core deterministic encoding (RFC 8949
// §4.2.1), and [Parse] accepts only that, only the header parameters
// above, and exactly one inclusion proof; so one receipt has one byte
// form. The small CBOR codec here covers exactly what receipts need, so
// that package log's users pull in no CBOR library.
package cose

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
)

// COSE and RFC 9942 labels and values used in receipts.
const (
	TagSign1 = 18 // COSE_Sign1

	HeaderAlg       = 1
	HeaderKID       = 4
	HeaderCWTClaims = 15  // RFC 9597
	HeaderVDS       = 395 // RFC 9942: verifiable data structure
	HeaderVDP       = 396 // RFC 9942: verifiable data structure proofs

	ClaimIssuer = 1 // CWT iss

	AlgEdDSA         = -8
	VDSRFC9162SHA256 = 1
	ProofInclusion   = -1
)

// maxPath bounds an inclusion path: a tree of up to 2^63 leaves needs at
// most 63 hashes.
const maxPath = 63

// A Receipt is a parsed RFC 9942 receipt of inclusion.
type Receipt struct {
	// Issuer is the CWT issuer: the log's origin.
	Issuer string
	// KeyID is the signing key's ID: the 4-byte big-endian key hash of
	// the log's note key.
	KeyID []byte
	// Size, Index and Path are the RFC 9162 inclusion proof.
	Size, Index uint64
	Path        [][]byte
	Signature   []byte

	protected []byte // the protected header as signed
}

// A VerifierKey is a log's Ed25519 note verifier key, as a receipt's
// signature is checked with it.
type VerifierKey struct {
	Name   string
	Hash   uint32
	Public ed25519.PublicKey
}

// ParseVerifierKey parses a signed-note verifier key
// (<name>+<hex key hash>+<base64(0x01 || Ed25519 key)>), as
// golang.org/x/mod/sumdb/note writes them.
func ParseVerifierKey(vkey string) (*VerifierKey, error) {
	if _, err := note.NewVerifier(vkey); err != nil {
		return nil, fmt.Errorf("cose: %w", err)
	}
	name, rest, _ := strings.Cut(vkey, "+")
	hash16, key64, _ := strings.Cut(rest, "+")
	key, err := base64.StdEncoding.DecodeString(key64)
	if err != nil || len(key) != 1+ed25519.PublicKeySize || key[0] != 0x01 {
		return nil, errors.New("cose: verifier key is not an Ed25519 note key")
	}
	h, err := strconv.ParseUint(hash16, 16, 32)
	if err != nil {
		return nil, errors.New("cose: verifier key hash is not hex")
	}
	return &VerifierKey{Name: name, Hash: uint32(h), Public: ed25519.PublicKey(key[1:])}, nil
}

// protectedHeader encodes the protected header for a log.
func protectedHeader(origin string, keyHash uint32) []byte {
	var kid [4]byte
	binary.BigEndian.PutUint32(kid[:], keyHash)
	b := appendHead(nil, majorMap, 4)
	b = appendInt(b, HeaderAlg)
	b = appendInt(b, AlgEdDSA)
	b = appendInt(b, HeaderKID)
	b = appendBytes(b, kid[:])
	b = appendInt(b, HeaderCWTClaims)
	b = appendHead(b, majorMap, 1)
	b = appendInt(b, ClaimIssuer)
	b = appendText(b, origin)
	b = appendInt(b, HeaderVDS)
	b = appendInt(b, VDSRFC9162SHA256)
	return b
}

// sigStructure is the COSE Sig_structure for a Sign1 with a detached
// payload and no external data (RFC 9052 §4.4).
func sigStructure(protected, payload []byte) []byte {
	b := appendHead(nil, majorArray, 4)
	b = appendText(b, "Signature1")
	b = appendBytes(b, protected)
	b = appendBytes(b, nil)
	return appendBytes(b, payload)
}

// Sign makes a receipt for the entry at index in the tree of size with
// root, whose inclusion proof is path, signed by the log's Ed25519 note
// signer s (whose name is the origin). It checks the proof against the
// root first, so it never signs a root the proof does not lead to.
func Sign(s note.Signer, size, index uint64, leafHash []byte, path [][]byte, root []byte) ([]byte, error) {
	if err := log.VerifyInclusion(index, size, leafHash, path, root); err != nil {
		return nil, fmt.Errorf("cose: inclusion proof does not lead to the root: %w", err)
	}
	prot := protectedHeader(s.Name(), s.KeyHash())
	sig, err := s.Sign(sigStructure(prot, root))
	if err != nil {
		return nil, fmt.Errorf("cose: signing: %w", err)
	}
	r := &Receipt{Size: size, Index: index, Path: path, Signature: sig, protected: prot}
	return r.Marshal(), nil
}

// SignReceipt signs the proof of a c2sp.org/tlog-proof receipt as an RFC
// 9942 receipt, over the root of the receipt's checkpoint, with the log's
// note key s. It is how provlog turns a receipt into its COSE form: the
// log API's format=cose and `provlog prove --format cose` both come here.
func SignReceipt(s note.Signer, r *log.Receipt) ([]byte, error) {
	c, err := log.ParseCheckpointNote(r.Checkpoint)
	if err != nil {
		return nil, fmt.Errorf("cose: the receipt's checkpoint: %w", err)
	}
	return Sign(s, c.Size, r.Index, r.Extra, r.Proof, c.Hash)
}

// Marshal returns the receipt's encoding; for a parsed receipt, the bytes
// it was parsed from.
func (r *Receipt) Marshal() []byte {
	proof := appendHead(nil, majorArray, 3)
	proof = appendHead(proof, majorUint, r.Size)
	proof = appendHead(proof, majorUint, r.Index)
	proof = appendHead(proof, majorArray, uint64(len(r.Path)))
	for _, h := range r.Path {
		proof = appendBytes(proof, h)
	}
	b := appendHead(nil, majorTag, TagSign1)
	b = appendHead(b, majorArray, 4)
	b = appendBytes(b, r.protected)
	b = appendHead(b, majorMap, 1)
	b = appendInt(b, HeaderVDP)
	b = appendHead(b, majorMap, 1)
	b = appendInt(b, ProofInclusion)
	b = appendHead(b, majorArray, 1)
	b = appendBytes(b, proof)
	b = append(b, simpleNull)
	return appendBytes(b, r.Signature)
}

// Parse parses a receipt. It checks only its form; use [Receipt.Verify]
// to check what it proves.
func Parse(b []byte) (*Receipt, error) {
	d := &decoder{b: b}
	tag, err := d.expect(majorTag, "COSE_Sign1 tag")
	if err != nil {
		return nil, err
	}
	if tag != TagSign1 {
		return nil, fmt.Errorf("cose: tag %d, want %d (COSE_Sign1)", tag, TagSign1)
	}
	if n, err := d.array(); err != nil || n != 4 {
		return nil, fmtErr(err, "COSE_Sign1 is not an array of 4")
	}
	r := &Receipt{}
	if r.protected, err = d.bytes(); err != nil {
		return nil, err
	}
	if err := r.parseProtected(); err != nil {
		return nil, err
	}
	if err := r.parseUnprotected(d); err != nil {
		return nil, err
	}
	if err := d.null(); err != nil {
		return nil, fmtErr(err, "payload must be detached (null)")
	}
	if r.Signature, err = d.bytes(); err != nil {
		return nil, err
	}
	if len(r.Signature) != ed25519.SignatureSize {
		return nil, fmt.Errorf("cose: signature is %d bytes, want %d", len(r.Signature), ed25519.SignatureSize)
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	return r, nil
}

func fmtErr(err error, msg string) error {
	if err != nil {
		return fmt.Errorf("cose: %s: %w", msg, err)
	}
	return errors.New("cose: " + msg)
}

// parseProtected reads the protected header: exactly alg EdDSA, kid,
// the CWT issuer and vds RFC9162_SHA256.
func (r *Receipt) parseProtected() error {
	d := &decoder{b: r.protected}
	n, err := d.mapLen()
	if err != nil || n != 4 {
		return fmtErr(err, "protected header is not a map of alg, kid, CWT claims and vds")
	}
	var prev []byte
	var alg, vds int64
	for _, want := range []int64{HeaderAlg, HeaderKID, HeaderCWTClaims, HeaderVDS} {
		var k int64
		if k, prev, err = d.intKey(prev); err != nil {
			return err
		}
		if k != want {
			return fmt.Errorf("cose: protected header has label %d, want %d", k, want)
		}
		switch k {
		case HeaderAlg:
			alg, err = d.int()
		case HeaderKID:
			r.KeyID, err = d.bytes()
		case HeaderCWTClaims:
			if m, merr := d.mapLen(); merr != nil || m != 1 {
				return fmtErr(merr, "CWT claims must hold only the issuer")
			}
			var c int64
			if c, _, err = d.intKey(nil); err == nil && c != ClaimIssuer {
				err = fmt.Errorf("cose: CWT claim %d, want only iss (1)", c)
			}
			if err == nil {
				r.Issuer, err = d.text()
			}
		case HeaderVDS:
			vds, err = d.int()
		}
		if err != nil {
			return err
		}
	}
	if err := d.end(); err != nil {
		return err
	}
	if alg != AlgEdDSA {
		return fmt.Errorf("cose: alg %d, want EdDSA (%d)", alg, AlgEdDSA)
	}
	if vds != VDSRFC9162SHA256 {
		return fmt.Errorf("cose: verifiable data structure %d, want RFC9162_SHA256 (%d)", vds, VDSRFC9162SHA256)
	}
	if len(r.KeyID) != 4 {
		return fmt.Errorf("cose: kid is %d bytes, want a 4-byte note key ID", len(r.KeyID))
	}
	return nil
}

// parseUnprotected reads {396: {-1: [bstr .cbor inclusion-proof]}}.
func (r *Receipt) parseUnprotected(d *decoder) error {
	bad := "unprotected header must be {396: {-1: [one inclusion proof]}}"
	if n, err := d.mapLen(); err != nil || n != 1 {
		return fmtErr(err, bad)
	}
	if k, _, err := d.intKey(nil); err != nil || k != HeaderVDP {
		return fmtErr(err, bad)
	}
	if n, err := d.mapLen(); err != nil || n != 1 {
		return fmtErr(err, bad)
	}
	if k, _, err := d.intKey(nil); err != nil || k != ProofInclusion {
		return fmtErr(err, bad)
	}
	if n, err := d.array(); err != nil || n != 1 {
		return fmtErr(err, bad)
	}
	pb, err := d.bytes()
	if err != nil {
		return err
	}
	p := &decoder{b: pb}
	if n, err := p.array(); err != nil || n != 3 {
		return fmtErr(err, "inclusion proof is not [tree-size, leaf-index, inclusion-path]")
	}
	if r.Size, err = p.uint(); err != nil {
		return err
	}
	if r.Index, err = p.uint(); err != nil {
		return err
	}
	n, err := p.array()
	if err != nil {
		return err
	}
	if n > maxPath {
		return fmt.Errorf("cose: inclusion path of %d hashes, more than %d", n, maxPath)
	}
	r.Path = make([][]byte, n)
	for i := range r.Path {
		if r.Path[i], err = p.bytes(); err != nil {
			return err
		}
		if len(r.Path[i]) != log.HashSize {
			return fmt.Errorf("cose: inclusion path hash %d is %d bytes, want %d", i, len(r.Path[i]), log.HashSize)
		}
	}
	return p.end()
}

// Verify checks the receipt for the entry with leaf hash leafHash against
// the log's key k: the issuer and key ID name k, the index lies in the
// tree, the path leads from the leaf to a root, and k's signature over
// that root verifies. It returns the root.
func (r *Receipt) Verify(leafHash []byte, k *VerifierKey) ([]byte, error) {
	if r.Issuer != k.Name {
		return nil, fmt.Errorf("cose: receipt issued by %q, not by the log %q", r.Issuer, k.Name)
	}
	if binary.BigEndian.Uint32(r.KeyID) != k.Hash {
		return nil, fmt.Errorf("cose: receipt's kid %x is not the log key's %08x", r.KeyID, k.Hash)
	}
	if r.Index >= r.Size {
		return nil, fmt.Errorf("cose: index %d is not in a tree of size %d", r.Index, r.Size)
	}
	root, err := log.RootFromInclusion(r.Index, r.Size, leafHash, r.Path)
	if err != nil {
		return nil, fmt.Errorf("cose: inclusion proof: %w", err)
	}
	if !ed25519.Verify(k.Public, sigStructure(r.protected, root), r.Signature) {
		return nil, errors.New("cose: signature does not verify over the root the proof leads to")
	}
	return root, nil
}
