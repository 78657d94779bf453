package rfc3161

import (
	"crypto/x509"
	"fmt"
	"math/big"
	"time"
)

// A Token is an accepted time-stamp token and what is needed to check it
// again offline. Its JSON form is part of provlog's stored anchor record.
type Token struct {
	URL string `json:"url"`
	// Token is the DER TimeStampToken (a CMS ContentInfo).
	Token []byte `json:"token"`
	// Chain is the certificate chain it was verified with, signer first,
	// root last, DER.
	Chain [][]byte `json:"chain"`
	// Nonce is the nonce the request carried, in decimal.
	Nonce string `json:"nonce"`
	// Time, Serial (decimal) and Policy (dotted) repeat what the token
	// says, for readers; verification checks that they agree with it.
	Time   time.Time `json:"time"`
	Serial string    `json:"serial"`
	Policy string    `json:"policy"`
}

// Check verifies a stored token again, offline: the token itself with
// [Verify] under opts (its roots, policy and accuracy bound; the stored
// nonce is the nonce, and the stored chain helps build the path), and
// that the stored nonce, time, serial and policy agree with it.
func (t *Token) Check(digest []byte, opts VerifyOptions) (*Verified, error) {
	nonce, ok := new(big.Int).SetString(t.Nonce, 10)
	if !ok {
		return nil, fmt.Errorf("stored nonce %q is not a decimal number", t.Nonce)
	}
	var inter []*x509.Certificate
	for i, der := range t.Chain {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("stored chain certificate %d: %w", i, err)
		}
		inter = append(inter, c)
	}
	opts.Intermediates = append(inter, opts.Intermediates...)
	opts.Nonce = nonce
	v, err := Verify(t.Token, digest, opts)
	if err != nil {
		return nil, err
	}
	switch {
	case !v.Time.Equal(t.Time):
		return nil, fmt.Errorf("stored time %s is not the token's time %s", t.Time.Format(time.RFC3339Nano), v.Time.Format(time.RFC3339Nano))
	case v.Serial.String() != t.Serial:
		return nil, fmt.Errorf("stored serial %s is not the token's serial %s", t.Serial, v.Serial)
	case v.Policy.String() != t.Policy:
		return nil, fmt.Errorf("stored policy %s is not the token's policy %s", t.Policy, v.Policy)
	}
	return v, nil
}
