package anchor_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestVerifierDependencies holds the offline half of anchoring (anchor,
// its rfc3161 and rekor checks, evidence) to what a regulator's verifier
// needs: the standard library without net/http, merkle, x/mod, the pkcs7
// and timestamp parsers, and provlog's log packages. The runner and the
// TSA and Rekor clients (net/http) are in anchor/online, which no
// verifier imports.
func TestVerifierDependencies(t *testing.T) {
	const mod = "github.com/provlog/provlog"
	allowed := []string{"github.com/transparency-dev/merkle", "golang.org/x/mod/", "github.com/digitorus/pkcs7", "github.com/digitorus/timestamp", mod + "/log"}
	for _, pkg := range []string{"anchor", "anchor/rfc3161", "anchor/rekor", "anchor/evidence"} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", mod+"/"+pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 3 {
			t.Fatalf("go list %s found only %v", pkg, deps)
		}
		for _, d := range deps {
			ok := d == mod+"/anchor" || strings.HasPrefix(d, mod+"/anchor/") && !strings.HasPrefix(d, mod+"/anchor/online")
			for _, a := range allowed {
				ok = ok || strings.HasPrefix(d, a)
			}
			if !ok {
				t.Errorf("%s depends on %s: a verifier imports only the offline half", pkg, d)
			}
		}
		std, err := exec.Command("go", "list", "-deps", mod+"/"+pkg).Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range strings.Fields(string(std)) {
			if d == "net/http" {
				t.Errorf("%s depends on net/http: the offline half speaks to no network", pkg)
			}
		}
	}
}
