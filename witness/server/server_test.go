package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/witnesspebble"
	"github.com/provlog/provlog/witness/witnesstest"
)

const (
	originA = "log.example/a"
	originB = "log.example/b"
)

type fixture struct {
	w      *Witness
	signer *log.CosignatureSigner
	store  witness.Store
	a, b   *witnesstest.Log // logs originA and originB
	forks  chan *witness.Evidence
	srv    *httptest.Server
}

func newFixture(t testing.TB, store witness.Store) *fixture {
	t.Helper()
	f := &fixture{
		signer: witnesstest.NewCosigner(t, "witness.example/w"),
		store:  store,
		a:      witnesstest.NewLog(t, witnesstest.NewKey(t, originA), "a"),
		b:      witnesstest.NewLog(t, witnesstest.NewKey(t, originB), "b"),
		forks:  make(chan *witness.Evidence, 100),
	}
	f.w = f.newWitness(t)
	f.srv = httptest.NewServer(f.w)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) newWitness(t testing.TB) *Witness {
	t.Helper()
	w, err := New(Options{
		Signer: f.signer,
		Logs: []Log{
			{Origin: originA, Verifiers: []note.Verifier{f.a.Key.Verifier}},
			{Origin: originB, Verifiers: []note.Verifier{f.b.Key.Verifier}},
		},
		Store:  f.store,
		OnFork: func(e *witness.Evidence) { f.forks <- e },
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// post sends a request body and returns status, content type and body.
func (f *fixture) post(t testing.TB, body string) (int, string, string) {
	t.Helper()
	resp, err := http.Post(f.srv.URL+"/add-checkpoint", "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func request(t testing.TB, l *witnesstest.Log, old, size uint64) string {
	t.Helper()
	l.Grow(t, size)
	var p [][]byte
	if old > 0 && old < size {
		var err error
		if p, err = log.ProveConsistency(context.Background(), l.Store, old, size); err != nil {
			t.Fatal(err)
		}
	}
	return (&witness.AddCheckpointRequest{OldSize: old, Proof: p, Checkpoint: l.Checkpoint(t, size)}).String()
}

// withBody replaces the checkpoint of a request body.
func withCheckpoint(body string, cp []byte) string {
	i := strings.Index(body, "\n\n")
	return body[:i+2] + string(cp)
}

func signWith(t testing.TB, s note.Signer, origin string, size uint64, root []byte) []byte {
	t.Helper()
	msg, err := note.Sign(&note.Note{Text: log.Checkpoint{Origin: origin, Size: size, Hash: root}.String()}, s)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// corruptSignature flips a bit in the last signature of a signed note,
// keeping the line well-formed.
func corruptSignature(t testing.TB, msg []byte) []byte {
	t.Helper()
	s := strings.TrimSuffix(string(msg), "\n")
	i := strings.LastIndex(s, " ")
	sig, err := base64.StdEncoding.DecodeString(s[i+1:])
	if err != nil {
		t.Fatal(err)
	}
	sig[len(sig)-1] ^= 1
	return []byte(s[:i+1] + base64.StdEncoding.EncodeToString(sig) + "\n")
}

// checkCosignature checks a 200 response body: cosignature lines by the
// witness over the request's checkpoint.
func (f *fixture) checkCosignature(t *testing.T, body, sigs string) {
	t.Helper()
	req, err := witness.ParseAddCheckpoint([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(append(req.Checkpoint, sigs...), note.VerifierList(f.signer.Verifier()))
	if err != nil {
		t.Fatalf("cosignature %q does not verify: %v", sigs, err)
	}
	ts, err := log.CosignatureTime(n.Sigs[0])
	if err != nil || time.Since(ts) > time.Minute {
		t.Errorf("cosignature time %v, %v", ts, err)
	}
}

func TestStatusCodes(t *testing.T) {
	f := newFixture(t, witnesstest.NewStore())
	ctx := context.Background()

	// First cosignature of A at size 10, from nothing.
	status, _, body := f.post(t, request(t, f.a, 0, 10))
	if status != http.StatusOK {
		t.Fatalf("first add-checkpoint: %d %s", status, body)
	}
	good := request(t, f.a, 10, 17)
	cp17 := f.a.Checkpoint(t, 17)
	c17, _ := log.ParseCheckpointNote(cp17)
	other := witnesstest.NewKey(t, originA) // same origin, untrusted key
	badSig := corruptSignature(t, cp17)
	otherRoot := bytes.Repeat([]byte{1}, 32)
	proof10to17, _ := log.ProveConsistency(ctx, f.a.Store, 10, 17)
	wrongProof := append([][]byte{}, proof10to17...)
	wrongProof[0] = otherRoot
	cp10 := f.a.Checkpoint(t, 10)

	for _, tc := range []struct {
		name   string
		body   string
		status int
		want   string // body substring (exact body for 409)
	}{
		{"unknown origin", withCheckpoint(good, signWith(t, f.a.Key.Signer, "log.example/unknown", 17, c17.Hash)), 404, "unknown log origin"},
		{"untrusted key", withCheckpoint(good, signWith(t, other.Signer, originA, 17, c17.Hash)), 403, "no signature by a key trusted"},
		{"bad signature", withCheckpoint(good, badSig), 403, "does not verify"},
		{"other log's key", withCheckpoint(good, signWith(t, f.b.Key.Signer, originA, 17, c17.Hash)), 403, "no signature by a key trusted"},
		{"malformed request", "old 10\nnot a hash\n\n" + string(cp17), 400, "malformed add-checkpoint request"},
		{"malformed note", "old 10\n\n" + originA + "\n17\n", 400, "malformed checkpoint note"},
		{"not a checkpoint", withCheckpoint(good, func() []byte {
			m, _ := note.Sign(&note.Note{Text: originA + "\n017\nxyz\n"}, f.a.Key.Signer)
			return m
		}()), 400, "checkpoint"},
		{"old above size", strings.Replace(good, "old 10\n", "old 18\n", 1), 400, "old size 18 is above the checkpoint's size 17"},
		{"old below recorded", request(t, f.a, 5, 17), 409, "10\n"},
		{"old above recorded", request(t, f.a, 12, 17), 409, "10\n"},
		{"old 0", request(t, f.a, 0, 17), 409, "10\n"},
		{"same size, other root", "old 10\n\n" + string(signWith(t, f.a.Key.Signer, originA, 10, otherRoot)), 409, "10\n"},
		{"wrong proof", (&witness.AddCheckpointRequest{OldSize: 10, Proof: wrongProof, Checkpoint: cp17}).String(), 422, "consistency proof"},
		{"no proof", (&witness.AddCheckpointRequest{OldSize: 10, Checkpoint: cp17}).String(), 422, "consistency proof"},
		{"proof for old 0", (&witness.AddCheckpointRequest{OldSize: 0, Proof: [][]byte{otherRoot}, Checkpoint: f.b.Grow(t, 3)}).String(), 422, "must be empty"},
		{"proof for the same size", (&witness.AddCheckpointRequest{OldSize: 10, Proof: [][]byte{otherRoot}, Checkpoint: cp10}).String(), 422, "must be empty when the old size"},
		{"empty tree, other root", "old 0\n\n" + string(signWith(t, f.b.Key.Signer, originB, 0, otherRoot)), 409, "0\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			beforeA, _ := f.store.Latest(ctx, originA)
			beforeB, _ := f.store.Latest(ctx, originB)
			status, ctype, body := f.post(t, tc.body)
			if status != tc.status {
				t.Fatalf("status %d (%s), want %d", status, body, tc.status)
			}
			if status == http.StatusConflict {
				if ctype != witness.ContentTypeSize || body != tc.want {
					t.Errorf("409 with content type %q body %q, want %q %q", ctype, body, witness.ContentTypeSize, tc.want)
				}
			} else if !strings.HasPrefix(ctype, "text/plain") || !strings.Contains(body, tc.want) {
				t.Errorf("content type %q body %q, want text/plain with %q", ctype, body, tc.want)
			}
			afterA, _ := f.store.Latest(ctx, originA)
			afterB, _ := f.store.Latest(ctx, originB)
			if !bytes.Equal(beforeA, afterA) || !bytes.Equal(beforeB, afterB) {
				t.Error("a refused request changed the recorded checkpoints")
			}
		})
	}

	// The cosigning paths: re-cosign the recorded size, the empty tree,
	// and move on with a proof.
	for _, tc := range []struct {
		name string
		body string
		size uint64
	}{
		{"same checkpoint again", "old 10\n\n" + string(cp10), 10},
		{"same size and root, other note", "old 10\n\n" + string(append(cp10[:len(cp10):len(cp10)], "— witness.example/x AAAAAAA=\n"...)), 10},
		{"empty tree", "old 0\n\n" + string(signWith(t, f.b.Key.Signer, originB, 0, log.EmptyRoot())), 0},
		{"new checkpoint", good, 17},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, ctype, body := f.post(t, tc.body)
			if status != http.StatusOK || !strings.HasPrefix(ctype, "text/plain") {
				t.Fatalf("status %d %q: %s", status, ctype, body)
			}
			f.checkCosignature(t, tc.body, body)
		})
	}
	rec, _ := f.store.Latest(ctx, originA)
	if got, _ := log.ParseCheckpointNote(rec); got.Size != 17 {
		t.Errorf("recorded size %d, want 17", got.Size)
	}
	if rec, _ := f.store.Latest(ctx, originB); rec != nil {
		t.Errorf("cosigning the empty tree recorded %q", rec)
	}

	// The replay of an accepted request is refused and changes nothing.
	if status, _, body := f.post(t, good); status != http.StatusConflict || body != "17\n" {
		t.Errorf("replay: %d %q", status, body)
	}

	// HTTP-level refusals.
	resp, err := http.Get(f.srv.URL + "/add-checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	resp, err = http.Post(f.srv.URL+"/other", "text/plain", strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST /other: %d", resp.StatusCode)
	}
	big := strings.Replace(good, "\n\n", "\n\n"+strings.Repeat("x", witness.MaxRequestSize), 1)
	if status, _, _ := f.post(t, big); status != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized request: %d", status)
	}
	truncated := good[:len(good)-20]
	if status, _, _ := f.post(t, truncated); status != http.StatusBadRequest {
		t.Errorf("truncated request: %d", status)
	}
	// The one validly signed checkpoint that contradicts the record was
	// reported as a fork.
	close(f.forks)
	var forks []*witness.Evidence
	for e := range f.forks {
		forks = append(forks, e)
	}
	if len(forks) != 1 || forks[0].Verify(f.a.Key.Verifier) != nil || !strings.Contains(forks[0].Detail, "two checkpoints of size 10") {
		t.Errorf("OnFork got %d reports, want the same-size fork: %+v", len(forks), forks)
	}
}

// TestPersistence: the recorded checkpoint survives a restart of the
// witness on the same Pebble directory.
func TestPersistence(t *testing.T) {
	dir := t.TempDir()
	kv, err := witnesspebble.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, witness.KVStore(kv))
	if status, _, body := f.post(t, request(t, f.a, 0, 10)); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	if status, _, body := f.post(t, request(t, f.a, 10, 30)); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	f.srv.Close()
	kv.Close()

	kv, err = witnesspebble.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	f.store = witness.KVStore(kv)
	f.w = f.newWitness(t)
	f.srv = httptest.NewServer(f.w)
	defer f.srv.Close()
	if status, ctype, body := f.post(t, request(t, f.a, 0, 31)); status != 409 || body != "30\n" || ctype != witness.ContentTypeSize {
		t.Fatalf("after restart, old 0: %d %q %q", status, ctype, body)
	}
	if status, _, body := f.post(t, request(t, f.a, 30, 31)); status != 200 {
		t.Fatalf("after restart, old 30: %d %s", status, body)
	}
}

// TestConcurrentAddCheckpoint races requests from one old size: exactly one
// wins, the others get 409 with the winner's size, and the record never
// goes back.
func TestConcurrentAddCheckpoint(t *testing.T) {
	for _, name := range []string{"memory", "pebble"} {
		t.Run(name, func(t *testing.T) {
			var store witness.Store = witnesstest.NewStore()
			if name == "pebble" {
				kv, err := witnesspebble.Open(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { kv.Close() })
				store = witness.KVStore(kv)
			}
			f := newFixture(t, store)
			f.w.testingOnlyBeforeSwap = func() { time.Sleep(time.Millisecond) }
			if status, _, body := f.post(t, request(t, f.a, 0, 5)); status != 200 {
				t.Fatalf("%d %s", status, body)
			}
			old := uint64(5)
			for round := range 3 {
				const racers = 12
				bodies := make([]string, racers)
				for i := range bodies {
					// Half race with distinct sizes, half with the same one.
					size := old + 1 + uint64(i%(racers/2))
					bodies[i] = request(t, f.a, old, size)
				}
				type answer struct {
					status int
					body   string
				}
				answers := make([]answer, racers)
				var wg sync.WaitGroup
				for i := range racers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						s, _, b := f.post(t, bodies[i])
						answers[i] = answer{s, b}
					}()
				}
				wg.Wait()
				var winner = -1
				for i, a := range answers {
					if a.status == 200 {
						if winner >= 0 {
							t.Fatalf("round %d: requests %d and %d both won", round, winner, i)
						}
						winner = i
					} else if a.status != 409 {
						t.Fatalf("round %d: status %d %s", round, a.status, a.body)
					}
				}
				if winner < 0 {
					t.Fatalf("round %d: nobody won", round)
				}
				req, _ := witness.ParseAddCheckpoint([]byte(bodies[winner]))
				c, _ := log.ParseCheckpointNote(req.Checkpoint)
				for i, a := range answers {
					if i != winner && a.body != strconv.FormatUint(c.Size, 10)+"\n" {
						t.Fatalf("round %d: loser %d got %q, want the winner's size %d", round, i, a.body, c.Size)
					}
				}
				rec, _ := store.Latest(context.Background(), originA)
				if !bytes.Equal(rec, req.Checkpoint) {
					t.Fatalf("round %d: recorded checkpoint is not the winner's", round)
				}
				old = c.Size
				f.a.Grow(t, old+racers) // move the log on past all candidates
				old = c.Size
			}
		})
	}
}

// TestForkAndRollback uses a misbehaving log: two sequencers with one key
// and different entries. The witness refuses every checkpoint of the
// second history, keeps its record, and reports the forks it can prove.
func TestForkAndRollback(t *testing.T) {
	f := newFixture(t, witnesstest.NewStore())
	ctx := context.Background()
	evil := witnesstest.NewLog(t, f.a.Key, "evil") // same key and origin as f.a

	if status, _, body := f.post(t, request(t, f.a, 0, 10)); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	recorded := func() []byte {
		rec, _ := f.store.Latest(ctx, originA)
		return rec
	}
	want := recorded()

	// Fork, larger: the evil log's proof from 10 to 20 rebuilds its own
	// root from another root at size 10.
	if status, _, body := f.post(t, request(t, evil, 10, 20)); status != 422 {
		t.Fatalf("fork to a larger tree: %d %s", status, body)
	}
	ev := <-f.forks
	if err := ev.Verify(f.a.Key.Verifier); err != nil {
		t.Fatalf("fork evidence does not verify: %v", err)
	}
	if ev.Checkpoints[0] != string(want) || ev.Checkpoints[1] != string(evil.Checkpoint(t, 20)) {
		t.Error("fork evidence holds other checkpoints")
	}

	// Fork, same size.
	if status, _, body := f.post(t, "old 10\n\n"+string(evil.Checkpoint(t, 10))); status != 409 || body != "10\n" {
		t.Fatalf("fork at the same size: %d %q", status, body)
	}
	if ev := <-f.forks; ev.Verify(f.a.Key.Verifier) != nil {
		t.Fatalf("same-size evidence does not verify: %v", ev.Verify(f.a.Key.Verifier))
	}

	// A power-of-two old size: the proof cannot show the fork, so the
	// witness refuses without evidence.
	if status, _, body := f.post(t, request(t, f.a, 10, 16)); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	if status, _, _ := f.post(t, request(t, evil, 16, 24)); status != 422 {
		t.Fatalf("fork from size 16: %d", status)
	}
	select {
	case ev := <-f.forks:
		t.Fatalf("evidence from a power-of-two size: %+v", ev)
	default:
	}

	// Rollback: the witness is at 20; the log presents an older or smaller
	// tree.
	if status, _, body := f.post(t, request(t, f.a, 16, 20)); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	want = recorded()
	for _, tc := range []struct {
		body   string
		status int
	}{
		{(&witness.AddCheckpointRequest{OldSize: 20, Checkpoint: f.a.Checkpoint(t, 16)}).String(), 400},
		{(&witness.AddCheckpointRequest{OldSize: 16, Checkpoint: f.a.Checkpoint(t, 16)}).String(), 409},
		{(&witness.AddCheckpointRequest{OldSize: 0, Checkpoint: f.a.Checkpoint(t, 16)}).String(), 409},
		{(&witness.AddCheckpointRequest{OldSize: 10, Checkpoint: evil.Checkpoint(t, 10)}).String(), 409},
		{(&witness.AddCheckpointRequest{OldSize: 0, Checkpoint: evil.Checkpoint(t, 24)}).String(), 409},
	} {
		status, _, body := f.post(t, tc.body)
		if status != tc.status {
			t.Errorf("rollback request: %d %q, want %d\n%s", status, body, tc.status, tc.body)
		}
		if status == 409 && body != "20\n" {
			t.Errorf("rollback request: 409 %q, want 20", body)
		}
	}
	if !bytes.Equal(recorded(), want) {
		t.Fatal("the misbehaving log changed the witness's record")
	}
	// The honest log goes on.
	if status, _, body := f.post(t, request(t, f.a, 20, 21)); status != 200 {
		t.Fatalf("honest log after the fork attempts: %d %s", status, body)
	}
}

// TestSharedStore: two witnesses on one store (as two processes on one
// database would be, if it allowed that) race; the store's
// compare-and-swap lets one win.
func TestSharedStore(t *testing.T) {
	f := newFixture(t, witnesstest.NewStore())
	w2 := f.newWitness(t)
	var mu sync.Mutex
	mu.Lock()
	entered := make(chan struct{}, 2)
	stall := func() { entered <- struct{}{}; mu.Lock(); mu.Unlock() }
	f.w.testingOnlyBeforeSwap, w2.testingOnlyBeforeSwap = stall, stall
	ctx := context.Background()
	reqs := []string{request(t, f.a, 0, 4), request(t, f.a, 0, 7)}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, w := range []*Witness{f.w, w2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, _ := witness.ParseAddCheckpoint([]byte(reqs[i]))
			_, errs[i] = w.AddCheckpoint(ctx, r)
		}()
	}
	<-entered
	<-entered // both passed the checks
	mu.Unlock()
	wg.Wait()
	var we *witness.Error
	switch {
	case errs[0] == nil && errors.As(errs[1], &we) && we.Status == 409 && we.Size == 4:
	case errs[1] == nil && errors.As(errs[0], &we) && we.Status == 409 && we.Size == 7:
	default:
		t.Fatalf("results %v, %v: want one success and one 409 naming the winner's size", errs[0], errs[1])
	}
}

// failingStore fails every Swap.
type failingStore struct{ witness.Store }

func (failingStore) Swap(context.Context, string, []byte, []byte) error {
	return errors.New("disk on fire")
}

// TestPersistFailure: a witness that cannot record a checkpoint does not
// cosign it.
func TestPersistFailure(t *testing.T) {
	f := newFixture(t, failingStore{witnesstest.NewStore()})
	status, _, body := f.post(t, request(t, f.a, 0, 3))
	if status != http.StatusInternalServerError || strings.Contains(body, "—") {
		t.Fatalf("%d %q", status, body)
	}
}

// FuzzAddCheckpoint throws request bodies at the witness's handler: every
// answer has one of the spec's status codes, only a 200 changes the
// record, and the record never shrinks.
func FuzzAddCheckpoint(f *testing.F) {
	fx := newFixture(f, witnesstest.NewStore())
	ctx := context.Background()
	if status, _, body := fx.post(f, request(f, fx.a, 0, 10)); status != 200 {
		f.Fatalf("%d %s", status, body)
	}
	for _, body := range []string{
		request(f, fx.a, 10, 13),
		request(f, fx.a, 10, 10),
		request(f, fx.a, 0, 13),
		request(f, fx.b, 0, 2),
		request(f, fx.b, 1, 2),
		"old 0\n\n" + string(signWith(f, fx.a.Key.Signer, originA, 0, log.EmptyRoot())),
		"old 5\n\nlog.example/a\n",
		request(f, fx.a, 10, 13) + string(fx.a.Checkpoint(f, 13)[bytes.LastIndex(fx.a.Checkpoint(f, 13), []byte("\n\n"))+2:]), // a line written twice
	} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		before := map[string][]byte{}
		for _, o := range []string{originA, originB} {
			before[o], _ = fx.store.Latest(ctx, o)
		}
		rec := httptest.NewRecorder()
		fx.w.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/add-checkpoint", bytes.NewReader(body)))
		switch rec.Code {
		case 200:
			if _, err := witness.SignatureLines(rec.Body.Bytes()); err != nil {
				t.Fatalf("200 with body %q", rec.Body)
			}
		case 400, 403, 404, 413, 422:
		case 409:
			if rec.Header().Get("Content-Type") != witness.ContentTypeSize {
				t.Fatalf("409 without the size content type")
			}
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		for _, o := range []string{originA, originB} {
			after, _ := fx.store.Latest(ctx, o)
			if bytes.Equal(after, before[o]) {
				continue
			}
			if rec.Code != 200 {
				t.Fatalf("status %d changed the record of %s", rec.Code, o)
			}
			var was uint64
			if before[o] != nil {
				c, _ := log.ParseCheckpointNote(before[o])
				was = c.Size
			}
			if c, _ := log.ParseCheckpointNote(after); c.Size < was {
				t.Fatalf("the record of %s went from %d back to %d", o, was, c.Size)
			}
		}
	})
}
