package witness

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
)

// sigPrefix starts every signature line of a c2sp.org/signed-note.
const sigPrefix = "— "

// AddCosignatures returns the signed note with the signature lines sigs
// (as a witness returns them: "— <name> <base64>\n" each) added after its
// own, leaving out a line by a key (name and key ID) the note already has
// a line by: a witness that cosigns the same checkpoint again (each time
// with a new timestamp, as after a sidecar's restart) keeps its first
// cosignature, and the note never carries two lines by one key, which
// log.OpenNote refuses. It checks only the lines' form; verify them first
// (client.Witness does).
func AddCosignatures(signed []byte, sigs ...[]byte) ([]byte, error) {
	i := bytes.LastIndex(signed, []byte("\n\n"))
	if i < 0 || len(signed) == i+2 || signed[len(signed)-1] != '\n' {
		return nil, errors.New("adding cosignatures: not a signed note")
	}
	have := map[string]bool{}
	for _, l := range strings.SplitAfter(string(signed[i+2:]), "\n") {
		have[signatureKey(l)] = true
	}
	out := bytes.Clone(signed)
	for _, s := range sigs {
		lines, err := SignatureLines(s)
		if err != nil {
			return nil, fmt.Errorf("adding cosignatures: %w", err)
		}
		for _, l := range lines {
			if k := signatureKey(l); !have[k] {
				have[k] = true
				out = append(out, l...)
			}
		}
	}
	return out, nil
}

// signatureKey returns the name and key ID of a signature line, or the
// line itself if it has no key ID to read.
func signatureKey(line string) string {
	name, sig, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(line, sigPrefix), "\n"), " ")
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || len(raw) < 4 {
		return line
	}
	return fmt.Sprintf("%s+%08x", name, binary.BigEndian.Uint32(raw))
}

// SignatureLines splits b into note signature lines, each "— <name>
// <base64>\n", and refuses anything else.
func SignatureLines(b []byte) ([]string, error) {
	if len(b) == 0 {
		return nil, errors.New("no signature lines")
	}
	if b[len(b)-1] != '\n' {
		return nil, errors.New("signature lines do not end in a newline")
	}
	lines := strings.SplitAfter(string(b[:len(b)-1]), "\n")
	lines[len(lines)-1] += "\n"
	for _, l := range lines {
		rest, ok := strings.CutPrefix(l, sigPrefix)
		name, sig, ok2 := strings.Cut(strings.TrimSuffix(rest, "\n"), " ")
		if !ok || !ok2 || name == "" || strings.ContainsAny(name, " +") {
			return nil, fmt.Errorf("%q is not a signature line", l)
		}
		if raw, err := base64.StdEncoding.DecodeString(sig); err != nil || len(raw) < 5 {
			return nil, fmt.Errorf("%q is not a signature line", l)
		}
	}
	return lines, nil
}

// CheckSignatureLines checks msg's signature lines as a strict
// c2sp.org/signed-note reader does (log.OpenNote), known being the keys
// trusted: no line written twice, and no two lines by one trusted key
// (note.Open verifies the first and passes over the rest unchecked).
// Only the base64 spelling of a line is let pass, since [Verified] keeps
// each signature spelled canonically: the lines are checked as written
// canonically. Call it on a note note.Open accepted.
func CheckSignatureLines(msg []byte, known note.Verifiers) error {
	i := bytes.LastIndex(msg, []byte("\n\n"))
	if i < 0 {
		return errors.New("not a signed note")
	}
	canon := bytes.Clone(msg[:i+2])
	for _, l := range strings.SplitAfter(string(msg[i+2:]), "\n") {
		name, sig, ok := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(l, sigPrefix), "\n"), " ")
		if raw, err := base64.StdEncoding.DecodeString(sig); ok && err == nil {
			l = sigPrefix + name + " " + base64.StdEncoding.EncodeToString(raw) + "\n"
		}
		canon = append(canon, l...)
	}
	_, err := log.OpenNote(canon, known)
	return err
}

// Verified returns n, as note.Open returned it, as a signed note with only
// the signatures Open verified, each written in canonical base64: what a
// witness keeps of a checkpoint, and what fork evidence holds. A
// checkpoint may carry up to [MaxRequestSize] of other signature lines,
// which a log holding a trusted key could send with every checkpoint to
// fill the witness's disk; they are not the witness's to keep. note.Open
// decodes base64 leniently, and a signature kept as the log spelled it
// (spare bits set) would make every piece of fork evidence built on it
// fail log.OpenCheckpoint: the log could poison the record in advance.
func Verified(n *note.Note) []byte {
	var b strings.Builder
	b.WriteString(n.Text)
	b.WriteString("\n")
	for _, s := range n.Sigs {
		sig := s.Base64
		if raw, err := base64.StdEncoding.DecodeString(sig); err == nil {
			sig = base64.StdEncoding.EncodeToString(raw)
		}
		b.WriteString(sigPrefix + s.Name + " " + sig + "\n")
	}
	return []byte(b.String())
}
