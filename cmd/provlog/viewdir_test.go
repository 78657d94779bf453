package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/compact"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/bundle"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// TestViewProofs exports bundles of several ranges and checks that every
// receipt provlog view serves is the one the log itself gives, and
// verifies.
func TestViewProofs(t *testing.T) {
	ctx := context.Background()
	data := makeDataDir(t, 40) // 41 entries with the genesis entry
	s, err := openStore(data, true)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	size := st.Size
	type rng struct{ from, to uint64 }
	ranges := []rng{{0, 0}, {0, 1}, {1, 2}, {5, 17}, {16, 32}, {31, 41}, {40, 41}, {13, 14}}
	s.Close()
	vk, err := readVKey(filepath.Join(data, logVKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := parseVerifier(vk)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ranges {
		t.Run(fmt.Sprintf("%d-%d", r.from, r.to), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "bundle")
			args := []string{"export", "--data", data, "--out", out, "--from", fmt.Sprint(r.from)}
			if r.to > 0 {
				args = append(args, "--to", fmt.Sprint(r.to))
			}
			if o, code := runCmd(t, args...); code != 0 {
				t.Fatalf("export: %s", o)
			}
			base := serveView(t, ctx, out)
			to := r.to
			if to == 0 {
				to = size
			}
			idx := []uint64{0}
			for i := r.from; i < to; i++ {
				idx = append(idx, i)
			}
			for _, i := range idx {
				body := fetch(t, base, fmt.Sprintf("/log/proof/inclusion?index=%d", i))
				rc, err := log.ParseReceipt([]byte(body))
				if err != nil {
					t.Fatalf("entry %d: %v: %s", i, err, body)
				}
				e := fetch(t, base, fmt.Sprintf("/log/entry/%d", i))
				if _, err := rc.Verify(log.LeafHash([]byte(e)), verifier); err != nil {
					t.Errorf("entry %d: the view's receipt does not verify: %v", i, err)
				}
			}
			if got := fetch(t, base, fmt.Sprintf("/log/proof/inclusion?hash=%x", log.LeafHash([]byte(fetch(t, base, fmt.Sprintf("/log/entry/%d", to-1)))))); !strings.Contains(got, fmt.Sprintf("\nindex %d\n", to-1)) {
				t.Errorf("by leaf hash: %s", got)
			}
		})
	}
}

func fetch(t *testing.T, base, path string) string {
	t.Helper()
	resp, b := getView(t, base, path)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return b
}

// TestBundleTreeEveryRange checks the view's proof nodes against the
// log's own for every exported range [from, to) of a 41-entry log and
// every entry in it.
func TestBundleTreeEveryRange(t *testing.T) {
	ctx := context.Background()
	s, err := openStore(makeDataDir(t, 40), true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	size := st.Size
	all, err := s.Entries(ctx, 0, size)
	if err != nil {
		t.Fatal(err)
	}
	hashes := func(b, e uint64) []string {
		ids := compact.RangeNodes(b, e, nil)
		hs, err := s.ReadNodes(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, h := range hs {
			out = append(out, base64.StdEncoding.EncodeToString(h))
		}
		return out
	}
	for from := uint64(0); from < size; from++ {
		for to := from + 1; to <= size; to++ {
			var leaves []byte
			for _, e := range all[from:to] {
				leaves = append(leaves, log.LeafHash(e)...)
			}
			bt, err := newBundleTree(from, to, size, leaves, bundle.Tree{Left: hashes(0, from), Right: hashes(to, size)})
			if err != nil {
				t.Fatal(err)
			}
			for i := from; i < to; i++ {
				got, err := log.ProveInclusion(ctx, bt, i, size)
				if err != nil {
					t.Fatalf("[%d, %d) entry %d: %v", from, to, i, err)
				}
				want, err := log.ProveInclusion(ctx, s, i, size)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.EqualFunc(got, want, bytes.Equal) {
					t.Fatalf("[%d, %d) entry %d: the view's proof differs from the log's", from, to, i)
				}
			}
		}
	}
}

// TestViewCommand runs provlog view on a bundle: it serves on loopback
// only, answers only for its own address, and refuses what is no bundle.
func TestViewCommand(t *testing.T) {
	data := makeDataDir(t, 3)
	out := filepath.Join(t.TempDir(), "bundle")
	if o, code := runCmd(t, "export", "--data", data, "--out", out); code != 0 {
		t.Fatalf("export: %s", o)
	}
	if o, code := runCmd(t, "view", "--http", "0.0.0.0:0", out); code != 2 || !strings.Contains(o, "loopback only") {
		t.Errorf("view on 0.0.0.0: %d %s", code, o)
	}
	if o, code := runCmd(t, "view", t.TempDir()); code != 1 || !strings.Contains(o, "manifest.json") {
		t.Errorf("view of an empty directory: %d %s", code, o)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stdout proctest.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"view", "--http", addr, out}, &stdout, &stdout) }()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("view exited with %d: %s", code, stdout.String())
		}
	}()
	var resp *http.Response
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err = http.Get("http://" + addr + "/ui/log.json"); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("view did not come up: %v: %s", err, stdout.String())
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"source":"bundle"`) || !strings.Contains(stdout.String(), "http://"+addr+"/ui/") {
		t.Errorf("log.json: %d %s; stdout %s", resp.StatusCode, b, stdout.String())
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/ui/", nil)
	req.Host = "rebound.example:80"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a request for another host: %v %v", resp, err)
	}
}

// FuzzViewRequests sends provlog view's handler arbitrary paths and
// queries: it answers each with a status that says what was wrong, never
// a panic or a server error.
func FuzzViewRequests(f *testing.F) {
	data := makeDataDir(f, 20)
	out := filepath.Join(f.TempDir(), "bundle")
	var sink strings.Builder
	if code := run(context.Background(), []string{"export", "--data", data, "--out", out, "--from", "3", "--to", "17"}, &sink, &sink); code != 0 {
		f.Fatalf("export: %s", sink.String())
	}
	v, err := openView(context.Background(), out)
	if err != nil {
		f.Fatal(err)
	}
	h := v.handler("example.test")
	for _, s := range []string{"/log/proof/inclusion?index=5", "/log/proof/inclusion?index=0", "/log/proof/inclusion?hash=00", "/log/entry/3",
		"/log/entry/99999999999999999999", "/log/task/t_00", "/log/checkpoint", "/ui/", "/log/proof/inclusion?index=5&hash=ab", "/log/proof/inclusion?index=-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		u, err := url.Parse(target)
		if err != nil || !strings.HasPrefix(u.Path, "/") {
			return
		}
		r := httptest.NewRequest("GET", "http://example.test/", nil)
		r.URL = u
		r.Host = "example.test"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		switch w.Code {
		case 200, 301, 307, 308, 400, 404, 405:
		default:
			t.Errorf("GET %s: %d %s", target, w.Code, w.Body.String())
		}
	})
}
