package anchor_test

import (
	"context"
	"testing"

	"github.com/provlog/provlog/anchor"
)

// FuzzParseRecord: stored records are untrusted input to the audit; any
// bytes must parse or fail cleanly, and whatever parses must verify or
// fail cleanly.
func FuzzParseRecord(f *testing.F) {
	e := newEnv(f, 1, true)
	r := e.runner(nil)
	st, err := r.AnchorNow(context.Background())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(st.Bytes)
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`{"v":1,"timestamps":[null]}`))
	f.Add([]byte(`{"v":1,"tlogs":[{"kind":"rekor.v1","rekor_v1":{"entry":{}}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := anchor.ParseRecord(b)
		if err != nil {
			return
		}
		anchor.Verify(context.Background(), rec, e.verifier, nil, nil)
		anchor.Verify(context.Background(), rec, e.verifier, &e.key.PublicKey, e.resolved.Trust)
	})
}
