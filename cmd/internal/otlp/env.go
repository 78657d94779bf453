package otlp

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/provlog/provlog/log"
)

// ApplyEnv completes c from the OpenTelemetry exporter's environment
// variables where c says nothing, as the SDK's OTLP/HTTP exporter reads
// them; each OTEL_EXPORTER_OTLP_TRACES_X wins over OTEL_EXPORTER_OTLP_X:
//
//   - HEADERS: "key=value,…", values URL-encoded (if c has no headers);
//   - TIMEOUT: milliseconds per request (if c.Timeout is 0);
//   - COMPRESSION: "gzip" or "none" (if c.Gzip is false);
//   - CERTIFICATE: a PEM file of the roots to trust, and
//     CLIENT_CERTIFICATE with CLIENT_KEY: PEM files of a client
//     certificate and its key (if c.TLS is nil).
//
// The endpoint variables do not apply (c.URL is given), nor PROTOCOL: the
// exporter speaks http/protobuf only. A value that does not parse is an
// error naming the variable, never the value (a header may be a secret).
func (c *Config) ApplyEnv(getenv func(string) string, readFile func(string) ([]byte, error)) error {
	get := func(name string) (string, string) {
		for _, n := range []string{"OTEL_EXPORTER_OTLP_TRACES_" + name, "OTEL_EXPORTER_OTLP_" + name} {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return n, v
			}
		}
		return "", ""
	}
	if n, v := get("HEADERS"); v != "" && len(c.Headers) == 0 {
		h, err := parseHeaders(v)
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		c.Headers = h
	}
	if n, v := get("TIMEOUT"); v != "" && c.Timeout == 0 {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return fmt.Errorf("%s: want a positive number of milliseconds", n)
		}
		c.Timeout = time.Duration(ms) * time.Millisecond
	}
	if n, v := get("COMPRESSION"); v != "" && !c.Gzip {
		switch v {
		case "gzip":
			c.Gzip = true
		case "none":
		default:
			return fmt.Errorf("%s: want gzip or none", n)
		}
	}
	if c.TLS != nil {
		return nil
	}
	return c.envTLS(getenv, readFile)
}

// envTLS reads the certificate variables into c.TLS.
func (c *Config) envTLS(getenv func(string) string, readFile func(string) ([]byte, error)) error {
	var t tls.Config
	set := false
	for _, prefix := range []string{"OTEL_EXPORTER_OTLP_", "OTEL_EXPORTER_OTLP_TRACES_"} {
		if f := strings.TrimSpace(getenv(prefix + "CERTIFICATE")); f != "" {
			b, err := readFile(f)
			if err != nil {
				return fmt.Errorf("%sCERTIFICATE: %w", prefix, err)
			}
			p := x509.NewCertPool()
			if !p.AppendCertsFromPEM(b) {
				return fmt.Errorf("%sCERTIFICATE: %s holds no PEM certificate", prefix, f)
			}
			t.RootCAs, set = p, true
		}
		cf, kf := strings.TrimSpace(getenv(prefix+"CLIENT_CERTIFICATE")), strings.TrimSpace(getenv(prefix+"CLIENT_KEY"))
		if cf == "" || kf == "" {
			continue
		}
		cb, err := readFile(cf)
		if err != nil {
			return fmt.Errorf("%sCLIENT_CERTIFICATE: %w", prefix, err)
		}
		kb, err := readFile(kf)
		if err != nil {
			return fmt.Errorf("%sCLIENT_KEY: %w", prefix, err)
		}
		cert, err := tls.X509KeyPair(cb, kb)
		if err != nil {
			return fmt.Errorf("%sCLIENT_CERTIFICATE and %sCLIENT_KEY: %w", prefix, prefix, err)
		}
		t.Certificates, set = []tls.Certificate{cert}, true
	}
	if set {
		c.TLS = &t
	}
	return nil
}

// parseHeaders reads "key=value,…" with URL-encoded values. An error
// names the pair by its place, not by its value.
func parseHeaders(s string) (map[string]string, error) {
	h := map[string]string{}
	for i, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || log.CheckHeaders(map[string]string{k: ""}) != nil {
			return nil, fmt.Errorf("pair %d is not key=value with a header name for its key", i+1)
		}
		v, err := url.PathUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("the value of %s is not URL-encoded", k)
		}
		h[k] = strings.TrimSpace(v)
	}
	return h, log.CheckHeaders(h)
}
