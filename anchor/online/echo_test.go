package online

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRefusalCutsURLCredentials: a TSA or a Rekor whose refusal quotes
// the credentials its URL gave the request (basic auth, an API key in the
// query) does not get them into the error, which the sidecar logs and
// reports: they are cut out of the body's text quoted there.
func TestRefusalCutsURLCredentials(t *testing.T) {
	const pass, key = "S3CRET-pass-3e7d", "S3CRET-key-b02c"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte("no account for " + r.Header.Get("Authorization") + " at " + r.URL.String()))
	}))
	t.Cleanup(srv.Close)
	u := strings.Replace(srv.URL, "http://", "http://anchoruser:"+pass+"@", 1) + "/?api_key=" + key
	signer, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte("checkpoint"))
	_, tsaErr := (&TSAClient{URL: u}).Timestamp(context.Background(), digest[:])
	_, rekorErr := (&RekorClient{URL: u, PublicKey: signer.Public(), Signer: signer}).Upload(context.Background(), digest[:])
	for name, err := range map[string]error{"tsa": tsaErr, "rekor": rekorErr} {
		if err == nil || !strings.Contains(err.Error(), "no account for") {
			t.Fatalf("%s: %v, want the refusal quoted", name, err)
		}
		for _, s := range []string{pass, key, base64.StdEncoding.EncodeToString([]byte("anchoruser:" + pass))} { // the last: basic auth's
			if strings.Contains(err.Error(), s) {
				t.Errorf("%s: the error quotes %q: %v", name, s, err)
			}
		}
	}
}
