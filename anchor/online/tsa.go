package online

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/asn1"
	"fmt"
	"io"
	"math/big"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/digitorus/timestamp"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/rfc3161"
	"github.com/provlog/provlog/log"
)

// MaxTSAResponse bounds a TSA's response: a token with its chain is a few
// kilobytes.
const MaxTSAResponse = 1 << 20

// A TSAClient asks one RFC 3161 time-stamping authority for tokens.
type TSAClient struct {
	// URL is where time-stamp queries are POSTed.
	URL string
	// Roots are the trusted roots of this TSA (see [rfc3161.VerifyOptions]).
	Roots []*x509.Certificate
	// Intermediates complete the chain when the TSA's tokens carry only
	// its own certificate.
	Intermediates []*x509.Certificate
	// Policy, if set, is the TSA policy its tokens must be issued under.
	Policy asn1.ObjectIdentifier
	// HTTPClient sends the requests; nil means http.DefaultClient. Bound
	// each call with the context.
	HTTPClient *http.Client
}

// Timestamp asks the TSA for a token over digest (SHA-256) with certReq
// set and a fresh 128-bit nonce, and returns it only if [rfc3161.Verify] accepts
// it against c.Roots with that nonce, under c.Policy if set, with an
// accuracy no wider than [anchor.MaxClockSkew] (the precision an anchor's
// time is used to). A response whose status is not "granted" is refused.
func (c *TSAClient) Timestamp(ctx context.Context, digest []byte) (*rfc3161.Token, error) {
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
	v, err := rfc3161.Verify(ts.RawToken, digest, rfc3161.VerifyOptions{Roots: c.Roots, Intermediates: c.Intermediates, Nonce: nonce,
		Policy: c.Policy, MaxAccuracy: anchor.MaxClockSkew})
	if err != nil {
		return nil, fmt.Errorf("TSA token refused: %w", err)
	}
	if err := checkClock("the TSA's", v.Time); err != nil {
		return nil, fmt.Errorf("TSA token refused: %w", err)
	}
	t := &rfc3161.Token{
		URL:    log.RedactURL(c.URL), // the record, and the log's anchor entry, keep no credential
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

func (c *TSAClient) post(ctx context.Context, query []byte) ([]byte, error) {
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(query))
	if err != nil {
		return nil, fmt.Errorf("TSA request: %w", log.RedactURLError(err))
	}
	req.Header.Set("Content-Type", "application/timestamp-query")
	req.Header.Set("Accept", "application/timestamp-reply")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("TSA request: %w", log.RedactURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxTSAResponse+1))
	if err != nil {
		return nil, fmt.Errorf("reading TSA response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("TSA answered %s: %s", resp.Status, snippet(body, c.URL))
	}
	if len(body) > MaxTSAResponse {
		return nil, fmt.Errorf("TSA response is over %d bytes", MaxTSAResponse)
	}
	// TSAs label replies variously (application/timestamp-reply,
	// -response, octet-stream); the DER decides. Only a text body, which
	// is an error page, is refused here, to show it.
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); strings.HasPrefix(mt, "text/") {
		return nil, fmt.Errorf("TSA answered with %s: %s", mt, snippet(body, c.URL))
	}
	return body, nil
}

// snippet quotes the start of an error body for a message, without the
// credentials the authority's URL rawURL gave the request: an error page
// may quote them.
func snippet(b []byte, rawURL string) string {
	s := strings.TrimSpace(log.CutCredentials(string(b), log.URLCredentials(rawURL)))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// checkClock refuses t, whose's time, when it is over
// [anchor.MaxClockSkew] from the local clock.
func checkClock(whose string, t time.Time) error {
	if d := time.Since(t); d > anchor.MaxClockSkew || d < -anchor.MaxClockSkew {
		return fmt.Errorf("%s time %s is %s from this machine's clock (at most %s either way)", whose, t.UTC().Format(time.RFC3339), d.Abs().Round(time.Second), anchor.MaxClockSkew)
	}
	return nil
}
