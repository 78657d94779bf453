package otlp

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestApplyEnv: the exporter's variables fill what the config leaves
// out, the per-signal ones first; a bad value is an error naming the
// variable and not the value.
func TestApplyEnv(t *testing.T) {
	env := envOf(map[string]string{
		"OTEL_EXPORTER_OTLP_HEADERS":        "X-A=1,X-B=two%20words",
		"OTEL_EXPORTER_OTLP_TIMEOUT":        "2500",
		"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "1500",
		"OTEL_EXPORTER_OTLP_COMPRESSION":    "gzip",
	})
	var c Config
	if err := c.ApplyEnv(env, os.ReadFile); err != nil {
		t.Fatal(err)
	}
	if c.Headers["X-A"] != "1" || c.Headers["X-B"] != "two words" || len(c.Headers) != 2 || c.Timeout != 1500*time.Millisecond || !c.Gzip || c.TLS != nil {
		t.Errorf("from the environment: %+v", c)
	}
	c = Config{Headers: map[string]string{"X-Mine": "m"}, Timeout: time.Second}
	env = envOf(map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "X-A=1", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "X-T=t", "OTEL_EXPORTER_OTLP_TIMEOUT": "9"})
	if err := c.ApplyEnv(env, os.ReadFile); err != nil || len(c.Headers) != 1 || c.Timeout != time.Second {
		t.Errorf("the config's own headers and timeout were replaced: %+v, %v", c, err)
	}
	c = Config{}
	if err := c.ApplyEnv(env, os.ReadFile); err != nil || len(c.Headers) != 1 || c.Headers["X-T"] != "t" {
		t.Errorf("TRACES_HEADERS does not win: %+v, %v", c, err)
	}
	for name, v := range map[string]string{
		"OTEL_EXPORTER_OTLP_HEADERS":            "Authorization=Bearer%zzsecret",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS":     "secret-without-key",
		"OTEL_EXPORTER_OTLP_TIMEOUT":            "ten",
		"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "zstd-secret",
		"OTEL_EXPORTER_OTLP_CERTIFICATE":        "/nonexistent/secret.pem",
	} {
		var c Config
		err := c.ApplyEnv(envOf(map[string]string{name: v}), os.ReadFile)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: error %v, want one naming the variable", name, v, err)
		} else if strings.Contains(err.Error(), "secret") && !strings.Contains(name, "CERTIFICATE") {
			t.Errorf("%s: the error carries the value: %v", name, err)
		}
	}
	// A value that decodes to a line break would end the header early.
	c = Config{}
	err := c.ApplyEnv(envOf(map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "X-Key=s3cret%0D%0AX-Other:%201"}), os.ReadFile)
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a header value with a line break: error %v, want one without the value", err)
	}
}

// TestGzipFromEnv: OTEL_EXPORTER_OTLP_COMPRESSION=gzip compresses the
// requests, and the receiver reads them.
func TestGzipFromEnv(t *testing.T) {
	rcv := newReceiver(t)
	c := Config{URL: rcv.url()}
	if err := c.ApplyEnv(envOf(map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}), os.ReadFile); err != nil {
		t.Fatal(err)
	}
	e, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.ExportSpans(context.Background(), testSpans()); err != nil {
		t.Fatal(err)
	}
	bodies, headers := rcv.requests()
	if len(bodies) != 1 || headers[0].Get("Content-Encoding") != "gzip" {
		t.Fatalf("%d requests, Content-Encoding %q", len(bodies), headers[0].Get("Content-Encoding"))
	}
	if td := decode(t, bodies[0]); len(td.ResourceSpans) != 2 {
		t.Errorf("decompressed request: %v", td)
	}
}

// TestTLSFromEnv: an https receiver whose certificate only the roots in
// OTEL_EXPORTER_OTLP_CERTIFICATE vouch for, and that asks for a client
// certificate, takes spans when the variables name them, and the export
// fails without them.
func TestTLSFromEnv(t *testing.T) {
	var peers []int
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peers = append(peers, len(r.TLS.PeerCertificates))
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
		return p
	}
	roots := write("roots.pem", "CERTIFICATE", srv.Certificate().Raw)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	env := envOf(map[string]string{
		"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE":        roots,
		"OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE": write("client.pem", "CERTIFICATE", der),
		"OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY":         write("client.key", "PRIVATE KEY", kder),
	})
	export := func(getenv func(string) string) error {
		c := Config{URL: srv.URL + "/v1/traces", Retry: Retry{Disabled: true}}
		if err := c.ApplyEnv(getenv, os.ReadFile); err != nil {
			t.Fatal(err)
		}
		e, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		return e.ExportSpans(context.Background(), testSpans())
	}
	if err := export(envOf(nil)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the roots: %v", err)
	}
	if err := export(env); err != nil {
		t.Fatalf("with the roots and a client certificate: %v", err)
	}
	if len(peers) != 1 || peers[0] != 1 {
		t.Errorf("client certificates the receiver saw: %v", peers)
	}
}
