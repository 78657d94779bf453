package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/witnesstest"
)

// TestHostileRequests: sizes near 2^64 with a valid signature, duplicate
// signature lines, a CR, invalid UTF-8 and bodies of many lines get the
// spec's status codes and change nothing but what a 200 records.
func TestHostileRequests(t *testing.T) {
	f := newFixture(t, witnesstest.NewStore())
	if s, _, b := f.post(t, request(t, f.a, 0, 5)); s != 200 {
		t.Fatal(s, b)
	}
	h := sha256.Sum256([]byte("x"))
	proof := func(n int) [][]byte {
		p := make([][]byte, n)
		for i := range p {
			p[i] = h[:]
		}
		return p
	}
	big := signWith(t, f.a.Key.Signer, originA, 1<<64-1, h[:])
	for _, tc := range []struct {
		name   string
		body   string
		status int
	}{
		{"max size 63 proof", (&witness.AddCheckpointRequest{OldSize: 5, Proof: proof(63), Checkpoint: big}).String(), 422},
		{"max size empty proof", (&witness.AddCheckpointRequest{OldSize: 5, Proof: nil, Checkpoint: big}).String(), 422},
		{"old 2^63", (&witness.AddCheckpointRequest{OldSize: 1 << 63, Proof: proof(63), Checkpoint: big}).String(), 409},
		{"old max", (&witness.AddCheckpointRequest{OldSize: 1<<64 - 1, Proof: nil, Checkpoint: big}).String(), 409},
		{"old 2^64", "old 18446744073709551616\n\n" + string(big), 400},
		{"dup sig", withCheckpoint(request(t, f.a, 5, 5), append(f.a.Checkpoint(t, 5), f.a.Checkpoint(t, 5)[bytes.Index(f.a.Checkpoint(t, 5), []byte("\n\n"))+2:]...)), 403}, // a strict signed-note reader refuses it (TestStrictSignatureLines)
		{"CR", strings.Replace(request(t, f.a, 5, 6), "\n\n", "\r\n\r\n", 1), 400},
		{"bad utf8", withCheckpoint(request(t, f.a, 5, 6), append([]byte("log.example/a\xff\n"), f.a.Checkpoint(t, 6)[14:]...)), 404},
		{"newlines", strings.Repeat("\n", 60000), 400},
		{"many proof", "old 5\n" + strings.Repeat("47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n", 1400) + "\n" + string(f.a.Checkpoint(t, 5)), 400},
	} {
		rec := httptest.NewRecorder()
		f.w.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/add-checkpoint", strings.NewReader(tc.body)))
		if rec.Code != tc.status {
			t.Errorf("%s: %d %q, want %d", tc.name, rec.Code, rec.Body, tc.status)
		}
		if rec.Code == http.StatusConflict && rec.Body.String() != "5\n" {
			t.Errorf("%s: 409 %q, want the witness's size 5", tc.name, rec.Body)
		}
		if got, _ := f.store.Latest(context.Background(), originA); !bytes.Equal(got, f.a.Checkpoint(t, 5)) {
			t.Fatalf("%s changed the record", tc.name)
		}
	}
}
