package log

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// A Checkpoint is the body of a signed tree head, according to
// c2sp.org/tlog-checkpoint@v1.0.0: the log's origin, the tree size and the
// RFC 6962 root hash at that size.
type Checkpoint struct {
	Origin string
	Size   uint64
	Hash   []byte
	// Extensions are the optional extra lines, kept verbatim.
	Extensions []string
}

// String returns the checkpoint's note text, ending in a newline.
func (c Checkpoint) String() string {
	var b strings.Builder
	b.WriteString(c.Origin)
	b.WriteByte('\n')
	b.WriteString(strconv.FormatUint(c.Size, 10))
	b.WriteByte('\n')
	b.WriteString(base64.StdEncoding.EncodeToString(c.Hash))
	b.WriteByte('\n')
	for _, e := range c.Extensions {
		b.WriteString(e)
		b.WriteByte('\n')
	}
	return b.String()
}

// ParseCheckpoint parses checkpoint note text (without signatures).
func ParseCheckpoint(text string) (Checkpoint, error) {
	if !strings.HasSuffix(text, "\n") {
		return Checkpoint{}, errors.New("checkpoint: text does not end in a newline")
	}
	lines := strings.Split(text[:len(text)-1], "\n")
	if len(lines) < 3 {
		return Checkpoint{}, errors.New("checkpoint: fewer than 3 lines")
	}
	var c Checkpoint
	c.Origin = lines[0]
	if c.Origin == "" {
		return Checkpoint{}, errors.New("checkpoint: empty origin")
	}
	sz := lines[1]
	if sz == "" || (len(sz) > 1 && sz[0] == '0') || strings.TrimLeft(sz, "0123456789") != "" {
		return Checkpoint{}, fmt.Errorf("checkpoint: size %q is not a decimal number without leading zeros", sz)
	}
	size, err := strconv.ParseUint(sz, 10, 64)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: size %q out of range", sz)
	}
	c.Size = size
	h, err := decodeBase64(lines[2])
	if err != nil || len(h) != HashSize {
		return Checkpoint{}, fmt.Errorf("checkpoint: root hash %q is not %d bytes of base64", lines[2], HashSize)
	}
	c.Hash = h
	for _, e := range lines[3:] {
		if e == "" {
			return Checkpoint{}, errors.New("checkpoint: empty extension line")
		}
		c.Extensions = append(c.Extensions, e)
	}
	return c, nil
}

// decodeBase64 decodes standard padded base64 and refuses every other
// spelling of the same bytes: encoding/base64 skips '\r' and '\n' even in
// strict mode, which would let two texts parse to one value.
func decodeBase64(s string) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, err
	}
	if base64.StdEncoding.EncodeToString(b) != s {
		return nil, errors.New("base64 is not in canonical form")
	}
	return b, nil
}

// SignCheckpoint signs c as a note with s, whose key name must be c's origin.
func SignCheckpoint(c Checkpoint, s note.Signer) ([]byte, error) {
	if s.Name() != c.Origin {
		return nil, fmt.Errorf("checkpoint: signer %q is not the origin %q", s.Name(), c.Origin)
	}
	msg, err := note.Sign(&note.Note{Text: c.String()}, s)
	if err != nil {
		return nil, fmt.Errorf("signing checkpoint: %w", err)
	}
	return msg, nil
}

// OpenCheckpoint verifies a signed checkpoint note with the log's verifier v
// and parses it. The checkpoint's origin must equal the verifier's key name.
// Signatures by keys other than v (witness cosignatures) are left in the
// returned note's UnverifiedSigs.
func OpenCheckpoint(msg []byte, v note.Verifier) (Checkpoint, *note.Note, error) {
	n, err := OpenNote(msg, note.VerifierList(v))
	if err != nil {
		return Checkpoint{}, nil, fmt.Errorf("checkpoint: %w", err)
	}
	c, err := ParseCheckpoint(n.Text)
	if err != nil {
		return Checkpoint{}, nil, err
	}
	if c.Origin != v.Name() {
		return Checkpoint{}, nil, fmt.Errorf("checkpoint: origin %q is not the verifier's name %q", c.Origin, v.Name())
	}
	return c, n, nil
}

// OpenNote is note.Open that also refuses a signature line written
// otherwise than its signature's one encoding, a line written twice, and
// two lines by one known key (name and key ID). note.Open decodes base64
// leniently (a last character's spare bits are not looked at), so a note
// with a changed byte would verify as the same note; and it verifies only
// the first line by a key, dropping later ones unchecked, so a forged
// line would ride along. Either way a receipt or a bundle's checkpoint
// could be altered unnoticed.
func OpenNote(msg []byte, known note.Verifiers) (*note.Note, error) {
	n, err := note.Open(msg, known)
	if err != nil {
		return nil, err
	}
	// note.Open passed over lines by a key it had seen; read the lines
	// as sent.
	block := msg[bytes.LastIndex(msg, []byte("\n\n"))+2:]
	seen := map[string]bool{}
	byKey := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(string(block), "\n"), "\n") {
		name, sig, _ := strings.Cut(strings.TrimPrefix(line, "— "), " ")
		b, err := base64.StdEncoding.Strict().DecodeString(sig)
		if err != nil || base64.StdEncoding.EncodeToString(b) != sig {
			return nil, fmt.Errorf("the signature by %s is not written in canonical base64", name)
		}
		if seen[line] {
			return nil, fmt.Errorf("the signature by %s is written twice", name)
		}
		seen[line] = true
		if len(b) < 4 {
			continue // note.Open refused it already
		}
		id := binary.BigEndian.Uint32(b)
		if _, err := known.Verifier(name, id); err != nil {
			continue // not a key the caller trusts: left unverified
		}
		key := fmt.Sprintf("%s+%08x", name, id)
		if byKey[key] {
			return nil, fmt.Errorf("the note carries two signatures by %s (key ID %08x)", name, id)
		}
		byKey[key] = true
	}
	return n, nil
}

// ParseCheckpointNote parses a signed checkpoint note without verifying any
// signature, for tools that only need to read it. Never trust its contents.
func ParseCheckpointNote(msg []byte) (Checkpoint, error) {
	i := bytes.LastIndex(msg, []byte("\n\n"))
	if i < 0 {
		return Checkpoint{}, errors.New("checkpoint: no signature block")
	}
	return ParseCheckpoint(string(msg[:i+1]))
}
