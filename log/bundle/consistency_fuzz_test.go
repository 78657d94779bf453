package bundle

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/provlog/provlog/log"
)

// FuzzParseConsistency hands consistency.json's parser untrusted bytes.
// It must never panic, and what it accepts is what the file says: sizes
// increasing from 1, every root and proof step a hash spelled as base64
// spells it (no other spelling of the same bytes: a reader that decodes
// strictly would refuse it), and the proofs written back parse to the
// same ones.
func FuzzParseConsistency(f *testing.F) {
	h := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, log.HashSize))
	f.Add([]byte(`{"proofs":[{"size":3,"root":"` + h + `","proof":["` + h + `","` + h + `"]},{"size":9,"root":"` + h + `","proof":[]}]}`))
	f.Add([]byte(`{"proofs":[]}`))
	f.Add([]byte(`{"proofs":[{"size":3,"size":4,"root":"` + h + `","proof":[]}]}`))
	f.Add([]byte(`{"proofs":[{"size":5,"root":"` + h + `","proof":[]},{"size":5,"root":"` + h + `","proof":[]}]}`))
	f.Add([]byte(`{"proofs":[]} {}`))
	// The same hash, its last character's spare bits set.
	odd := h[:len(h)-2] + string(h[len(h)-2]+1) + "="
	f.Add([]byte(`{"proofs":[{"size":3,"root":"` + odd + `","proof":[]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var sps []SizeProof
		if err := parseConsistency(b, func(sp SizeProof) { sps = append(sps, sp) }); err != nil {
			return
		}
		// The file as encoding/json reads it, hashes as the strings written.
		var in struct {
			Proofs []struct {
				Size  uint64   `json:"size"`
				Root  string   `json:"root"`
				Proof []string `json:"proof"`
			} `json:"proofs"`
		}
		if err := json.Unmarshal(b, &in); err != nil {
			t.Fatalf("accepted %s, which encoding/json refuses: %v", b, err)
		}
		for i, sp := range sps {
			if in.Proofs[i].Root != base64.StdEncoding.EncodeToString(sp.Root[:]) || !reflect.DeepEqual(in.Proofs[i].Proof, encodeHashes(hashes(sp.Proof))) && len(sp.Proof) > 0 {
				t.Fatalf("accepted proof %d spelled otherwise than base64 spells its hashes: %+v", i, in.Proofs[i])
			}
			if sp.Size == 0 || i > 0 && sp.Size <= sps[i-1].Size {
				t.Fatalf("accepted proof %d: size %d after %v", i, sp.Size, sps[:i])
			}
		}
		out, _ := json.Marshal(Consistency{Proofs: sps})
		var again []SizeProof
		err := parseConsistency(out, func(sp SizeProof) { again = append(again, sp) })
		if err != nil || len(again) != len(sps) || len(sps) > 0 && !reflect.DeepEqual(again, sps) {
			t.Fatalf("%s parsed to %v; written back as %s it parses to %v, %v", b, sps, out, again, err)
		}
	})
}
