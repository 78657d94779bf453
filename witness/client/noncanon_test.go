package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/witness/witnesstest"
)

// TestOneWitnessSpellingDoesNotBlockPolicy: a 2-of-3 policy; w3 is
// hostile (or merely sloppy) and answers with its valid cosignature
// written with the base64 spare bits of its last character set, a
// spelling log.OpenWitnessedCheckpoint refuses. w3's answer is refused and
// w3 counts as failing, and once w1 and w2 cosign their checkpoint becomes
// Latest: one witness holds up nothing but itself.
func TestOneWitnessSpellingDoesNotBlockPolicy(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := witnesstest.NewKey(t, origin)
	l := witnesstest.NewLog(t, k, "honest")
	w1 := newTestWitness(t, "witness.example/w1", k)
	w2 := newTestWitness(t, "witness.example/w2", k)
	w3 := newTestWitness(t, "witness.example/w3", k)
	hold := make(chan struct{})
	w1.hold.Store(&hold)
	w2.hold.Store(&hold)
	released := false
	release := func() {
		if !released {
			released = true
			w1.hold.Store(nil)
			w2.hold.Store(nil)
			close(hold)
		}
	}
	defer release()
	var answered atomic.Int64
	sloppy := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		w3.w.ServeHTTP(rec, r)
		body := []byte(rec.Body.String())
		if rec.Code == http.StatusOK {
			// A cosignature/v1 line holds 4+8+64 = 76 bytes: base64
			// ending in one byte and "==", whose last data character has 4
			// spare bits; flip one.
			i := strings.LastIndexAny(string(body), alphabet)
			for body[i+1] != '=' && body[i] != '=' {
				i--
			}
			body[i] = alphabet[strings.IndexByte(alphabet, body[i])^1]
		} else {
			for k, v := range rec.Header() {
				rw.Header()[k] = v
			}
			rw.WriteHeader(rec.Code)
		}
		rw.Write(body)
		answered.Add(1)
	}))
	defer sloppy.Close()
	h3, _ := NewHTTP(sloppy.URL, sloppy.Client())
	c, err := NewCosigner(CosignerOptions{
		Log:       k.Verifier,
		Witnesses: []*Witness{w1.client(t, l), w2.client(t, l), NewWitness(h3, w3.signer.Verifier(), l.Store)},
		Threshold: 2,
		Interval:  10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	go c.Run(ctx)
	c.Submit(l.Grow(t, 5))
	proctest.WaitFor(t, "w3 answered", func() bool { return answered.Load() > 0 })
	proctest.WaitFor(t, "w3's answer taken", func() bool {
		st := c.Status().Witnesses[2]
		return !st.LastSuccess.IsZero() || st.LastError != ""
	})
	release()
	proctest.WaitFor(t, "w1 and w2 cosigned", func() bool {
		st := c.Status()
		return !st.Witnesses[0].LastSuccess.IsZero() && !st.Witnesses[1].LastSuccess.IsZero()
	})
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && c.Latest() == nil; time.Sleep(10 * time.Millisecond) {
	}
	if c.Latest() == nil {
		t.Errorf("w1 and w2 cosigned (threshold 2), but nothing became Latest: one witness's spelling of its cosignature holds up the policy; status %+v", c.Status())
	}
	if st := c.Status().Witnesses[2]; st.LastError == "" || !st.LastSuccess.IsZero() {
		t.Errorf("w3's non-canonical cosignature was taken: %+v", st)
	}
	if strings.Contains(string(c.Latest()), "— witness.example/w3 ") {
		t.Errorf("Latest carries w3's line:\n%s", c.Latest())
	}
}
