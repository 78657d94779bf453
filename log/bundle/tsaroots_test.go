package bundle

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

func testRootPEM(t testing.TB) []byte {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "root"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestParseTSARoots: named blocks go to their TSA, unnamed ones pool;
// a file mixing both, or holding no certificate, is refused.
func TestParseTSARoots(t *testing.T) {
	r := testRootPEM(t)
	got, err := ParseTSARoots([]byte("tsa: http://a/tsr\n" + string(r) + string(r) + "tsa: http://b/\r\n" + string(r)))
	if err != nil || len(got) != 2 || got[0].URL != "http://a/tsr" || len(got[0].Roots) != 2 || got[1].URL != "http://b/" || len(got[1].Roots) != 1 {
		t.Errorf("named: %+v, %v", got, err)
	}
	if got, err := ParseTSARoots(append(r, r...)); err != nil || len(got) != 1 || got[0].URL != "" || len(got[0].Roots) != 2 {
		t.Errorf("unnamed: %+v, %v", got, err)
	}
	for _, bad := range []string{string(r) + "tsa: http://a/\n" + string(r), "tsa: \n" + string(r), "", "tsa: http://a/\n"} {
		if got, err := ParseTSARoots([]byte(bad)); err == nil {
			t.Errorf("%q: %+v, want an error", bad, got)
		}
	}
}

// FuzzParseTSARoots: a pinned roots file is input from whoever hands it
// over; reading it never panics, and every root it returns parsed.
func FuzzParseTSARoots(f *testing.F) {
	r := testRootPEM(f)
	f.Add([]byte("tsa: http://a/tsr\n" + string(r)))
	f.Add(r)
	f.Add([]byte("tsa: x\n-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParseTSARoots(b)
		if err != nil {
			return
		}
		for _, g := range got {
			if len(g.Roots) == 0 {
				t.Fatalf("TSA %q with no roots", g.URL)
			}
		}
	})
}
