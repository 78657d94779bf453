package anchor_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
	"github.com/provlog/provlog/anchor/anchortest/testtsa"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/log/server"
)

// env is a log with its sequencer, an anchoring key, and authorities.
type env struct {
	t        testing.TB
	store    *logtest.Memory
	seq      *server.Sequencer
	verifier note.Verifier
	key      *ecdsa.PrivateKey
	records  *anchor.Store
	tsas     []*testtsa.TSA
	rekor    *fakerekor.Rekor
	cfg      *online.Config
	resolved *online.Resolved
}

// newLog makes an in-memory log whose genesis names the anchoring key.
func newLog(t testing.TB, store log.Storage) (*server.Sequencer, note.Verifier, *ecdsa.PrivateKey) {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, "provlog.test/anchor")
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := note.NewSigner(skey)
	verifier, _ := note.NewVerifier(vkey)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	seq, err := server.OpenSequencer(context.Background(), store, signer, verifier, &server.SequencerOptions{
		Genesis: func() ([]byte, error) { return log.Genesis(time.Now(), signer.Name(), vkey, pub, "test") },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seq.Close() })
	return seq, verifier, key
}

// newEnv starts nTSA in-process TSAs and, if withRekor, a fake Rekor, and
// a log with a few entries.
func newEnv(t testing.TB, nTSA int, withRekor bool) *env {
	t.Helper()
	e := &env{t: t, store: logtest.NewMemory()}
	e.seq, e.verifier, e.key = newLog(t, e.store)
	e.cfg = &online.Config{Interval: time.Minute, Timeout: 500 * time.Millisecond}
	for i := range nTSA {
		tsa := testtsa.New(t, fmt.Sprintf("TSA %d", i))
		tsa.SetDelay(2 * time.Second)
		e.tsas = append(e.tsas, tsa)
		e.cfg.TSA = append(e.cfg.TSA, online.TSAConfig{URL: tsa.URL, Roots: []string{certPEM(tsa.PKI.Root)}})
	}
	if withRekor {
		e.rekor = fakerekor.New(t)
		e.rekor.SetDelay(2 * time.Second)
		e.cfg.Rekor = &online.RekorConfig{URL: e.rekor.URL, PublicKey: string(e.rekor.PublicKeyPEM())}
	}
	var err error
	if nTSA > 0 || withRekor {
		if e.resolved, err = e.cfg.Resolve(nil); err != nil {
			t.Fatal(err)
		}
	}
	if e.records, err = anchor.OpenStore(filepath.Join(t.TempDir(), "anchors")); err != nil {
		t.Fatal(err)
	}
	e.appendN(3)
	return e
}

func certPEM(c *x509.Certificate) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
}

func (e *env) appendN(n int) {
	e.t.Helper()
	for i := range n {
		b, err := (&log.Entry{Kind: log.KindCall, Time: time.Now(), Actor: "test", Fields: map[string]any{"n": i}}).Marshal()
		if err != nil {
			e.t.Fatal(err)
		}
		if _, err := e.seq.Append(context.Background(), b); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) size() uint64 {
	n, _ := e.seq.Checkpoint()
	return n
}

func (e *env) runner(mod func(*online.Options)) *online.Runner {
	e.t.Helper()
	o := online.Options{
		Config:     e.resolved,
		Log:        e.seq,
		Tree:       e.store,
		Records:    e.records,
		Signer:     e.key,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		MinBackoff: 20 * time.Millisecond,
		MaxBackoff: 200 * time.Millisecond,
	}
	if mod != nil {
		mod(&o)
	}
	r, err := online.NewRunner(context.Background(), o)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) audit() (*anchor.AuditReport, error) {
	return anchor.AuditAll(context.Background(), e.records.Dir(), anchor.AuditOptions{
		Verifier:  e.verifier,
		AnchorKey: &e.key.PublicKey,
		Trust:     e.resolved.Trust,
		Log:       e.store,
		Size:      e.size(),
	})
}

func (e *env) records_() []*anchor.Stored {
	e.t.Helper()
	l, err := e.records.List()
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

// anchorEntries returns the anchor entries in the log.
func (e *env) anchorEntries() []*log.AnchorEntry {
	e.t.Helper()
	entries, err := e.store.Entries(context.Background(), 0, e.size())
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*log.AnchorEntry
	for _, b := range entries {
		le, err := log.ParseEntry(b)
		if err != nil {
			e.t.Fatal(err)
		}
		if le.Kind != log.KindAnchor {
			continue
		}
		f, err := log.ParseAnchorEntry(le)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}
