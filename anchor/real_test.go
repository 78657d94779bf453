package anchor_test

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"testing"
	"time"

	"github.com/provlog/provlog/anchor/anchortest/realsvc"
	"github.com/provlog/provlog/anchor/anchortest/testtsa"
	"github.com/provlog/provlog/anchor/online"
)

// TestRealAuthorities anchors against real, independent implementations:
// OpenSSL's TSA (`openssl ts -reply`), sigstore's timestamp-server v2.1.3
// and sigstore's rekor-server v1.5.4 on Trillian v1.7.3. The stored tokens
// pass `openssl ts -verify`, and the audit verifies every record offline,
// after the services are gone.
func TestRealAuthorities(t *testing.T) {
	ossl := testtsa.NewOpenSSL(t)
	tsURL, tsRoot, tsInter := realsvc.TimestampServer(t)
	rekorURL, rekorKey := realsvc.Rekor(t)

	e := newEnv(t, 0, false)
	e.cfg.Timeout = 20 * time.Second
	e.cfg.TSA = []online.TSAConfig{
		{URL: ossl.URL, Roots: []string{certPEM(ossl.Roots[0])}},
		{URL: tsURL, Roots: []string{certPEM(tsRoot)}, Intermediates: []string{certPEM(tsInter[0])}},
	}
	e.cfg.Rekor = &online.RekorConfig{URL: rekorURL, PublicKey: pubPEM(t, rekorKey)}
	var err error
	if e.resolved, err = e.cfg.Resolve(nil); err != nil {
		t.Fatal(err)
	}
	r := e.runner(nil)
	ctx := context.Background()
	for i := range 3 {
		st, err := r.AnchorNow(ctx)
		if err != nil {
			t.Fatalf("anchor %d: %v (status %+v)", i, err, r.Status())
		}
		rec := st.Record
		if len(rec.Timestamps) != 2 || len(rec.Tlogs) != 1 {
			t.Fatalf("anchor %d: %d timestamps, %d tlogs; status %+v", i, len(rec.Timestamps), len(rec.Tlogs), r.Status())
		}
		d, _ := hex.DecodeString(rec.Digest)
		for j, tok := range rec.Timestamps {
			root, _ := x509.ParseCertificate(tok.Chain[len(tok.Chain)-1])
			if out, err := testtsa.OpenSSLVerify(t, tok.Token, d, tok.Chain[:len(tok.Chain)-1], root); err != nil {
				t.Errorf("anchor %d, timestamp %d (%s): %v\n%s", i, j, tok.URL, err, out)
			}
		}
		if got := rec.Tlogs[0].RekorV1.LogIndex; got != int64(i) {
			t.Errorf("anchor %d: rekor log index %d", i, got)
		}
		e.appendN(2)
	}
	rep, err := e.audit()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verified != 3 || rep.Timestamps != 6 || rep.Tlogs != 3 || rep.Entries != 3 {
		t.Errorf("report %+v", rep)
	}

	// The real services refuse what they should, and provlog refuses
	// what they answer for a digest it did not ask about.
	c := &online.TSAClient{URL: tsURL, Roots: ossl.Roots}
	if _, err := c.Timestamp(ctx, make([]byte, 32)); err == nil {
		t.Error("timestamp-server's token accepted under OpenSSL's root")
	}
	rc := &online.RekorClient{URL: rekorURL, PublicKey: e.resolved.Trust.TSARoots[0].PublicKey, Signer: e.key}
	if _, err := rc.Upload(ctx, make([]byte, 32)); err == nil {
		t.Error("Rekor entry accepted under another pinned key")
	}
}

func pubPEM(t *testing.T, k crypto.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}
