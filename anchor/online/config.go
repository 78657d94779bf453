package online

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/log"
)

// Config is the `anchors:` section of provlog's YAML configuration
// (DESIGN §6):
//
//	anchors:
//	  interval: 10m            # anchor the latest checkpoint this often, when the tree grew
//	  timeout: 30s             # bound on each call to a TSA or Rekor (default 30s)
//	  tsa:
//	    - url: https://freetsa.org/tsr
//	      roots: [freetsa-root.pem]   # PEM files (relative to the config file) or inline PEM
//	    - url: http://timestamp.digicert.com
//	      roots: [digicert-root.pem]
//	      intermediates: [digicert-ca.pem]   # when its tokens carry only the TSA's certificate
//	      policy: 2.16.840.1.114412.7.1      # optional: the TSA policy OID its tokens must carry
//	    - url: https://old-tsa.example/tsr
//	      roots: [old-tsa-root.pem]
//	      retired: true            # asked for no new tokens; its roots still verify the old ones
//	  rekor:
//	    url: https://rekor.sigstore.dev
//	    public_key: rekor.pub         # PEM file or inline PEM; pinned
//
// At least one TSA that is not retired or a Rekor must be configured.
// Roots and keys are the trust used both when anchoring and by `provlog
// audit`: a TSA no longer used stays listed, retired, for as long as
// records hold its tokens.
type Config struct {
	Interval time.Duration `yaml:"interval"`
	Timeout  time.Duration `yaml:"timeout"`
	TSA      []TSAConfig   `yaml:"tsa"`
	Rekor    *RekorConfig  `yaml:"rekor"`
}

// TSAConfig is one RFC 3161 time-stamp authority.
type TSAConfig struct {
	URL string `yaml:"url"`
	// Roots are the trusted root certificates of the TSA: each a PEM file
	// name (relative to the config file's directory) or inline PEM; a
	// file may hold several certificates.
	Roots []string `yaml:"roots"`
	// Intermediates (same forms) complete the chain for a TSA whose
	// tokens carry only its own certificate. They are not trusted: the
	// chain must still end in one of Roots. Records store the whole
	// verified chain, so verifying later needs only the roots.
	Intermediates []string `yaml:"intermediates"`
	// Policy, if set, is the TSA policy OID (dotted) its tokens must be
	// issued under, when anchoring and when verifying.
	Policy string `yaml:"policy"`
	// Retired keeps the TSA's trust (roots, policy) for the tokens
	// records already hold, and asks it for no new ones: an operator who
	// stops using a TSA keeps it so, or the audit of its records fails.
	Retired bool `yaml:"retired"`
}

// RekorConfig is one Rekor v1 instance.
type RekorConfig struct {
	URL string `yaml:"url"`
	// PublicKey is Rekor's public key, a PEM file name or inline PEM
	// (GET <url>/api/v1/log/publicKey gives it; check it out of band).
	PublicKey string `yaml:"public_key"`
}

// Defaults.
const (
	DefaultInterval = 10 * time.Minute
	DefaultTimeout  = 30 * time.Second
	// MinInterval bounds how often anchoring may run.
	MinInterval = time.Second
)

// Resolved is a checked configuration with its roots and keys loaded.
type Resolved struct {
	Interval time.Duration
	Timeout  time.Duration
	// TSAs are the TSAs asked for tokens: the retired ones are left out.
	TSAs  []ResolvedTSA
	Rekor *ResolvedRekor
	// Trust is every configured root and key, for verification, the
	// retired TSAs' included.
	Trust *anchor.Trust
}

// ResolvedTSA is a TSA with its roots loaded.
type ResolvedTSA struct {
	URL           string
	Roots         []*x509.Certificate
	Intermediates []*x509.Certificate
	Policy        asn1.ObjectIdentifier
}

// ResolvedRekor is a Rekor with its key loaded.
type ResolvedRekor struct {
	URL       string
	PublicKey crypto.PublicKey
}

// Resolve checks c and loads its roots and keys. A setting that is not
// inline PEM names a file, which readFile reads (the command resolves the
// name against the config file's directory: this package reads no files);
// a nil readFile allows inline PEM only. Errors say which setting is
// wrong.
func (c *Config) Resolve(readFile func(name string) ([]byte, error)) (*Resolved, error) {
	r := &Resolved{Interval: c.Interval, Timeout: c.Timeout, Trust: &anchor.Trust{}}
	if r.Interval == 0 {
		r.Interval = DefaultInterval
	}
	if r.Interval < MinInterval {
		return nil, fmt.Errorf("anchors: interval %v is below the minimum %v", c.Interval, MinInterval)
	}
	if r.Timeout == 0 {
		r.Timeout = DefaultTimeout
	}
	if r.Timeout < 0 {
		return nil, fmt.Errorf("anchors: timeout %v is negative", c.Timeout)
	}
	if !slices.ContainsFunc(c.TSA, func(t TSAConfig) bool { return !t.Retired }) && c.Rekor == nil {
		return nil, errors.New("anchors: configure at least one tsa that is not retired, or a rekor")
	}
	for i, t := range c.TSA {
		if err := checkURL(t.URL); err != nil {
			return nil, fmt.Errorf("anchors: tsa %d: url: %w", i, err)
		}
		if len(t.Roots) == 0 {
			return nil, fmt.Errorf("anchors: tsa %d (%s): roots: list the TSA's trusted root certificates", i, log.RedactURL(t.URL))
		}
		rt := ResolvedTSA{URL: t.URL}
		if t.Policy != "" {
			oid, err := parseOID(t.Policy)
			if err != nil {
				return nil, fmt.Errorf("anchors: tsa %d (%s): policy: %w", i, log.RedactURL(t.URL), err)
			}
			rt.Policy = oid
		}
		for _, s := range t.Roots {
			certs, err := loadCerts(readFile, s)
			if err != nil {
				return nil, fmt.Errorf("anchors: tsa %d (%s): roots: %w", i, log.RedactURL(t.URL), err)
			}
			rt.Roots = append(rt.Roots, certs...)
		}
		for _, s := range t.Intermediates {
			certs, err := loadCerts(readFile, s)
			if err != nil {
				return nil, fmt.Errorf("anchors: tsa %d (%s): intermediates: %w", i, log.RedactURL(t.URL), err)
			}
			rt.Intermediates = append(rt.Intermediates, certs...)
		}
		if !t.Retired {
			r.TSAs = append(r.TSAs, rt)
		}
		r.Trust.TSARoots = append(r.Trust.TSARoots, rt.Roots...)
		// Records name the TSA by its URL without credentials.
		r.Trust.TSAs = append(r.Trust.TSAs, anchor.TSATrust{URL: log.RedactURL(t.URL), Roots: rt.Roots, Policy: rt.Policy})
	}
	if c.Rekor != nil {
		if err := checkURL(c.Rekor.URL); err != nil {
			return nil, fmt.Errorf("anchors: rekor: url: %w", err)
		}
		if c.Rekor.PublicKey == "" {
			return nil, fmt.Errorf("anchors: rekor: public_key: pin Rekor's public key (GET %s/api/v1/log/publicKey, checked out of band)", log.RedactURL(c.Rekor.URL))
		}
		k, err := loadPublicKey(readFile, c.Rekor.PublicKey)
		if err != nil {
			return nil, fmt.Errorf("anchors: rekor: public_key: %w", err)
		}
		// A trailing slash goes (records name https://rekor.sigstore.dev
		// as configured with or without it), but not off a query: an
		// API key may end in one.
		u := c.Rekor.URL
		if !strings.ContainsAny(u, "?#") {
			u = strings.TrimRight(u, "/")
		}
		r.Rekor = &ResolvedRekor{URL: u, PublicKey: k}
		r.Trust.RekorKeys = append(r.Trust.RekorKeys, k)
	}
	return r, nil
}

// parseOID parses a dotted object identifier such as 1.2.3.4.1.
func parseOID(s string) (asn1.ObjectIdentifier, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return nil, fmt.Errorf("%q is not a dotted object identifier", s)
	}
	oid := make(asn1.ObjectIdentifier, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || (len(p) > 1 && p[0] == '0') {
			return nil, fmt.Errorf("%q is not a dotted object identifier", s)
		}
		oid[i] = n
	}
	return oid, nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL", log.RedactURL(s))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", log.RedactURL(s))
	}
	return nil
}

// readPEM returns s itself when it is inline PEM, else the file it names.
func readPEM(readFile func(string) ([]byte, error), s string) ([]byte, error) {
	if strings.HasPrefix(strings.TrimSpace(s), "-----BEGIN") {
		return []byte(s), nil
	}
	if readFile == nil {
		return nil, fmt.Errorf("%s is not inline PEM, and no file may be read here", abbrev(s))
	}
	return readFile(s)
}

func loadCerts(readFile func(string) ([]byte, error), s string) ([]*x509.Certificate, error) {
	b, err := readPEM(readFile, s)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", abbrev(s))
	}
	return certs, nil
}

func loadPublicKey(readFile func(string) ([]byte, error), s string) (crypto.PublicKey, error) {
	b, err := readPEM(readFile, s)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("%s is not a PEM public key", abbrev(s))
	}
	return x509.ParsePKIXPublicKey(blk.Bytes)
}

func abbrev(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// ParseSigner parses the anchoring key: a PKCS#8 PEM P-256 private key,
// as `provlog keygen` writes to <data>/anchor.key.
func ParseSigner(pemBytes []byte) (*ecdsa.PrivateKey, error) {
	blk, _ := pem.Decode(pemBytes)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, errors.New("anchoring key is not a PKCS#8 PEM private key")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("anchoring key: %w", err)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok || ek.Curve != elliptic.P256() {
		return nil, errors.New("anchoring key is not ECDSA P-256")
	}
	return ek, nil
}

// LoadCerts reads the certificates of a roots: setting (inline PEM or a
// file readFile reads), for commands that take the same PEM on a flag.
func LoadCerts(readFile func(string) ([]byte, error), s string) ([]*x509.Certificate, error) {
	return loadCerts(readFile, s)
}

// LoadPublicKey reads a public_key: setting (inline PEM or a file
// readFile reads), for commands that take the same PEM on a flag.
func LoadPublicKey(readFile func(string) ([]byte, error), s string) (crypto.PublicKey, error) {
	return loadPublicKey(readFile, s)
}
