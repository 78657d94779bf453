package log

// Witness cosignatures according to c2sp.org/tlog-cosignature@v1.0.1
// (Ed25519 cosignature/v1, signature type 0x04), the k-of-n witness policy
// a verifier applies to them, and receipts checked under such a policy.

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
)

// Signature type bytes of c2sp.org/signed-note@v1.0.0.
const (
	algEd25519       = 0x01
	algCosignatureV1 = 0x04
)

// cosignatureSize is the size of a cosignature/v1 signature after the key
// ID: an 8-byte big-endian timestamp and a 64-byte Ed25519 signature.
const cosignatureSize = 8 + ed25519.SignatureSize

// A CosignatureSigner makes Ed25519 cosignatures on checkpoints according
// to c2sp.org/tlog-cosignature@v1.0.1: a [note.Signer] whose signatures are
// an 8-byte big-endian POSIX timestamp followed by an Ed25519 signature
// over
//
//	cosignature/v1
//	time <timestamp>
//	<checkpoint note text>
//
// Its key ID is SHA-256(name || "\n" || 0x04 || public key)[:4].
type CosignatureSigner struct {
	v   *CosignatureVerifier
	key ed25519.PrivateKey
}

var _ note.Signer = (*CosignatureSigner)(nil)

// NewCosignatureSigner returns a signer for the cosigner name with key.
func NewCosignatureSigner(name string, key ed25519.PrivateKey) (*CosignatureSigner, error) {
	if !isValidKeyName(name) {
		return nil, fmt.Errorf("cosigner: invalid key name %q (it must be non-empty, without spaces or '+')", name)
	}
	if len(key) != ed25519.PrivateKeySize {
		return nil, errors.New("cosigner: not an Ed25519 private key")
	}
	pub := key.Public().(ed25519.PublicKey)
	v := &CosignatureVerifier{name: name, hash: keyHash(name, algCosignatureV1, pub), key: pub}
	return &CosignatureSigner{v: v, key: key}, nil
}

// GenerateCosignerKey makes a new cosigner key for name and returns its
// private key, in the form [ParseCosignerKey] reads, and its verifier key.
func GenerateCosignerKey(rand io.Reader, name string) (skey, vkey string, err error) {
	_, priv, err := ed25519.GenerateKey(rand)
	if err != nil {
		return "", "", fmt.Errorf("cosigner: generating key: %w", err)
	}
	s, err := NewCosignatureSigner(name, priv)
	if err != nil {
		return "", "", err
	}
	return s.String(), s.v.String(), nil
}

// ParseCosignerKey parses a cosigner's private key,
//
//	PRIVATE+KEY+<name>+<hex key ID>+<base64(0x04 || 32-byte Ed25519 seed)>
//
// as [GenerateCosignerKey] writes it. It also takes an Ed25519 note signer
// key (type 0x01, as golang.org/x/mod/sumdb/note writes it), which some
// witnesses use for their cosignatures too; the cosignatures it makes still
// carry the cosignature/v1 key ID.
func ParseCosignerKey(skey string) (*CosignatureSigner, error) {
	bad := errors.New("cosigner: malformed private key (want PRIVATE+KEY+<name>+<hex id>+<base64 key>)")
	rest, ok := strings.CutPrefix(strings.TrimSpace(skey), "PRIVATE+KEY+")
	if !ok {
		return nil, bad
	}
	name, rest, ok1 := strings.Cut(rest, "+")
	id, k64, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 || len(id) != 8 {
		return nil, bad
	}
	wantHash, err := strconv.ParseUint(id, 16, 32)
	if err != nil {
		return nil, bad
	}
	k, err := base64.StdEncoding.DecodeString(k64)
	if err != nil || len(k) != 1+ed25519.SeedSize || (k[0] != algCosignatureV1 && k[0] != algEd25519) {
		return nil, errors.New("cosigner: private key is not an Ed25519 seed of type 0x04 or 0x01")
	}
	s, err := NewCosignatureSigner(name, ed25519.NewKeyFromSeed(k[1:]))
	if err != nil {
		return nil, err
	}
	if keyHash(name, k[0], s.v.key) != uint32(wantHash) {
		return nil, errors.New("cosigner: private key's ID does not match its name and key")
	}
	return s, nil
}

// String returns the private key in the form [ParseCosignerKey] reads.
// Keep it secret.
func (s *CosignatureSigner) String() string {
	return fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s", s.v.name, s.v.hash,
		base64.StdEncoding.EncodeToString(append([]byte{algCosignatureV1}, s.key.Seed()...)))
}

// Name returns the cosigner's key name.
func (s *CosignatureSigner) Name() string { return s.v.name }

// KeyHash returns the cosigner's key ID.
func (s *CosignatureSigner) KeyHash() uint32 { return s.v.hash }

// Verifier returns the verifier of s's cosignatures.
func (s *CosignatureSigner) Verifier() *CosignatureVerifier { return s.v }

// Sign cosigns msg, a checkpoint's note text, at the current time.
func (s *CosignatureSigner) Sign(msg []byte) ([]byte, error) {
	return s.SignAt(msg, time.Now())
}

// SignAt cosigns msg, a checkpoint's note text, with the timestamp t
// (whole seconds; the fraction is dropped). The timestamp must be after
// the epoch.
func (s *CosignatureSigner) SignAt(msg []byte, t time.Time) ([]byte, error) {
	ts := t.Unix()
	if ts <= 0 {
		return nil, fmt.Errorf("cosigner: timestamp %d is not after the epoch", ts)
	}
	m, err := cosignedMessage(uint64(ts), msg)
	if err != nil {
		return nil, err
	}
	sig := make([]byte, 0, cosignatureSize)
	sig = binary.BigEndian.AppendUint64(sig, uint64(ts))
	return append(sig, ed25519.Sign(s.key, m)...), nil
}

// A CosignatureVerifier checks Ed25519 cosignature/v1 signatures
// ([CosignatureSigner]); it is a [note.Verifier].
type CosignatureVerifier struct {
	name string
	hash uint32
	key  ed25519.PublicKey
}

var _ note.Verifier = (*CosignatureVerifier)(nil)

// NewCosignatureVerifier parses a cosigner's verifier key according to
// c2sp.org/signed-note@v1.0.0:
//
//	<name>+<8 hex digits key ID>+<base64(0x04 || 32-byte Ed25519 public key)>
func NewCosignatureVerifier(vkey string) (*CosignatureVerifier, error) {
	name, rest, ok1 := strings.Cut(vkey, "+")
	id, k64, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 || !isValidKeyName(name) || len(id) != 8 || strings.ToLower(id) != id {
		return nil, fmt.Errorf("cosigner: malformed verifier key %q (want <name>+<8 hex digits>+<base64 key>)", vkey)
	}
	idb, err := hex.DecodeString(id)
	if err != nil {
		return nil, fmt.Errorf("cosigner: malformed key ID in verifier key %q", vkey)
	}
	k, err := decodeBase64(k64)
	if err != nil || len(k) == 0 {
		return nil, fmt.Errorf("cosigner: malformed key in verifier key %q", vkey)
	}
	if k[0] != algCosignatureV1 {
		return nil, fmt.Errorf("cosigner: verifier key %q has signature type 0x%02x, not 0x04 (Ed25519 cosignature/v1)", vkey, k[0])
	}
	if len(k) != 1+ed25519.PublicKeySize {
		return nil, fmt.Errorf("cosigner: verifier key %q does not hold a 32-byte Ed25519 key", vkey)
	}
	pub := ed25519.PublicKey(k[1:])
	v := &CosignatureVerifier{name: name, hash: keyHash(name, algCosignatureV1, pub), key: pub}
	if v.hash != binary.BigEndian.Uint32(idb) {
		return nil, fmt.Errorf("cosigner: verifier key %q has key ID %s, but its name and key give %08x", vkey, id, v.hash)
	}
	return v, nil
}

// Name returns the cosigner's key name.
func (v *CosignatureVerifier) Name() string { return v.name }

// KeyHash returns the cosigner's key ID.
func (v *CosignatureVerifier) KeyHash() uint32 { return v.hash }

// PublicKey returns the cosigner's Ed25519 public key.
func (v *CosignatureVerifier) PublicKey() ed25519.PublicKey { return v.key }

// String returns the verifier key.
func (v *CosignatureVerifier) String() string {
	return fmt.Sprintf("%s+%08x+%s", v.name, v.hash,
		base64.StdEncoding.EncodeToString(append([]byte{algCosignatureV1}, v.key...)))
}

// Verify reports whether sig is a valid cosignature of msg, which must be
// a checkpoint's note text.
func (v *CosignatureVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != cosignatureSize {
		return false
	}
	ts := binary.BigEndian.Uint64(sig)
	if ts > math.MaxInt64 {
		return false
	}
	m, err := cosignedMessage(ts, msg)
	if err != nil {
		return false
	}
	return ed25519.Verify(v.key, m, sig[8:])
}

// cosignedMessage returns what a cosignature/v1 signature signs. msg must
// be a checkpoint's note text in its one canonical spelling, so that a
// witness key signs nothing but checkpoints.
func cosignedMessage(ts uint64, msg []byte) ([]byte, error) {
	c, err := ParseCheckpoint(string(msg))
	if err != nil {
		return nil, fmt.Errorf("cosigner: message is not a checkpoint: %w", err)
	}
	if c.String() != string(msg) {
		return nil, errors.New("cosigner: message is not a checkpoint in canonical form")
	}
	m := make([]byte, 0, 40+len(msg))
	m = append(m, "cosignature/v1\ntime "...)
	m = strconv.AppendUint(m, ts, 10)
	m = append(m, '\n')
	return append(m, msg...), nil
}

// CosignatureTime returns the time a cosignature/v1 signature was made,
// from its timestamp.
func CosignatureTime(sig note.Signature) (time.Time, error) {
	b, err := base64.StdEncoding.DecodeString(sig.Base64)
	if err != nil || len(b) != 4+cosignatureSize {
		return time.Time{}, errors.New("cosigner: malformed cosignature")
	}
	ts := binary.BigEndian.Uint64(b[4:])
	if ts > math.MaxInt64 {
		return time.Time{}, errors.New("cosigner: cosignature timestamp out of range")
	}
	return time.Unix(int64(ts), 0).UTC(), nil
}

// keyHash returns the key ID of a key according to c2sp.org/signed-note:
// SHA-256(name || "\n" || type || public key)[:4].
func keyHash(name string, alg byte, pub []byte) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n', alg})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// isValidKeyName reports whether name is a valid signed-note key name:
// non-empty UTF-8 without Unicode spaces or '+'.
func isValidKeyName(name string) bool {
	return name != "" && utf8.ValidString(name) && strings.IndexFunc(name, unicode.IsSpace) < 0 && !strings.Contains(name, "+")
}

// A WitnessPolicy says which witnesses a verifier trusts and how many of
// them must have cosigned a checkpoint: at least Threshold of Witnesses.
// Threshold 0 requires no cosignature, but any cosignature by a listed
// witness must still verify.
type WitnessPolicy struct {
	Witnesses []note.Verifier
	Threshold int
}

// Check reports whether the policy is usable: the threshold is between 0
// and the number of witnesses, and no two witnesses share a name and key
// ID or (for cosignature verifiers) a public key. A cosignature/v1 does not
// sign the cosigner's name, so one key listed under two names would count
// twice.
func (p WitnessPolicy) Check() error {
	if p.Threshold < 0 || p.Threshold > len(p.Witnesses) {
		return fmt.Errorf("witness policy: threshold %d is not between 0 and the %d witnesses", p.Threshold, len(p.Witnesses))
	}
	type id struct {
		name string
		hash uint32
	}
	ids := map[id]bool{}
	keys := map[string]string{}
	for _, w := range p.Witnesses {
		if w == nil {
			return errors.New("witness policy: nil witness")
		}
		k := id{w.Name(), w.KeyHash()}
		if ids[k] {
			return fmt.Errorf("witness policy: witness %s+%08x is listed twice", k.name, k.hash)
		}
		ids[k] = true
		if cv, ok := w.(*CosignatureVerifier); ok {
			if other, dup := keys[string(cv.key)]; dup {
				return fmt.Errorf("witness policy: witnesses %s and %s share one public key", other, cv.name)
			}
			keys[string(cv.key)] = cv.name
		}
	}
	return nil
}

// A WitnessPolicyError reports a checkpoint that too few of the trusted
// witnesses cosigned.
type WitnessPolicyError struct {
	Threshold int
	Witnesses int      // number of trusted witnesses
	Cosigned  []string // names of the trusted witnesses whose cosignatures verified
}

func (e *WitnessPolicyError) Error() string {
	who := "none of them"
	if len(e.Cosigned) > 0 {
		who = strings.Join(e.Cosigned, ", ")
	}
	return fmt.Sprintf("checkpoint is cosigned by %d of the %d trusted witnesses (%s), and %d are required",
		len(e.Cosigned), e.Witnesses, who, e.Threshold)
}

// OpenWitnessedCheckpoint verifies a signed checkpoint note under a witness
// policy and parses it: the log's verifier logV must have signed it, its
// origin must be logV's name, every signature by the log or a listed
// witness must verify (signatures by other keys are ignored and left in
// UnverifiedSigs), and at least p.Threshold listed witnesses must have
// cosigned it. Too few cosignatures give a [*WitnessPolicyError].
func OpenWitnessedCheckpoint(msg []byte, logV note.Verifier, p WitnessPolicy) (Checkpoint, *note.Note, error) {
	if err := p.Check(); err != nil {
		return Checkpoint{}, nil, err
	}
	for _, w := range p.Witnesses {
		if w.Name() == logV.Name() && w.KeyHash() == logV.KeyHash() {
			return Checkpoint{}, nil, fmt.Errorf("witness policy: witness %s is the log's own key", w.Name())
		}
	}
	n, err := OpenNote(msg, note.VerifierList(append([]note.Verifier{logV}, p.Witnesses...)...))
	if err != nil {
		var inv *note.InvalidSignatureError
		if errors.As(err, &inv) {
			return Checkpoint{}, nil, fmt.Errorf("checkpoint: the signature by %s (key ID %08x) does not verify", inv.Name, inv.Hash)
		}
		return Checkpoint{}, nil, fmt.Errorf("checkpoint: %w", err)
	}
	signedBy := func(v note.Verifier) bool {
		for _, s := range n.Sigs {
			if s.Name == v.Name() && s.Hash == v.KeyHash() {
				return true
			}
		}
		return false
	}
	if !signedBy(logV) {
		return Checkpoint{}, nil, fmt.Errorf("checkpoint: not signed by the log's key %s (key ID %08x)", logV.Name(), logV.KeyHash())
	}
	c, err := ParseCheckpoint(n.Text)
	if err != nil {
		return Checkpoint{}, nil, err
	}
	if c.Origin != logV.Name() {
		return Checkpoint{}, nil, fmt.Errorf("checkpoint: origin %q is not the verifier's name %q", c.Origin, logV.Name())
	}
	var cosigned []string
	for _, w := range p.Witnesses {
		if signedBy(w) {
			cosigned = append(cosigned, w.Name())
		}
	}
	if len(cosigned) < p.Threshold {
		return Checkpoint{}, nil, &WitnessPolicyError{Threshold: p.Threshold, Witnesses: len(p.Witnesses), Cosigned: cosigned}
	}
	return c, n, nil
}

// VerifyWitnessed checks the receipt like [Receipt.Verify] and, in
// addition, that at least threshold of the given witnesses cosigned its
// checkpoint (see [OpenWitnessedCheckpoint]). It returns the verified
// checkpoint.
func (r *Receipt) VerifyWitnessed(leafHash []byte, logV note.Verifier, witnesses []note.Verifier, threshold int) (Checkpoint, error) {
	return r.verify(leafHash, func() (Checkpoint, error) {
		c, _, err := OpenWitnessedCheckpoint(r.Checkpoint, logV, WitnessPolicy{Witnesses: witnesses, Threshold: threshold})
		return c, err
	})
}
