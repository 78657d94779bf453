package rfc3161_test

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/anchor/anchortest/testtsa"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/anchor/rfc3161"
)

func digestOf(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

func TestTimestampAccepted(t *testing.T) {
	tsa := testtsa.New(t, "Test TSA")
	c := &online.TSAClient{URL: tsa.URL, Roots: tsa.Roots}
	d := digestOf("checkpoint")
	tok, err := c.Timestamp(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	if tok.URL != tsa.URL || len(tok.Chain) != 2 || tok.Policy != "1.2.3.4.1" || tok.Nonce == "" {
		t.Errorf("token = %+v", tok)
	}
	if time.Since(tok.Time) > time.Minute {
		t.Errorf("token time %v is not now", tok.Time)
	}
	v, err := tok.Check(d, rfc3161.VerifyOptions{Roots: tsa.Roots})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if !v.Chain[len(v.Chain)-1].Equal(tsa.PKI.Root) {
		t.Errorf("chain does not end in the root")
	}
	// The token passes OpenSSL's independent verifier too.
	if out, err := testtsa.OpenSSLVerify(t, tok.Token, d, tok.Chain[:1], tsa.PKI.Root); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
}

func TestTimestampRefused(t *testing.T) {
	tsa := testtsa.New(t, "Test TSA")
	tsa.TrustVariants()
	tsa.SetDelay(2 * time.Second)
	for _, tc := range []struct {
		fault testtsa.Fault
		want  string
	}{
		{testtsa.Down, "503"},
		{testtsa.Slow, "deadline exceeded"},
		{testtsa.Garbage, "TSA response"},
		{testtsa.Rejection, "rejected"},
		{testtsa.WrongDigest, "imprint"},
		{testtsa.WrongNonce, "nonce"},
		{testtsa.NoNonce, "no nonce"},
		{testtsa.Untrusted, "does not chain to a trusted root"},
		{testtsa.NoCerts, "no signer certificate"},
		{testtsa.NonCritical, "critical"},
		{testtsa.Expired, "outside of certificate validity"},
		{testtsa.Inaccurate, "accuracy"},
	} {
		t.Run(strings.ReplaceAll(tc.want, " ", "_"), func(t *testing.T) {
			tsa.SetFault(tc.fault)
			c := &online.TSAClient{URL: tsa.URL, Roots: tsa.Roots}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			tok, err := c.Timestamp(ctx, digestOf("checkpoint"))
			if err == nil {
				t.Fatalf("fault %d: accepted %+v", tc.fault, tok)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("fault %d: error %q does not mention %q", tc.fault, err, tc.want)
			}
		})
	}
}

func TestCheckRefusesTampering(t *testing.T) {
	tsa := testtsa.New(t, "Test TSA")
	c := &online.TSAClient{URL: tsa.URL, Roots: tsa.Roots}
	d := digestOf("checkpoint")
	tok, err := c.Timestamp(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	other := testtsa.New(t, "Other TSA")
	clone := func() *rfc3161.Token {
		c := *tok
		c.Token = append([]byte{}, tok.Token...)
		c.Chain = append([][]byte{}, tok.Chain...)
		return &c
	}
	for _, tc := range []struct {
		name   string
		mutate func(*rfc3161.Token)
		digest []byte
		roots  []*x509.Certificate
	}{
		{"another digest", func(*rfc3161.Token) {}, digestOf("another checkpoint"), nil},
		{"another root", func(*rfc3161.Token) {}, nil, other.Roots},
		{"nonce", func(t *rfc3161.Token) { t.Nonce = new(big.Int).Add(mustInt(t.Nonce), big.NewInt(1)).String() }, nil, nil},
		{"time", func(t *rfc3161.Token) { t.Time = t.Time.Add(time.Second) }, nil, nil},
		{"serial", func(t *rfc3161.Token) { t.Serial = "7" }, nil, nil},
		{"truncated", func(t *rfc3161.Token) { t.Token = t.Token[:len(t.Token)-1] }, nil, nil},
	} {
		tk := clone()
		tc.mutate(tk)
		dg, roots := d, tsa.Roots
		if tc.digest != nil {
			dg = tc.digest
		}
		if tc.roots != nil {
			roots = tc.roots
		}
		if _, err := tk.Check(dg, rfc3161.VerifyOptions{Roots: roots}); err == nil {
			t.Errorf("%s: tampered token accepted", tc.name)
		}
	}
	// No single-byte change alters what the token says and still
	// verifies. (CMS leaves some bytes unsigned: the copy of the root in
	// the certificate set, the digestAlgorithms set, the tags of signed
	// attributes, which pkcs7 re-encodes before checking the signature.
	// Those changes are caught by the token's hash in the log's anchor
	// entry instead.)
	want, err := tok.Check(d, rfc3161.VerifyOptions{Roots: tsa.Roots})
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for i := range tok.Token {
		tk := clone()
		tk.Token[i] ^= 0x01
		got, err := tk.Check(d, rfc3161.VerifyOptions{Roots: tsa.Roots})
		if err != nil {
			refused++
			continue
		}
		if !got.Time.Equal(want.Time) || got.Serial.Cmp(want.Serial) != 0 || !got.Policy.Equal(want.Policy) || !got.Chain[0].Equal(want.Chain[0]) {
			t.Errorf("token with byte %d changed verifies and says something else: %+v", i, got)
		}
	}
	if refused < len(tok.Token)/2 {
		t.Errorf("only %d of %d single-byte changes refused", refused, len(tok.Token))
	}
}

func mustInt(s string) *big.Int {
	n, _ := new(big.Int).SetString(s, 10)
	return n
}

// TestOpenSSLTSA gets a token from OpenSSL's TSA (`openssl ts -reply`), an
// implementation independent of the Go code, and has OpenSSL verify what
// provlog accepted.
func TestOpenSSLTSA(t *testing.T) {
	tsa := testtsa.NewOpenSSL(t)
	c := &online.TSAClient{URL: tsa.URL, Roots: tsa.Roots}
	d := digestOf("checkpoint")
	tok, err := c.Timestamp(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tok.Check(d, rfc3161.VerifyOptions{Roots: tsa.Roots}); err != nil {
		t.Fatal(err)
	}
	if out, err := testtsa.OpenSSLVerify(t, tok.Token, d, tok.Chain[:1], tsa.Roots[0]); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
	if out, err := testtsa.OpenSSLVerify(t, tok.Token, digestOf("other"), tok.Chain[:1], tsa.Roots[0]); err == nil {
		t.Errorf("openssl verified the token over another digest:\n%s", out)
	}
	// Roots of another TSA do not vouch for this one.
	other := testtsa.New(t, "Other TSA")
	if _, err := tok.Check(d, rfc3161.VerifyOptions{Roots: other.Roots}); err == nil {
		t.Error("token accepted under another TSA's root")
	}
}
