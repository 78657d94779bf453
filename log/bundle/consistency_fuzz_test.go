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
		sps, err := parseConsistency(b)
		if err != nil {
			return
		}
		var in Consistency
		if err := json.Unmarshal(b, &in); err != nil {
			t.Fatalf("accepted %s, which encoding/json refuses: %v", b, err)
		}
		var cf Consistency
		for i, sp := range sps {
			if in.Proofs[i].Root != base64.StdEncoding.EncodeToString(sp.root) || !reflect.DeepEqual(in.Proofs[i].Proof, encodeHashes(sp.proof)) && len(sp.proof) > 0 {
				t.Fatalf("accepted proof %d spelled otherwise than base64 spells its hashes: %+v", i, in.Proofs[i])
			}
			if sp.size == 0 || i > 0 && sp.size <= sps[i-1].size || len(sp.root) != log.HashSize {
				t.Fatalf("accepted proof %d: size %d after %v, root of %d bytes", i, sp.size, sps[:i], len(sp.root))
			}
			for _, p := range sp.proof {
				if len(p) != log.HashSize {
					t.Fatalf("accepted a proof step of %d bytes", len(p))
				}
			}
			cf.Proofs = append(cf.Proofs, SizeProof{Size: sp.size, Root: base64.StdEncoding.EncodeToString(sp.root), Proof: encodeHashes(sp.proof)})
		}
		out, _ := json.Marshal(cf)
		again, err := parseConsistency(out)
		if err != nil || !reflect.DeepEqual(again, sps) {
			t.Fatalf("%s parsed to %v; written back as %s it parses to %v, %v", b, sps, out, again, err)
		}
	})
}
