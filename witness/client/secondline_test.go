package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/witness/witnesstest"
)

// forgedTwin returns a signature line by the same name and key ID as
// line, whose signature bytes are altered (canonical base64, so
// log.OpenNote's spelling check passes).
func forgedTwin(line string) string {
	prefix, b64, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	name, b64, _ := strings.Cut(b64, " ")
	raw, _ := base64.StdEncoding.DecodeString(b64)
	raw[len(raw)-1] ^= 0xff
	raw[12] ^= 0xff
	return prefix + " " + name + " " + base64.StdEncoding.EncodeToString(raw) + "\n"
}

// TestWitnessSecondForgedLine: a hostile witness answers add-checkpoint
// with its valid cosignature line followed by a second line by the same
// name and key ID whose signature is forged. note.Open would drop the
// second line unchecked; Witness.verify refuses the answer, so neither
// Cosign nor the Cosigner's Latest (which the sidecar saves and hands out
// in every receipt) ever carries a line that does not verify.
func TestWitnessSecondForgedLine(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := witnesstest.NewKey(t, origin)
	l := witnesstest.NewLog(t, k, "honest")
	good := newTestWitness(t, "witness.example/w1", k)
	hostile := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		good.w.ServeHTTP(rec, r)
		body := rec.Body.String()
		if rec.Code == http.StatusOK {
			body += forgedTwin(body)
		}
		for k, v := range rec.Header() {
			if k != "Content-Length" {
				rw.Header()[k] = v
			}
		}
		rw.WriteHeader(rec.Code)
		rw.Write([]byte(body))
	}))
	defer hostile.Close()
	h, err := NewHTTP(hostile.URL, hostile.Client())
	if err != nil {
		t.Fatal(err)
	}
	wv := good.signer.Verifier()
	cp := l.Grow(t, 5)
	lines, err := NewWitness(h, wv, l.Store).Cosign(ctx, cp)
	if err == nil && bytes.Count(lines, []byte("\n")) != 1 {
		t.Errorf("Cosign accepted an answer with a forged second line by the witness's key and returned %d lines:\n%s", bytes.Count(lines, []byte("\n")), lines)
	}

	c, err := NewCosigner(CosignerOptions{Log: k.Verifier, Witnesses: []*Witness{NewWitness(h, wv, l.Store)}, Threshold: 1, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	go c.Run(ctx)
	c.Submit(l.Grow(t, 7))
	proctest.WaitFor(t, "a cosigned checkpoint, or the witness's failure", func() bool {
		return c.Latest() != nil || c.Status().Witnesses[0].LastError != ""
	})
	latest := c.Latest()
	if latest == nil {
		return // refused: what should happen
	}
	// Every signature line of what the sidecar hands out must verify.
	i := bytes.LastIndex(latest, []byte("\n\n"))
	text := latest[:i+2]
	for _, line := range strings.SplitAfter(string(latest[i+2:]), "\n") {
		if line == "" {
			continue
		}
		v := note.Verifier(k.Verifier)
		if strings.HasPrefix(line, "— "+wv.Name()+" ") {
			v = wv
		}
		if _, err := note.Open(append(bytes.Clone(text), line...), note.VerifierList(v)); err != nil {
			t.Errorf("Latest (the sidecar's cosigned checkpoint) carries a line that does not verify: %q: %v", line, err)
		}
	}
	if _, _, err := log.OpenWitnessedCheckpoint(latest, k.Verifier, log.WitnessPolicy{Witnesses: []note.Verifier{wv}, Threshold: 1}); err == nil && t.Failed() {
		t.Errorf("and log.OpenWitnessedCheckpoint accepts it:\n%s", latest)
	}
}
