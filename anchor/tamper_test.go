package anchor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/log"
)

// TestTampering changes one byte of a stored token, Rekor entry,
// checkpoint, consistency proof or record, and expects the audit to fail
// naming what broke; where the change matters cryptographically, the
// offline Verify of the record alone names it too.
func TestTampering(t *testing.T) {
	e := newEnv(t, 2, true)
	r := e.runner(nil)
	ctx := context.Background()
	// Several rekor entries first, so its inclusion proof is not empty.
	for range 3 {
		if _, err := r.AnchorNow(ctx); err != nil {
			t.Fatal(err)
		}
		e.appendN(2)
	}
	last, err := r.AnchorNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.audit(); err != nil {
		t.Fatalf("untampered: %v", err)
	}
	orig := last.Bytes
	path := filepath.Join(e.records.Dir(), last.Name)

	flip := func(b []byte, i int) []byte {
		c := append([]byte{}, b...)
		c[i] ^= 0x01
		return c
	}
	// flipB64 changes one character of a base64 string in JSON text.
	flipB64 := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	for _, tc := range []struct {
		name string
		// mutate edits the record; raw, if set, edits the file's bytes.
		mutate func(*anchor.Record)
		raw    func([]byte) []byte
		part   string
		// offline is true when Verify alone must catch it (the change is
		// in signed or proved data).
		offline bool
	}{
		{name: "token signature byte", mutate: func(r *anchor.Record) {
			tok := r.Timestamps[0]
			tok.Token = flip(tok.Token, len(tok.Token)-3)
		}, part: "timestamp 0", offline: true},
		{name: "token TSTInfo byte", mutate: func(r *anchor.Record) {
			tok := r.Timestamps[1]
			i := bytes.Index(tok.Token, []byte{0x06, 0x04, 0x2a, 0x03, 0x04, 0x01}) // the policy OID 1.2.3.4.1
			tok.Token = flip(tok.Token, i+5)
		}, part: "timestamp 1", offline: true},
		{name: "token unsigned byte (root copy)", mutate: func(r *anchor.Record) {
			tok := r.Timestamps[0]
			root := tok.Chain[len(tok.Chain)-1]
			i := bytes.Index(tok.Token, root)
			tok.Token = flip(tok.Token, i+len(root)-2) // in the root's own signature
		}, part: "timestamp 0"},
		{name: "token chain", mutate: func(r *anchor.Record) {
			c := r.Timestamps[0].Chain
			c[0] = flip(c[0], len(c[0])/2)
		}, part: "timestamp 0", offline: true},
		{name: "rekor SET", mutate: func(r *anchor.Record) {
			r.Tlogs[0].RekorV1.Entry = editJSON(t, r.Tlogs[0].RekorV1.Entry, func(m map[string]any) {
				v := m["verification"].(map[string]any)
				v["signedEntryTimestamp"] = flipB64(v["signedEntryTimestamp"].(string), 20)
			})
		}, part: "rekor.v1 0", offline: true},
		{name: "rekor body", mutate: func(r *anchor.Record) {
			r.Tlogs[0].RekorV1.Entry = editJSON(t, r.Tlogs[0].RekorV1.Entry, func(m map[string]any) {
				m["body"] = flipB64(m["body"].(string), 30)
			})
		}, part: "rekor.v1 0", offline: true},
		{name: "rekor inclusion proof", mutate: func(r *anchor.Record) {
			r.Tlogs[0].RekorV1.Entry = editJSON(t, r.Tlogs[0].RekorV1.Entry, func(m map[string]any) {
				p := m["verification"].(map[string]any)["inclusionProof"].(map[string]any)
				h := p["hashes"].([]any)
				s := []byte(h[0].(string))
				s[5] ^= 0x01 // a hex digit stays a hex digit ('0'<->'1', 'a'<->'`' would not)
				if s[5] == '`' || s[5] == 'g' {
					s[5] = '0'
				}
				h[0] = string(s)
			})
		}, part: "rekor.v1 0", offline: true},
		{name: "rekor checkpoint", mutate: func(r *anchor.Record) {
			r.Tlogs[0].RekorV1.Entry = editJSON(t, r.Tlogs[0].RekorV1.Entry, func(m map[string]any) {
				p := m["verification"].(map[string]any)["inclusionProof"].(map[string]any)
				p["checkpoint"] = strings.Replace(p["checkpoint"].(string), "rekor.fake", "rekor.fakf", 1)
			})
		}, part: "rekor.v1 0", offline: true},
		{name: "checkpoint root", mutate: func(r *anchor.Record) {
			lines := strings.SplitN(r.Checkpoint, "\n", 4)
			lines[2] = flipB64(lines[2], 3)
			r.Checkpoint = strings.Join(lines, "\n")
		}, part: "checkpoint", offline: true},
		{name: "checkpoint signature", mutate: func(r *anchor.Record) {
			i := strings.LastIndex(r.Checkpoint, " ") + 10
			r.Checkpoint = flipB64(r.Checkpoint, i)
		}, part: "checkpoint", offline: true},
		{name: "record size", mutate: func(r *anchor.Record) { r.Size-- }, part: "checkpoint", offline: true},
		{name: "consistency proof", mutate: func(r *anchor.Record) {
			r.Previous.Proof[0] = flip(r.Previous.Proof[0], 7)
		}, part: "consistency proof", offline: true},
		{name: "previous root", mutate: func(r *anchor.Record) {
			r.Previous.Root = flip(r.Previous.Root, 0)
		}, part: "consistency proof", offline: true},
		{name: "anchoring key", mutate: func(r *anchor.Record) {
			r.AnchorKey = flip(r.AnchorKey, len(r.AnchorKey)-1)
		}, part: "anchoring key", offline: true},
		{name: "created time byte", raw: func(b []byte) []byte {
			i := bytes.Index(b, []byte(`"created":"`)) + len(`"created":"`) + 3
			return flip(b, i) // a year 2026 -> 2027
		}, part: "record"},
		{name: "dropped timestamp", mutate: func(r *anchor.Record) { r.Timestamps = r.Timestamps[1:] }, part: "record"},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			b := orig
			if tc.raw != nil {
				b = tc.raw(orig)
			} else {
				rec, err := anchor.ParseRecord(orig)
				if err != nil {
					t.Fatal(err)
				}
				tc.mutate(rec)
				if b, err = rec.Marshal(); err != nil {
					t.Fatal(err)
				}
			}
			if bytes.Equal(b, orig) {
				t.Fatal("the mutation changed nothing")
			}
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(path, orig, 0o600)

			_, err := e.audit()
			var ae *log.ProblemsError
			if !errors.As(err, &ae) {
				t.Fatalf("audit: %v", err)
			}
			named := false
			for _, p := range ae.Problems {
				if strings.HasPrefix(p.Part, last.Name+": "+tc.part) {
					named = true
				}
			}
			if !named {
				t.Errorf("audit does not name %q of %s: %v", tc.part, last.Name, err)
			}
			t.Log(err)
			if !tc.offline {
				return
			}
			rec, err := anchor.ParseRecord(b)
			if err != nil {
				t.Fatal(err)
			}
			_, err = anchor.Verify(ctx, rec, e.verifier, &e.key.PublicKey, e.resolved.Trust)
			var ve *log.ProblemsError
			if !errors.As(err, &ve) {
				t.Fatalf("Verify: %v", err)
			}
			named = false
			for _, p := range ve.Problems {
				named = named || strings.HasPrefix(p.Part, tc.part)
			}
			if !named {
				t.Errorf("Verify does not name %q: %v", tc.part, err)
			}
		})
	}
	if _, err := e.audit(); err != nil {
		t.Fatalf("restored: %v", err)
	}
}

// editJSON decodes a JSON object, edits it and encodes it again.
func editJSON(t *testing.T, b []byte, edit func(map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
