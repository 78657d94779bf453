// Package testtsa runs RFC 3161 time-stamp authorities for tests: an
// in-process one built on github.com/digitorus/timestamp whose faults can
// be switched on (down, slow, garbage, wrong digest, wrong nonce, untrusted
// chain, ...), and one that shells out to `openssl ts -reply` per request,
// so tokens also come from an independent implementation.
//
// Test code only; nothing in the product imports it.
package testtsa

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/digitorus/timestamp"

	"github.com/provlog/provlog/anchor/rfc3161"
)

// A Fault makes the in-process TSA misbehave.
type Fault int

const (
	OK          Fault = iota
	Down              // answers 503
	Slow              // waits (see TSA.Delay) before answering
	Garbage           // answers 200 with bytes that are no TimeStampResp
	Rejection         // answers a well-formed "rejection" response
	WrongDigest       // signs a token over another digest
	WrongNonce        // signs a token with another nonce
	NoNonce           // signs a token without a nonce
	Untrusted         // signs with a certificate from another, untrusted root
	NoCerts           // ignores certReq: no certificate in the token
	NonCritical       // signs with a certificate whose EKU is not critical
	Expired           // signs with a certificate that expired before now
	Skewed            // signs a token dated 30 days ahead (within its certificate's validity), far from the clock
	Inaccurate        // signs a token whose accuracy is an hour
)

// PKI is a root and a time-stamping certificate it issued.
type PKI struct {
	Root    *x509.Certificate
	Leaf    *x509.Certificate
	LeafKey crypto.Signer
	// Accuracy is the accuracy Token's tokens state; zero means a second.
	Accuracy time.Duration
}

// NewPKI makes a root and a TSA certificate valid from notBefore to
// notAfter; criticalEKU says whether its extended key usage is marked
// critical (RFC 3161 requires it).
func NewPKI(t testing.TB, name string, criticalEKU bool, notBefore, notAfter time.Time) *PKI {
	t.Helper()
	rootKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rootTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name + " Root"},
		NotBefore:             notBefore.Add(-time.Hour),
		NotAfter:              notAfter.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	rootDER, err := x509.CreateCertificate(rand.Reader, rootTmpl, rootTmpl, rootKey.Public(), rootKey)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := x509.ParseCertificate(rootDER)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(2),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature,
	}
	if criticalEKU {
		// crypto/x509 writes ExtKeyUsage non-critical; RFC 3161 wants it
		// critical, so spell the extension out.
		val, _ := asn1.Marshal([]asn1.ObjectIdentifier{{1, 3, 6, 1, 5, 5, 7, 3, 8}})
		leafTmpl.ExtraExtensions = []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 37}, Critical: true, Value: val}}
	} else {
		leafTmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageTimeStamping}
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, root, leafKey.Public(), rootKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(leafDER)
	return &PKI{Root: root, Leaf: leaf, LeafKey: leafKey}
}

// A TSA is an in-process time-stamp authority on a loopback HTTP server.
type TSA struct {
	URL   string
	Roots []*x509.Certificate // what a client should trust
	PKI   *PKI

	mu          sync.Mutex
	fault       Fault
	delay       time.Duration
	untrusted   *PKI
	noncritical *PKI
	expired     *PKI
}

// New starts a TSA; it stops when the test ends.
func New(t testing.TB, name string) *TSA {
	t.Helper()
	now := time.Now()
	a := &TSA{
		PKI:         NewPKI(t, name, true, now.Add(-time.Hour), now.Add(365*24*time.Hour)),
		untrusted:   NewPKI(t, name+" (impostor)", true, now.Add(-time.Hour), now.Add(365*24*time.Hour)),
		noncritical: NewPKI(t, name+" (EKU not critical)", false, now.Add(-time.Hour), now.Add(365*24*time.Hour)),
		expired:     NewPKI(t, name+" (expired)", true, now.Add(-48*time.Hour), now.Add(-24*time.Hour)),
		delay:       5 * time.Second,
	}
	a.Roots = []*x509.Certificate{a.PKI.Root}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	a.URL = srv.URL + "/tsa"
	return a
}

// TrustVariants adds the roots of the non-critical-EKU and expired
// certificates to a.Roots, so that those faults are refused for their own
// reason and not for an unknown root.
func (a *TSA) TrustVariants() {
	a.Roots = append(a.Roots, a.noncritical.Root, a.expired.Root)
}

// SetFault switches the TSA's behaviour for the following requests.
func (a *TSA) SetFault(f Fault) {
	a.mu.Lock()
	a.fault = f
	a.mu.Unlock()
}

// SetDelay sets how long a Slow TSA waits.
func (a *TSA) SetDelay(d time.Duration) {
	a.mu.Lock()
	a.delay = d
	a.mu.Unlock()
}

func (a *TSA) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	fault, delay := a.fault, a.delay
	a.mu.Unlock()
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil || r.Method != http.MethodPost {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	switch fault {
	case Down:
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	case Slow:
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	case Garbage:
		w.Header().Set("Content-Type", "application/timestamp-reply")
		w.Write([]byte("\x30\x03garbage, not a TimeStampResp"))
		return
	case Rejection:
		resp, _ := timestamp.CreateErrorResponse(timestamp.Rejection, timestamp.BadAlgorithm)
		w.Header().Set("Content-Type", "application/timestamp-reply")
		w.Write(resp)
		return
	}
	req, err := timestamp.ParseRequest(body)
	if err != nil {
		http.Error(w, "bad query: "+err.Error(), http.StatusBadRequest)
		return
	}
	pki := a.PKI
	ts := timestamp.Timestamp{
		HashAlgorithm:     req.HashAlgorithm,
		HashedMessage:     req.HashedMessage,
		Time:              time.Now().UTC().Truncate(time.Second),
		Nonce:             req.Nonce,
		Policy:            asn1.ObjectIdentifier{1, 2, 3, 4, 1},
		Accuracy:          time.Second,
		AddTSACertificate: req.Certificates,
	}
	switch fault {
	case WrongDigest:
		ts.HashedMessage = append([]byte{}, req.HashedMessage...)
		ts.HashedMessage[0] ^= 1
	case WrongNonce:
		ts.Nonce = new(big.Int).Add(req.Nonce, big.NewInt(1))
	case NoNonce:
		ts.Nonce = nil
	case Skewed:
		ts.Time = ts.Time.Add(30 * 24 * time.Hour)
	case Inaccurate:
		ts.Accuracy = time.Hour
	case Untrusted:
		pki = a.untrusted
	case NoCerts:
		ts.AddTSACertificate = false
	case NonCritical:
		pki = a.noncritical
	case Expired:
		pki = a.expired
	}
	if ts.AddTSACertificate {
		ts.Certificates = []*x509.Certificate{pki.Root}
	}
	resp, err := ts.CreateResponseWithOpts(pki.Leaf, pki.LeafKey, crypto.SHA256)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/timestamp-reply")
	w.Write(resp)
}

// Token returns a verified token over digest whose genTime is at, signed
// by p with its chain (leaf, root), as provlog stores it: what a TSA whose
// clock said at issued. p's certificate must be valid both at and now
// (the CMS signing time is now). anchor/online refuses tokens far from
// the clock; this makes the tokens of records stored before it did (or
// by a sidecar that does not).
func (p *PKI) Token(t testing.TB, url string, digest []byte, at time.Time) *rfc3161.Token {
	t.Helper()
	nonce := big.NewInt(at.UnixNano())
	accuracy := p.Accuracy
	if accuracy == 0 {
		accuracy = time.Second
	}
	ts := timestamp.Timestamp{
		HashAlgorithm:     crypto.SHA256,
		HashedMessage:     digest,
		Time:              at.UTC(),
		Nonce:             nonce,
		Policy:            asn1.ObjectIdentifier{1, 2, 3, 4, 1},
		Accuracy:          accuracy,
		AddTSACertificate: true,
		Certificates:      []*x509.Certificate{p.Root},
	}
	resp, err := ts.CreateResponseWithOpts(p.Leaf, p.LeafKey, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := timestamp.ParseResponse(resp)
	if err != nil {
		t.Fatal(err)
	}
	v, err := rfc3161.Verify(parsed.RawToken, digest, rfc3161.VerifyOptions{Roots: []*x509.Certificate{p.Root}, Nonce: nonce})
	if err != nil {
		t.Fatal(err)
	}
	tok := &rfc3161.Token{URL: url, Token: parsed.RawToken, Nonce: nonce.String(), Time: v.Time.UTC(),
		Serial: v.Serial.String(), Policy: v.Policy.String()}
	for _, c := range v.Chain {
		tok.Chain = append(tok.Chain, c.Raw)
	}
	return tok
}
