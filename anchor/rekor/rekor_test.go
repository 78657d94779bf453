package rekor_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sigstore/rekor/pkg/generated/models"
	"github.com/sigstore/rekor/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/anchor/rekor"
)

func digestOf(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestUploadAccepted(t *testing.T) {
	fr := fakerekor.New(t)
	key := newKey(t)
	c := &online.RekorClient{URL: fr.URL, PublicKey: fr.PublicKey, Signer: key}
	ctx := context.Background()
	for i := range 3 {
		d := digestOf(string(rune('a' + i)))
		e, err := c.Upload(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		if e.LogIndex != int64(i) || e.URL != fr.URL || len(e.UUID) != 80 {
			t.Errorf("entry %d = %+v", i, e)
		}
		// The fake is faithful: rekor's own verifier accepts its entries.
		var le models.LogEntryAnon
		if err := json.Unmarshal(e.Entry, &le); err != nil {
			t.Fatal(err)
		}
		v, _ := signature.LoadVerifier(fr.PublicKey, crypto.SHA256)
		if err := verify.VerifyLogEntry(ctx, &le, v); err != nil {
			t.Errorf("rekor's VerifyLogEntry: %v", err)
		}
		if err := e.Check(ctx, d, &key.PublicKey, []crypto.PublicKey{fr.PublicKey}); err != nil {
			t.Errorf("Check: %v", err)
		}
	}
}

func TestUploadRefused(t *testing.T) {
	fr := fakerekor.New(t)
	fr.SetDelay(2 * time.Second)
	for _, tc := range []struct {
		fault fakerekor.Fault
		want  string
	}{
		{fakerekor.Down, "503"},
		{fakerekor.Slow, "deadline exceeded"},
		{fakerekor.Garbage, "creating Rekor entry"},
		{fakerekor.OtherDigest, "not our digest"},
		{fakerekor.OtherLogKey, "Rekor checkpoint does not verify"},
		{fakerekor.BadSET, "signed entry timestamp"},
		{fakerekor.BadProof, "inclusion proof does not verify"},
		{fakerekor.NoProof, "no inclusion proof"},
		{fakerekor.OtherSize, "Rekor checkpoint does not verify: signed checkpoint is of tree size"},
		{fakerekor.OtherOrigin, "origin"},
	} {
		fr.SetFault(tc.fault)
		c := &online.RekorClient{URL: fr.URL, PublicKey: fr.PublicKey, Signer: newKey(t)}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		e, err := c.Upload(ctx, digestOf("checkpoint"))
		cancel()
		if err == nil {
			t.Errorf("fault %d: accepted %+v", tc.fault, e)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("fault %d: error %q does not mention %q", tc.fault, err, tc.want)
		}
	}
	// An unpinned Rekor: a valid entry, but under a key we do not trust.
	fr.SetFault(fakerekor.OK)
	c := &online.RekorClient{URL: fr.URL, PublicKey: newKey(t).Public(), Signer: newKey(t)}
	if _, err := c.Upload(context.Background(), digestOf("checkpoint")); err == nil || !strings.Contains(err.Error(), "not that of a trusted Rekor key") {
		t.Errorf("entry from an unpinned Rekor: err = %v", err)
	}
}

func TestCheckRefusesTampering(t *testing.T) {
	fr := fakerekor.New(t)
	key := newKey(t)
	c := &online.RekorClient{URL: fr.URL, PublicKey: fr.PublicKey, Signer: key}
	ctx := context.Background()
	d := digestOf("checkpoint")
	// A few entries first, so the proof has hashes to tamper with.
	for i := range 5 {
		if _, err := c.Upload(ctx, digestOf(string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	e, err := c.Upload(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	keys := []crypto.PublicKey{fr.PublicKey}
	if err := e.Check(ctx, digestOf("another"), &key.PublicKey, keys); err == nil || !strings.Contains(err.Error(), "not our digest") {
		t.Errorf("another digest: %v", err)
	}
	if err := e.Check(ctx, d, newKey(t).Public(), keys); err == nil || !strings.Contains(err.Error(), "another key") {
		t.Errorf("another anchoring key: %v", err)
	}
	if err := e.Check(ctx, d, &key.PublicKey, []crypto.PublicKey{newKey(t).Public()}); err == nil {
		t.Error("accepted under another Rekor key")
	}
	for _, f := range []func(*rekor.Entry){
		func(e *rekor.Entry) { e.LogIndex++ },
		func(e *rekor.Entry) { e.IntegratedTime++ },
		func(e *rekor.Entry) { // a different last hex digit (one that is "0" half the time was a flake)
			last := "0"
			if e.UUID[79] == '0' {
				last = "1"
			}
			e.UUID = e.UUID[:79] + last
		},
		func(e *rekor.Entry) { e.PublicKey = e.PublicKey[:len(e.PublicKey)-1] },
	} {
		c := *e
		f(&c)
		if err := c.Check(ctx, d, &key.PublicKey, keys); err == nil {
			t.Errorf("tampered stored fields accepted: %+v", c)
		}
	}
	// Every single-byte change of the stored entry JSON is refused, or
	// leaves it meaning the same (JSON whitespace and key case are not
	// signed: encoding/json matches keys case-insensitively).
	refused := 0
	for i := range e.Entry {
		c := *e
		c.Entry = append(json.RawMessage{}, e.Entry...)
		c.Entry[i] ^= 0x01
		if err := c.Check(ctx, d, &key.PublicKey, keys); err != nil {
			refused++
		}
	}
	if refused < len(e.Entry)*9/10 {
		t.Errorf("only %d of %d single-byte changes of the entry refused", refused, len(e.Entry))
	}
}

// TestUploadURLWithQuery: a Rekor whose URL carries a query (an API key
// a gateway in front of it wants) gets the entry at its API path, with
// the query kept. Before, the path was appended after the query
// (/?api_key=K/api/v1/log/entries): the POST went to / and was refused.
func TestUploadURLWithQuery(t *testing.T) {
	fr := fakerekor.New(t)
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+" ? "+r.URL.RawQuery)
		mu.Unlock()
		fr.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	for _, base := range []string{srv.URL + "/?api_key=K1", srv.URL + "?api_key=K2"} {
		c := &online.RekorClient{URL: base, PublicKey: fr.PublicKey, Signer: newKey(t)}
		if _, err := c.Upload(context.Background(), digestOf(base)); err != nil {
			t.Errorf("Upload to %s: %v", base, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"/api/v1/log/entries ? api_key=K1", "/api/v1/log/entries ? api_key=K2"}
	if !slices.Equal(seen, want) {
		t.Errorf("requests %q, want %q", seen, want)
	}
}

// TestResolvedRekorURLKeepsQuery: an anchors: rekor url whose query ends
// in a slash (an API key in base64 may) reaches Rekor with its query as
// written. Before, Resolve trimmed trailing slashes off the whole URL,
// cutting the key's last character.
func TestResolvedRekorURLKeepsQuery(t *testing.T) {
	fr := fakerekor.New(t)
	seen := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.URL.Path + " ? " + r.URL.RawQuery
		fr.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg := online.Config{Rekor: &online.RekorConfig{URL: srv.URL + "/?api_key=a+b/", PublicKey: string(fr.PublicKeyPEM())}}
	res, err := cfg.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &online.RekorClient{URL: res.Rekor.URL, PublicKey: res.Rekor.PublicKey, Signer: newKey(t)}
	if _, err := c.Upload(context.Background(), digestOf("q")); err != nil {
		t.Error(err)
	}
	if got, want := <-seen, "/api/v1/log/entries ? api_key=a+b/"; got != want {
		t.Errorf("Rekor was asked at %q, want %q", got, want)
	}
}
