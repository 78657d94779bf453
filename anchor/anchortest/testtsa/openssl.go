package testtsa

import (
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Missing skips the test because a real component is not available, or
// fails it when CI=true: CI must run every real-component test.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: real components are required; run eval \"$(bash tools/anchortest/install.sh)\")", msg)
	}
	t.Skipf("%s; run eval \"$(bash tools/anchortest/install.sh)\" to test against it", msg)
}

// opensslConf is an OpenSSL TSA configuration (research/anchoring.md §2a).
const opensslConf = `[ req ]
distinguished_name = dn
prompt = no
[ dn ]
CN = placeholder

[ v3_ca ]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash

[ v3_tsa ]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = critical,timeStamping
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always

[ tsa ]
default_tsa = tsa_config1

[ tsa_config1 ]
dir = .
serial = $dir/tsaserial
crypto_device = builtin
signer_cert = $dir/tsa.crt
certs = $dir/ca.crt
signer_key = $dir/tsa.key
signer_digest = sha256
default_policy = 1.2.3.4.1
other_policies = 1.2.3.4.5.6
digests = sha256, sha384, sha512
accuracy = secs:1
ordering = no
tsa_name = yes
ess_cert_id_chain = no
ess_cert_id_alg = sha256
`

// OpenSSL is a TSA that runs `openssl ts -reply` for every request, behind
// a loopback HTTP server.
type OpenSSL struct {
	URL    string
	Dir    string // holds tsa.cnf, ca.crt, tsa.crt and the keys
	Roots  []*x509.Certificate
	mu     sync.Mutex
	served int
}

// NewOpenSSL makes a P-256 root and TSA certificate with openssl and
// starts the TSA; it stops when the test ends. Without an openssl binary
// the test is skipped (failed under CI=true).
func NewOpenSSL(t testing.TB) *OpenSSL {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		Missing(t, "openssl is not installed")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tsa.cnf"), []byte(opensslConf), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "ca.key"},
		{"req", "-config", "tsa.cnf", "-new", "-x509", "-key", "ca.key", "-subj", "/CN=OpenSSL Test TSA Root", "-days", "3650", "-extensions", "v3_ca", "-out", "ca.crt"},
		{"ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "tsa.key"},
		{"req", "-config", "tsa.cnf", "-new", "-key", "tsa.key", "-subj", "/CN=OpenSSL Test TSA", "-out", "tsa.csr"},
		{"x509", "-req", "-in", "tsa.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "825", "-extfile", "tsa.cnf", "-extensions", "v3_tsa", "-out", "tsa.crt"},
	} {
		if out, err := runOpenSSL(dir, args...); err != nil {
			t.Fatalf("openssl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "tsaserial"), []byte("01\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root, err := readCert(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	o := &OpenSSL{Dir: dir, Roots: []*x509.Certificate{root}}
	srv := httptest.NewServer(o)
	t.Cleanup(srv.Close)
	o.URL = srv.URL + "/tsa"
	return o
}

// ServeHTTP answers one time-stamp query with `openssl ts -reply`.
func (o *OpenSSL) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/timestamp-query" {
		http.Error(w, "POST an application/timestamp-query", http.StatusBadRequest)
		return
	}
	q, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// One at a time: openssl updates the serial file in place.
	o.mu.Lock()
	defer o.mu.Unlock()
	o.served++
	qf := filepath.Join(o.Dir, fmt.Sprintf("q%d.tsq", o.served))
	rf := filepath.Join(o.Dir, fmt.Sprintf("r%d.tsr", o.served))
	if err := os.WriteFile(qf, q, 0o600); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if out, err := runOpenSSL(o.Dir, "ts", "-reply", "-config", "tsa.cnf", "-queryfile", qf, "-out", rf); err != nil {
		http.Error(w, fmt.Sprintf("openssl ts -reply: %v: %s", err, out), http.StatusInternalServerError)
		return
	}
	resp, err := os.ReadFile(rf)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/timestamp-reply")
	w.Write(resp)
}

// OpenSSLVerify runs `openssl ts -verify` on a DER TimeStampToken over a
// SHA-256 digest, trusting only root, with chain (signer first) offered as
// untrusted certificates. It returns openssl's output and an error unless
// openssl says "Verification: OK".
func OpenSSLVerify(t testing.TB, token, digest []byte, chain [][]byte, root *x509.Certificate) (string, error) {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		Missing(t, "openssl is not installed")
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var untrusted []byte
	for _, c := range chain {
		untrusted = append(untrusted, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c})...)
	}
	args := []string{"ts", "-verify", "-token_in", "-in", write("token.der", token),
		"-digest", hex.EncodeToString(digest),
		"-CAfile", write("root.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Raw}))}
	if len(untrusted) > 0 {
		args = append(args, "-untrusted", write("chain.pem", untrusted))
	}
	out, err := runOpenSSL(dir, args...)
	if err != nil {
		return out, fmt.Errorf("openssl ts -verify: %w", err)
	}
	if !strings.Contains(out, "Verification: OK") {
		return out, fmt.Errorf("openssl ts -verify did not say OK")
	}
	return out, nil
}

func runOpenSSL(dir string, args ...string) (string, error) {
	cmd := exec.Command("openssl", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func readCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("%s: no PEM certificate", path)
	}
	return x509.ParseCertificate(blk.Bytes)
}
