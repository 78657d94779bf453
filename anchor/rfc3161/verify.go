// Package rfc3161 gets and checks RFC 3161 time-stamp tokens over a
// SHA-256 digest, using github.com/digitorus/timestamp for the encoding.
//
// digitorus/timestamp parses tokens but verifies little: it checks the CMS
// signature against the certificate embedded in the token (and nothing
// when there is none), and never the chain, the key usage, the imprint or
// the nonce. [Verify] does all of that, so a token is only ever accepted
// when it binds the caller's digest and chains to a root the caller trusts.
//
// # What a token must satisfy
//
//   - it is a CMS SignedData whose content type is id-ct-TSTInfo, with one
//     signer whose certificate is in the token (the request sets certReq);
//   - the CMS signature and message digest verify;
//   - the imprint is SHA-256 and equals the digest;
//   - the nonce equals the one sent;
//   - the policy is the one pinned for the TSA, when one is
//     (VerifyOptions.Policy), and the accuracy, when the token states
//     one, is no wider than the precision its time is used to
//     (VerifyOptions.MaxAccuracy);
//   - the signer certificate is an end-entity certificate whose only
//     extended key usage is id-kp-timeStamping, marked critical
//     (RFC 3161 §2.3), and it chains to a trusted root, with every
//     certificate valid at the token's genTime (so old tokens stay
//     verifiable after the TSA certificate expires);
//   - the signed ESSCertID or ESSCertIDv2 attribute names that signer
//     certificate (RFC 3161 §2.4.1, RFC 5816), so the certificate cannot be
//     swapped for another one with the same key.
//
// Revocation (CRL, OCSP) is not checked: verification is offline.
package rfc3161

import (
	"bytes"
	"crypto"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/digitorus/pkcs7"
	"github.com/digitorus/timestamp"
)

var (
	oidSignedData       = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 2}
	oidTSTInfo          = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 16, 1, 4}
	oidSigningCert      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 16, 2, 12}
	oidSigningCertV2    = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 16, 2, 47}
	oidExtKeyUsage      = asn1.ObjectIdentifier{2, 5, 29, 37}
	oidSHA256           = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 1}
	oidSHA384           = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 2}
	oidSHA512           = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 3}
	errNoSignerCert     = errors.New("token carries no signer certificate (was certReq ignored?)")
	errNoSigningCertAtt = errors.New("token has no signing-certificate attribute (ESSCertID or ESSCertIDv2)")
)

// VerifyOptions say what a token must match.
type VerifyOptions struct {
	// Roots are the trusted root certificates; the signer must chain to
	// one of them. Required.
	Roots []*x509.Certificate
	// Intermediates help build the chain, beside the certificates in the
	// token (for example the chain stored with the token).
	Intermediates []*x509.Certificate
	// Nonce is the nonce the request carried; the token must repeat it.
	// Required: provlog always sends one.
	Nonce *big.Int
	// Policy, if set, is the TSA policy the token must be issued under.
	Policy asn1.ObjectIdentifier
	// MaxAccuracy, if above zero, bounds the accuracy the token states:
	// a time known to within an hour says nothing to the minute. A token
	// that states none (the field is optional) passes.
	MaxAccuracy time.Duration
}

// Verified is what a verified token says.
type Verified struct {
	Time     time.Time
	Accuracy time.Duration
	Serial   *big.Int
	Policy   asn1.ObjectIdentifier
	// Chain is the verified chain, signer first, root last.
	Chain []*x509.Certificate
}

// Verify checks that token, a DER TimeStampToken, is a valid time-stamp
// over digest (SHA-256) by a TSA chaining to opts.Roots, as the package
// documentation lists. The error says which check failed.
func Verify(token, digest []byte, opts VerifyOptions) (*Verified, error) {
	if len(digest) != sha256.Size {
		return nil, fmt.Errorf("digest is %d bytes, not a SHA-256", len(digest))
	}
	if len(opts.Roots) == 0 {
		return nil, errors.New("no trusted TSA roots given")
	}
	if opts.Nonce == nil {
		return nil, errors.New("no nonce given")
	}
	if err := checkContentType(token); err != nil {
		return nil, err
	}
	p7, err := pkcs7.Parse(token)
	if err != nil {
		return nil, fmt.Errorf("token is not CMS SignedData: %w", err)
	}
	if len(p7.Signers) != 1 {
		return nil, fmt.Errorf("token has %d signers, want 1", len(p7.Signers))
	}
	signer := p7.GetOnlySigner()
	if signer == nil {
		return nil, errNoSignerCert
	}
	if err := p7.Verify(); err != nil {
		return nil, fmt.Errorf("token signature: %w", err)
	}
	ts, err := timestamp.Parse(token)
	if err != nil {
		return nil, fmt.Errorf("token TSTInfo: %w", err)
	}
	if ts.HashAlgorithm != crypto.SHA256 {
		return nil, fmt.Errorf("token imprint uses %v, not SHA-256", ts.HashAlgorithm)
	}
	if !bytes.Equal(ts.HashedMessage, digest) {
		return nil, fmt.Errorf("token imprint %x is not the digest %x", ts.HashedMessage, digest)
	}
	if ts.Nonce == nil {
		return nil, errors.New("token has no nonce")
	}
	if ts.Nonce.Cmp(opts.Nonce) != 0 {
		return nil, fmt.Errorf("token nonce %v is not the request's nonce %v", ts.Nonce, opts.Nonce)
	}
	if opts.Policy != nil && !ts.Policy.Equal(opts.Policy) {
		return nil, fmt.Errorf("token policy %v is not the policy %v pinned for the TSA", ts.Policy, opts.Policy)
	}
	if opts.MaxAccuracy > 0 && ts.Accuracy > opts.MaxAccuracy {
		return nil, fmt.Errorf("token accuracy ±%v is wider than ±%v, the precision its time is used to", ts.Accuracy, opts.MaxAccuracy)
	}
	if err := checkSignerCert(signer); err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	for _, c := range opts.Roots {
		roots.AddCert(c)
	}
	inter := x509.NewCertPool()
	for _, c := range p7.Certificates {
		inter.AddCert(c)
	}
	for _, c := range opts.Intermediates {
		inter.AddCert(c)
	}
	chains, err := signer.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageTimeStamping},
		CurrentTime:   ts.Time,
	})
	if err != nil {
		return nil, fmt.Errorf("TSA certificate %q does not chain to a trusted root at the token's time %s: %w",
			signer.Subject.String(), ts.Time.UTC().Format(time.RFC3339), err)
	}
	if err := checkSigningCertAttr(p7, signer); err != nil {
		return nil, err
	}
	return &Verified{
		Time:     ts.Time,
		Accuracy: ts.Accuracy,
		Serial:   ts.SerialNumber,
		Policy:   ts.Policy,
		Chain:    chains[0],
	}, nil
}

// checkContentType checks that the CMS ContentInfo holds SignedData whose
// encapsulated content is a TSTInfo: pkcs7.Parse checks neither.
func checkContentType(token []byte) error {
	var ci struct {
		ContentType asn1.ObjectIdentifier
		Content     asn1.RawValue `asn1:"explicit,tag:0"`
	}
	rest, err := asn1.Unmarshal(token, &ci)
	if err != nil {
		return fmt.Errorf("token is not a CMS ContentInfo: %w", err)
	}
	if len(rest) > 0 {
		return errors.New("token has trailing data")
	}
	if !ci.ContentType.Equal(oidSignedData) {
		return fmt.Errorf("token content type %v is not SignedData", ci.ContentType)
	}
	var sd struct {
		Version          int
		DigestAlgorithms asn1.RawValue
		EncapContentInfo struct {
			EContentType asn1.ObjectIdentifier
			EContent     asn1.RawValue `asn1:"explicit,optional,tag:0"`
		}
		Certificates asn1.RawValue `asn1:"optional,tag:0"`
		CRLs         asn1.RawValue `asn1:"optional,tag:1"`
		SignerInfos  asn1.RawValue
	}
	if _, err := asn1.Unmarshal(ci.Content.Bytes, &sd); err != nil {
		return fmt.Errorf("token SignedData: %w", err)
	}
	if !sd.EncapContentInfo.EContentType.Equal(oidTSTInfo) {
		return fmt.Errorf("token signs content of type %v, not a TSTInfo", sd.EncapContentInfo.EContentType)
	}
	return nil
}

// checkSignerCert checks the TSA certificate's profile (RFC 3161 §2.3).
func checkSignerCert(c *x509.Certificate) error {
	if c.IsCA {
		return fmt.Errorf("TSA certificate %q is a CA certificate, not an end-entity one", c.Subject.String())
	}
	critical := false
	for _, e := range c.Extensions {
		if e.Id.Equal(oidExtKeyUsage) {
			critical = e.Critical
		}
	}
	if !critical {
		return fmt.Errorf("TSA certificate %q does not mark its extended key usage critical", c.Subject.String())
	}
	if len(c.ExtKeyUsage) != 1 || c.ExtKeyUsage[0] != x509.ExtKeyUsageTimeStamping || len(c.UnknownExtKeyUsage) > 0 {
		return fmt.Errorf("TSA certificate %q must have id-kp-timeStamping as its only extended key usage", c.Subject.String())
	}
	return nil
}

type essCertIDv2 struct {
	HashAlgorithm pkix.AlgorithmIdentifier `asn1:"optional"` // DEFAULT sha256
	CertHash      []byte
	IssuerSerial  asn1.RawValue `asn1:"optional"`
}

type signingCertificateV2 struct {
	Certs    []essCertIDv2
	Policies asn1.RawValue `asn1:"optional"`
}

type essCertID struct {
	CertHash     []byte
	IssuerSerial asn1.RawValue `asn1:"optional"`
}

type signingCertificate struct {
	Certs    []essCertID
	Policies asn1.RawValue `asn1:"optional"`
}

// checkSigningCertAttr checks that the signed ESSCertIDv2 (or ESSCertID)
// attribute identifies the signer's certificate: the first ESSCertID names
// the signing certificate (RFC 5035 §5.4).
func checkSigningCertAttr(p7 *pkcs7.PKCS7, signer *x509.Certificate) error {
	var v2 signingCertificateV2
	if err := p7.UnmarshalSignedAttribute(oidSigningCertV2, &v2); err == nil {
		if len(v2.Certs) == 0 {
			return errors.New("token's ESSCertIDv2 attribute lists no certificate")
		}
		id := v2.Certs[0]
		var sum []byte
		switch alg := id.HashAlgorithm.Algorithm; {
		case len(alg) == 0 || alg.Equal(oidSHA256):
			h := sha256.Sum256(signer.Raw)
			sum = h[:]
		case alg.Equal(oidSHA384):
			h := sha512.Sum384(signer.Raw)
			sum = h[:]
		case alg.Equal(oidSHA512):
			h := sha512.Sum512(signer.Raw)
			sum = h[:]
		default:
			return fmt.Errorf("token's ESSCertIDv2 uses unsupported hash %v", alg)
		}
		if !bytes.Equal(sum, id.CertHash) {
			return errors.New("token's ESSCertIDv2 does not name the certificate that signed it")
		}
		return nil
	}
	var v1 signingCertificate
	if err := p7.UnmarshalSignedAttribute(oidSigningCert, &v1); err == nil {
		if len(v1.Certs) == 0 {
			return errors.New("token's ESSCertID attribute lists no certificate")
		}
		h := sha1.Sum(signer.Raw)
		if !bytes.Equal(h[:], v1.Certs[0].CertHash) {
			return errors.New("token's ESSCertID does not name the certificate that signed it")
		}
		return nil
	}
	return errNoSigningCertAtt
}
