// Package realsvc starts the real anchoring services for tests, on
// loopback ports: sigstore's timestamp-server v2.1.3 (memory signer) and
// sigstore's rekor-server v1.5.4 in front of Trillian v1.7.3 in memory
// (tools/rekorlocal). tools/anchortest/install.sh builds them and prints
// the variables naming them; without them a test is skipped, or failed
// when CI=true.
//
// Test code only; nothing in the product imports it.
package realsvc

import (
	"bufio"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/anchor/anchortest/testtsa"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// Environment variables naming the binaries.
const (
	EnvTimestampServer = "PROVLOG_TIMESTAMP_SERVER"
	EnvRekorServer     = "PROVLOG_REKOR_SERVER"
	EnvTrillianHelper  = "PROVLOG_TRILLIAN_HELPER"
)

func binary(t testing.TB, env string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		testtsa.Missing(t, "%s is not set", env)
	}
	if _, err := os.Stat(p); err != nil {
		testtsa.Missing(t, "%s=%s: %v", env, p, err)
	}
	return p
}

// start runs a process until the test ends; its output is logged if the
// test fails.
func start(t testing.TB, name string, stdout io.Writer, bin string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out := &proctest.Buffer{Limit: 1 << 20}
	cmd.Stderr = out
	cmd.Stdout = out
	if stdout != nil {
		cmd.Stdout = io.MultiWriter(out, stdout)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, tail(out.String(), 4000))
		}
	})
	return cmd
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// waitHTTP polls url until it answers 200.
func waitHTTP(t testing.TB, what, url string, cmd *exec.Cmd) []byte {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if cmd.ProcessState != nil {
			t.Fatalf("%s exited", what)
		}
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return b
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s did not answer at %s", what, url)
	return nil
}

// TimestampServer starts sigstore's timestamp-server with a memory signer
// (a fresh chain each start) and returns its time-stamp URL, the root of
// its chain and the intermediates (its tokens carry only the leaf).
func TimestampServer(t testing.TB) (url string, root *x509.Certificate, intermediates []*x509.Certificate) {
	t.Helper()
	bin := binary(t, EnvTimestampServer)
	port := proctest.FreePort(t)
	cmd := start(t, "timestamp-server", nil, bin, "serve", "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--timestamp-signer", "memory", "--disable-ntp-monitoring")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	chain := waitHTTP(t, "timestamp-server", base+"/api/v1/timestamp/certchain", cmd)
	var certs []*x509.Certificate
	for {
		var blk *pem.Block
		blk, chain = pem.Decode(chain)
		if blk == nil {
			break
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		t.Fatal("timestamp-server gave no certificate chain")
	}
	return base + "/api/v1/timestamp", certs[len(certs)-1], certs[1 : len(certs)-1]
}

// Rekor starts the Trillian helper and rekor-server in front of it, with
// a P-256 signing key made here, and returns Rekor's URL and public key.
func Rekor(t testing.TB) (url string, pub crypto.PublicKey) {
	t.Helper()
	helper := binary(t, EnvTrillianHelper)
	rekorBin := binary(t, EnvRekorServer)

	pr, pw := io.Pipe()
	start(t, "rekorlocal", pw, helper)
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "trillian "); ok {
				addr <- a
				break
			}
		}
		io.Copy(io.Discard, pr)
	}()
	var trillian string
	select {
	case trillian = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatal("rekorlocal did not print its address")
	}
	host, tport, err := net.SplitHostPort(trillian)
	if err != nil {
		t.Fatal(err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	keyFile := filepath.Join(t.TempDir(), "rekor-key.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	port := proctest.FreePort(t)
	cmd := start(t, "rekor-server", nil, rekorBin, "serve",
		"--trillian_log_server.address="+host, "--trillian_log_server.port="+tport,
		"--rekor_server.address=127.0.0.1", "--port="+strconv.Itoa(port),
		"--rekor_server.signer="+keyFile, "--rekor_server.hostname=rekor.local",
		"--enable_retrieve_api=false",
		"--enabled_api_endpoints=getLogInfo,getPublicKey,getLogProof,createLogEntry,getLogEntryByIndex,getLogEntryByUUID",
		"--log_type=prod")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHTTP(t, "rekor-server", base+"/api/v1/log", cmd)
	return base, key.Public()
}
