package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/witness/witnesstest"
)

// TestHealthNotOKWithNothingCosigned: the sidecar's one witness (policy
// 1 of 1) answers every add-checkpoint with a valid cosignature spelled
// with a base64 spare bit set. The Cosigner refuses each answer, nothing
// is cosigned, and /healthz reports witness_policy_not_met: health says
// whether a checkpoint meeting the policy is held, not whether witnesses
// answered (witness/client TestOneWitnessSpellingDoesNotBlockPolicy).
func TestHealthNotOKWithNothingCosigned(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	data := filepath.Join(t.TempDir(), "data")
	k := mustKeygen(t, data, "provlog.example/sloppy")
	s := witnesstest.NewCosigner(t, "witness.example/w1")
	w := logWitness(t, s, k.verifier)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		w.ServeHTTP(rec, r)
		body := []byte(rec.Body.String())
		if rec.Code == http.StatusOK {
			i := strings.Index(string(body), "==\n") - 1
			body[i] = alphabet[strings.IndexByte(alphabet, body[i])^1]
		} else {
			for k, v := range rec.Header() {
				rw.Header()[k] = v
			}
			rw.WriteHeader(rec.Code)
		}
		rw.Write(body)
	}))
	defer srv.Close()
	sc := mustOpenSidecar(t, &Config{Data: data, Actor: "local",
		Witnesses:     []WitnessConfig{{URL: srv.URL, VKey: s.Verifier().String()}},
		WitnessPolicy: WitnessPolicyConfig{Threshold: 1, Interval: 20 * time.Millisecond}})
	defer sc.close()
	if _, err := sc.seq.Append(context.Background(), callEntry("s", "t", map[string]any{"i": 1})); err != nil {
		t.Fatal(err)
	}
	proctest.WaitFor(t, "the witness answered", func() bool {
		st := sc.witness.cos.Status().Witnesses[0]
		return !st.LastSuccess.IsZero() || st.LastError != ""
	})
	if sc.witness.cos.Latest() != nil {
		t.Skip("a checkpoint was cosigned: not the case probed")
	}
	for _, p := range sc.problems() {
		if p.Reason == reasonWitness {
			return // reported: what should happen
		}
	}
	t.Errorf("nothing is cosigned (Latest nil, status %+v), yet health reports no %s", sc.witness.cos.Status(), reasonWitness)
}
