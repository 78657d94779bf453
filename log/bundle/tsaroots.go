package bundle

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// TSARoots are the roots pinned for one TSA: its URL as anchor records
// store it (without credentials), and its root certificates.
type TSARoots struct {
	URL   string
	Roots []*x509.Certificate
}

// tsaLine starts the line that names the TSA of the PEM blocks after it.
const tsaLine = "tsa: "

// ParseTSARoots reads a PEM file of TSA root certificates. A line
// "tsa: URL" names the TSA the certificate blocks after it (up to the
// next such line) are pinned for: text before a PEM block is RFC 7468's
// explanatory text, which openssl and other PEM readers pass over, so the
// file serves `openssl ts -verify -CAfile` as it is. A file whose blocks
// all name no TSA gives one TSARoots with an empty URL: its roots are
// pooled, vouching for a token of any TSA. A file that names some TSAs
// and not others is refused, as is one holding a certificate that does
// not parse or none at all. Blocks of other types are passed over.
func ParseTSARoots(b []byte) ([]TSARoots, error) {
	var out []TSARoots
	named, unnamed := false, false
	url := ""
	for {
		i := bytes.Index(b, []byte("-----BEGIN "))
		if i < 0 {
			break
		}
		for _, l := range strings.Split(string(b[:i]), "\n") {
			if u, ok := strings.CutPrefix(strings.TrimRight(l, "\r"), tsaLine); ok {
				if url = strings.TrimSpace(u); url == "" {
					return nil, errors.New("a \"tsa:\" line names no URL")
				}
			}
		}
		blk, rest := pem.Decode(b[i:])
		if blk == nil {
			return nil, errors.New("a PEM block does not parse")
		}
		b = rest
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("a certificate does not parse: %w", err)
		}
		if url == "" {
			unnamed = true
		} else {
			named = true
		}
		if n := len(out); n > 0 && out[n-1].URL == url {
			out[n-1].Roots = append(out[n-1].Roots, c)
		} else {
			out = append(out, TSARoots{URL: url, Roots: []*x509.Certificate{c}})
		}
	}
	switch {
	case len(out) == 0:
		return nil, errors.New("holds no PEM certificate")
	case named && unnamed:
		return nil, errors.New("some certificates follow no \"tsa: URL\" line: name the TSA of every root, or of none")
	}
	return out, nil
}
