package log

// The witness policy file an export bundle and an evidence directory
// carry (witnesses.txt), and the cosigners a checkpoint has under a
// policy.

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// NewWitnessPolicy returns the policy that threshold of the witnesses with
// the cosignature verifier keys vkeys must cosign; it is checked
// ([WitnessPolicy.Check]).
func NewWitnessPolicy(vkeys []string, threshold int) (WitnessPolicy, error) {
	p := WitnessPolicy{Threshold: threshold}
	for _, k := range vkeys {
		if err := p.add(k); err != nil {
			return p, err
		}
	}
	return p, p.Check()
}

// add adds the witness of cosignature verifier key k.
func (p *WitnessPolicy) add(k string) error {
	w, err := NewCosignatureVerifier(k)
	if err != nil {
		return fmt.Errorf("witness policy: witness key %q: %w", k, err)
	}
	p.Witnesses = append(p.Witnesses, w)
	return nil
}

// FormatWitnessPolicy returns a witness policy file: the line
// "threshold K", then one cosignature verifier key a line.
func FormatWitnessPolicy(vkeys []string, threshold int) []byte {
	return []byte("threshold " + strconv.Itoa(threshold) + "\n" + strings.Join(vkeys, "\n") + "\n")
}

// ParseWitnessPolicy parses a witness policy file exactly as
// [FormatWitnessPolicy] writes it, with at least one witness, and returns
// the policy, checked.
func ParseWitnessPolicy(text []byte) (WitnessPolicy, error) {
	// One pass over the lines, stopping at the first that is wrong: a
	// forged file of millions of lines is never split into as many
	// strings.
	first, keys, _ := bytes.Cut(text, []byte("\n"))
	th, ok := bytes.CutPrefix(first, []byte("threshold "))
	n, err := strconv.Atoi(string(th))
	if !ok || err != nil || strconv.Itoa(n) != string(th) || len(keys) == 0 {
		return WitnessPolicy{}, errors.New("witness policy: does not start with a \"threshold K\" line followed by witness keys")
	}
	// The one text form: every line, the last too, ends in a newline.
	if !bytes.HasSuffix(keys, []byte("\n")) {
		return WitnessPolicy{}, errors.New("witness policy: is not one witness key a line, each line ending in a newline")
	}
	p := WitnessPolicy{Threshold: n}
	for len(keys) > 0 {
		var k []byte
		k, keys, _ = bytes.Cut(keys, []byte("\n"))
		if err := p.add(string(k)); err != nil {
			return p, err
		}
	}
	return p, p.Check()
}

// Cosigners opens msg, a checkpoint signed by the log (logV), and returns
// it with the names of p's witnesses whose cosignatures on it verify, in
// p's order. As in [OpenWitnessedCheckpoint], a cosignature by one of
// them that does not verify is an error, as is a policy that cannot hold,
// and cosignatures by other keys are ignored; unlike it, fewer cosigners
// than p's threshold is not an error: the caller compares.
func (p WitnessPolicy) Cosigners(msg []byte, logV note.Verifier) (Checkpoint, []string, error) {
	cp, _, err := OpenCheckpoint(msg, logV)
	if err != nil || len(p.Witnesses) == 0 {
		return cp, nil, err
	}
	_, n, err := OpenWitnessedCheckpoint(msg, logV, p)
	var pe *WitnessPolicyError
	switch {
	case errors.As(err, &pe):
		return cp, pe.Cosigned, nil
	case err != nil:
		return cp, nil, err
	}
	var out []string
	for _, w := range p.Witnesses {
		for _, s := range n.Sigs {
			if s.Name == w.Name() && s.Hash == w.KeyHash() {
				out = append(out, w.Name())
			}
		}
	}
	return cp, out, nil
}
