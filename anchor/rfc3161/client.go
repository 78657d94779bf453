package rfc3161

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"fmt"
	"io"
	"math/big"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/digitorus/timestamp"
)

// MaxResponseSize bounds a TSA's response: a token with its chain is a few
// kilobytes.
const MaxResponseSize = 1 << 20

// A Client asks one TSA for tokens.
type Client struct {
	// URL is where time-stamp queries are POSTed.
	URL string
	// Roots are the trusted roots of this TSA (see [VerifyOptions]).
	Roots []*x509.Certificate
	// Intermediates complete the chain when the TSA's tokens carry only
	// its own certificate.
	Intermediates []*x509.Certificate
	// HTTPClient sends the requests; nil means http.DefaultClient. Bound
	// each call with the context.
	HTTPClient *http.Client
}

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

// Timestamp asks the TSA for a token over digest (SHA-256) with certReq
// set and a fresh 128-bit nonce, and returns it only if [Verify] accepts
// it against c.Roots with that nonce. A response whose status is not
// "granted" is refused.
func (c *Client) Timestamp(ctx context.Context, digest []byte) (*Token, error) {
	nonce, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("making nonce: %w", err)
	}
	req := &timestamp.Request{HashAlgorithm: crypto.SHA256, HashedMessage: digest, Certificates: true, Nonce: nonce}
	der, err := req.Marshal()
	if err != nil {
		return nil, fmt.Errorf("encoding time-stamp query: %w", err)
	}
	resp, err := c.post(ctx, der)
	if err != nil {
		return nil, err
	}
	ts, err := timestamp.ParseResponse(resp)
	if err != nil {
		return nil, fmt.Errorf("TSA response: %w", err)
	}
	v, err := Verify(ts.RawToken, digest, VerifyOptions{Roots: c.Roots, Intermediates: c.Intermediates, Nonce: nonce})
	if err != nil {
		return nil, fmt.Errorf("TSA token refused: %w", err)
	}
	t := &Token{
		URL:    c.URL,
		Token:  ts.RawToken,
		Nonce:  nonce.String(),
		Time:   v.Time.UTC(),
		Serial: v.Serial.String(),
		Policy: v.Policy.String(),
	}
	for _, cert := range v.Chain {
		t.Chain = append(t.Chain, cert.Raw)
	}
	return t, nil
}

func (c *Client) post(ctx context.Context, query []byte) ([]byte, error) {
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(query))
	if err != nil {
		return nil, fmt.Errorf("TSA request: %w", err)
	}
	req.Header.Set("Content-Type", "application/timestamp-query")
	req.Header.Set("Accept", "application/timestamp-reply")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("TSA request: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading TSA response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("TSA answered %s: %s", resp.Status, snippet(body))
	}
	if len(body) > MaxResponseSize {
		return nil, fmt.Errorf("TSA response is over %d bytes", MaxResponseSize)
	}
	// TSAs label replies variously (application/timestamp-reply,
	// -response, octet-stream); the DER decides. Only a text body, which
	// is an error page, is refused here, to show it.
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); strings.HasPrefix(mt, "text/") {
		return nil, fmt.Errorf("TSA answered with %s: %s", mt, snippet(body))
	}
	return body, nil
}

// snippet quotes the start of an error body for a message.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// Check verifies a stored token again, offline: the token itself with
// [Verify] against roots (the stored chain helps build the path), and
// that the stored nonce, time, serial and policy agree with it.
func (t *Token) Check(digest []byte, roots []*x509.Certificate) (*Verified, error) {
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
	v, err := Verify(t.Token, digest, VerifyOptions{Roots: roots, Intermediates: inter, Nonce: nonce})
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
