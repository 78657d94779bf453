package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/witnesstest"
)

// TestWitnessCosignatureTimeChecked: a witness cosigns a checkpoint when
// it is submitted, so its cosignature/v1 timestamp says when that was.
// One dated an hour ahead of the clock, or years before the checkpoint
// was submitted (before the log's tree could exist), is refused; one a
// minute off passes. The witness here is the real one, whose valid
// cosignature is re-signed with the chosen timestamp by its own key.
func TestWitnessCosignatureTimeChecked(t *testing.T) {
	ctx := context.Background()
	k := witnesstest.NewKey(t, origin)
	l := witnesstest.NewLog(t, k, "honest")
	tw := newTestWitness(t, "witness.example/w1", k)
	var at atomic.Pointer[time.Time]
	dated := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		tw.w.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK {
			for k, v := range rec.Header() {
				rw.Header()[k] = v
			}
			rw.WriteHeader(rec.Code)
			rw.Write(rec.Body.Bytes())
			return
		}
		req, err := witness.ParseAddCheckpoint(body)
		if err != nil {
			t.Error(err)
			return
		}
		text := req.Checkpoint[:bytes.Index(req.Checkpoint, []byte("\n\n"))+1]
		sig, err := tw.signer.SignAt(text, *at.Load())
		if err != nil {
			t.Error(err)
			return
		}
		raw := binary.BigEndian.AppendUint32(nil, tw.signer.KeyHash())
		io.WriteString(rw, "— "+tw.signer.Name()+" "+base64.StdEncoding.EncodeToString(append(raw, sig...))+"\n")
	}))
	defer dated.Close()
	h, err := NewHTTP(dated.URL, dated.Client())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, tc := range []struct {
		name string
		at   time.Time
		ok   bool
	}{
		{"an hour ahead", now.Add(time.Hour), false},
		{"in 2001", time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{"an hour before the submission", now.Add(-time.Hour), false},
		{"a minute ahead", now.Add(time.Minute), true},
		{"a minute before", now.Add(-time.Minute), true},
	} {
		at.Store(&tc.at)
		_, err := NewWitness(h, tw.signer.Verifier(), l.Store).Cosign(ctx, l.Grow(t, uint64(i+1)))
		switch {
		case tc.ok && err != nil:
			t.Errorf("a cosignature dated %s: %v", tc.name, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "dated")):
			t.Errorf("a cosignature dated %s (%s): error %v, want it refused for its date", tc.name, tc.at.UTC().Format(time.RFC3339), err)
		}
	}
}
