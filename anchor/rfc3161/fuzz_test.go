package rfc3161_test

import (
	"context"
	"math/big"
	"testing"

	"github.com/provlog/provlog/anchor/anchortest/testtsa"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/anchor/rfc3161"
)

// FuzzVerify: tokens are untrusted input; Verify must never panic, and
// must refuse anything but the one valid token's exact meaning.
func FuzzVerify(f *testing.F) {
	tsa := testtsa.New(f, "Fuzz TSA")
	d := digestOf("checkpoint")
	tok, err := (&online.TSAClient{URL: tsa.URL, Roots: tsa.Roots}).Timestamp(context.Background(), d)
	if err != nil {
		f.Fatal(err)
	}
	nonce, _ := new(big.Int).SetString(tok.Nonce, 10)
	f.Add(tok.Token)
	f.Add([]byte{0x30, 0x03, 0x06, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := rfc3161.Verify(b, d, rfc3161.VerifyOptions{Roots: tsa.Roots, Nonce: nonce})
		if err == nil && (v.Serial.String() != tok.Serial || !v.Time.Equal(tok.Time)) {
			t.Errorf("a changed token verifies and says something else: %+v", v)
		}
	})
}
