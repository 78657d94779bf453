package log

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/mod/sumdb/note"
)

// ReceiptHeader is the first line of a receipt, according to
// c2sp.org/tlog-proof.
const ReceiptHeader = "c2sp.org/tlog-proof@v1"

// maxProofLen bounds the proof lines a receipt may carry: a tree of up to
// 2^63 leaves needs at most 63 hashes.
const maxProofLen = 63

// A Receipt proves that one entry is in the log, according to
// c2sp.org/tlog-proof@v1: the entry's index, its inclusion proof and the
// signed checkpoint (with any witness cosignatures) the proof leads to.
//
// provlog puts the entry's leaf hash in the optional "extra" line, so a
// receipt names what it proves; the extra line is not authenticated by
// itself, which is why [Receipt.Verify] checks the leaf hash the caller
// trusts (from the entry bytes) against it.
type Receipt struct {
	Extra      []byte
	Index      uint64
	Proof      [][]byte
	Checkpoint []byte // the signed note, verbatim
}

// String returns the receipt in its text form.
func (r *Receipt) String() string {
	// Sized up front: a receipt is made for every entry appended.
	n := len(ReceiptHeader) + len("\nextra \nindex 18446744073709551615\n\n") + base64.StdEncoding.EncodedLen(len(r.Extra)) + len(r.Checkpoint)
	for _, h := range r.Proof {
		n += base64.StdEncoding.EncodedLen(len(h)) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, ReceiptHeader+"\n"...)
	if r.Extra != nil {
		b = append(b, "extra "...)
		b = base64.StdEncoding.AppendEncode(b, r.Extra)
		b = append(b, '\n')
	}
	b = append(b, "index "...)
	b = strconv.AppendUint(b, r.Index, 10)
	b = append(b, '\n')
	b = AppendProofLines(b, r.Proof, r.Checkpoint)
	// Nothing writes to b after: the string is its bytes, not a copy of
	// them (as strings.Builder makes its string).
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// AppendProofLines appends to b what [ParseProofLines] reads, proof one
// base64 line a hash and an empty line, and then the checkpoint.
func AppendProofLines(b []byte, proof [][]byte, checkpoint []byte) []byte {
	for _, h := range proof {
		b = base64.StdEncoding.AppendEncode(b, h)
		b = append(b, '\n')
	}
	b = append(b, '\n')
	return append(b, checkpoint...)
}

// ParseReceipt parses a receipt's text form. It checks only syntax; use
// [Receipt.Verify] to check what it proves.
func ParseReceipt(data []byte) (*Receipt, error) {
	rest := data
	line := func() (string, bool) {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			return "", false
		}
		l := string(rest[:i])
		rest = rest[i+1:]
		return l, true
	}
	l, ok := line()
	if !ok || l != ReceiptHeader {
		return nil, fmt.Errorf("receipt: first line is not %q", ReceiptHeader)
	}
	r := &Receipt{}
	if l, ok = line(); !ok {
		return nil, errors.New("receipt: missing index line")
	}
	if e, found := strings.CutPrefix(l, "extra "); found {
		x, err := decodeBase64(e)
		if err != nil {
			return nil, errors.New("receipt: extra line is not base64")
		}
		r.Extra = x
		if l, ok = line(); !ok {
			return nil, errors.New("receipt: missing index line")
		}
	}
	idx, found := strings.CutPrefix(l, "index ")
	if !found || idx == "" || (len(idx) > 1 && idx[0] == '0') || strings.TrimLeft(idx, "0123456789") != "" {
		return nil, fmt.Errorf("receipt: %q is not an index line", l)
	}
	var err error
	if r.Index, err = strconv.ParseUint(idx, 10, 64); err != nil {
		return nil, fmt.Errorf("receipt: index %q out of range", idx)
	}
	if r.Proof, rest, err = ParseProofLines(rest, maxProofLen); err != nil {
		return nil, fmt.Errorf("receipt: %w", err)
	}
	if len(rest) == 0 {
		return nil, errors.New("receipt: no checkpoint")
	}
	r.Checkpoint = bytes.Clone(rest)
	return r, nil
}

// ParseProofLines reads the proof that c2sp.org/tlog-proof's receipt and
// c2sp.org/tlog-witness's add-checkpoint request both carry after their
// opening lines: at most max lines of base64 SHA-256 hashes, in canonical
// base64, and the empty line that ends them. It returns the hashes (empty,
// not nil, for none) and the bytes after the empty line, the checkpoint.
func ParseProofLines(data []byte, max int) (proof [][]byte, rest []byte, err error) {
	proof = [][]byte{}
	for {
		l, after, ok := bytes.Cut(data, []byte("\n"))
		if !ok {
			return nil, nil, errors.New("missing the empty line before the checkpoint")
		}
		data = after
		if len(l) == 0 {
			return proof, data, nil
		}
		if len(proof) == max {
			return nil, nil, fmt.Errorf("more than %d proof lines", max)
		}
		h, err := decodeBase64(string(l))
		if err != nil || len(h) != HashSize {
			return nil, nil, fmt.Errorf("proof line %d is not a base64 SHA-256 hash", len(proof)+1)
		}
		proof = append(proof, h)
	}
}

// Verify checks the receipt for the entry with leaf hash leafHash against
// the log's verifier v: the checkpoint is signed by v and names v's origin,
// the index is inside the tree, and the proof leads from leafHash to the
// checkpoint's root. If the receipt carries a leaf hash in its extra line,
// it must be leafHash. It returns the verified checkpoint.
func (r *Receipt) Verify(leafHash []byte, v note.Verifier) (Checkpoint, error) {
	return r.verify(leafHash, func() (Checkpoint, error) {
		c, _, err := OpenCheckpoint(r.Checkpoint, v)
		return c, err
	})
}

// verify checks the receipt for leafHash against the checkpoint open
// verifies.
func (r *Receipt) verify(leafHash []byte, open func() (Checkpoint, error)) (Checkpoint, error) {
	if len(leafHash) != HashSize {
		return Checkpoint{}, fmt.Errorf("receipt: leaf hash is %d bytes, want %d", len(leafHash), HashSize)
	}
	if r.Extra != nil && !bytes.Equal(r.Extra, leafHash) {
		return Checkpoint{}, errors.New("receipt: it is for a different entry (leaf hash in the extra line differs)")
	}
	c, err := open()
	if err != nil {
		return Checkpoint{}, fmt.Errorf("receipt: %w", err)
	}
	if r.Index >= c.Size {
		return Checkpoint{}, fmt.Errorf("receipt: index %d is not in a tree of size %d", r.Index, c.Size)
	}
	if err := VerifyInclusion(r.Index, c.Size, leafHash, r.Proof, c.Hash); err != nil {
		return Checkpoint{}, fmt.Errorf("receipt: inclusion proof does not verify: %w", err)
	}
	return c, nil
}
