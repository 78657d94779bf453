package server

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
)

// testErrors checks the status of every kind of bad request, and that none
// of them changed the log.
func testErrors(t *testing.T, l *testLog, base string) {
	ctx := context.Background()
	size := uint64(len(l.entries))
	before, err := l.store.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A size no checkpoint was signed at.
	var unsigned uint64
	for s := uint64(1); s < size; s++ {
		if _, ok := l.roots[s]; !ok {
			unsigned = s
			break
		}
	}
	if unsigned == 0 {
		t.Fatal("every size has a checkpoint")
	}
	lastTile := log.Tile{Level: 0, N: size / log.TileWidth, W: int(size % log.TileWidth)}
	if lastTile.W == 0 {
		t.Fatal("size is a multiple of 256")
	}
	wider := lastTile
	wider.W++
	full := lastTile
	full.W = log.TileWidth
	hash := hex.EncodeToString(log.LeafHash(l.entries[0]))
	unknown := hex.EncodeToString(log.LeafHash([]byte("never appended")))
	sz := strconv.FormatUint(size, 10)

	for _, tc := range []struct {
		method, path string
		auth         bool
		body         string
		chunked      bool
		want         int
		wantBody     string
	}{
		// Public and protected.
		{method: "GET", path: "/log/checkpoint", want: 200},
		{method: "GET", path: "/log/tile/0/000", want: 200},
		{method: "GET", path: "/log/tile/entries/000", want: 401},
		{method: "GET", path: "/log/entry/0", want: 401},
		{method: "GET", path: "/log/proof/inclusion?index=0", want: 401},
		{method: "GET", path: "/log/proof/consistency?old=1", want: 401},
		{method: "GET", path: "/log/proof/inclusion?index=zz", want: 401}, // authorization first
		// Methods.
		{method: "POST", path: "/log/checkpoint", want: 405},
		{method: "POST", path: "/log/entry/0", auth: true, body: "x", want: 405},
		{method: "PUT", path: "/log/tile/0/000", want: 405},
		{method: "DELETE", path: "/log/proof/inclusion?index=0", auth: true, want: 405},
		{method: "PATCH", path: "/log/tile/entries/000", want: 405},
		{method: "OPTIONS", path: "/log/checkpoint", want: 405},
		// Bodies.
		{method: "GET", path: "/log/checkpoint", body: "hello", want: 413},
		{method: "GET", path: "/log/entry/0", auth: true, body: "hello", chunked: true, want: 413},
		{method: "GET", path: "/log/proof/inclusion?index=0", auth: true, body: "hello", want: 413},
		// Malformed.
		{method: "GET", path: "/log/checkpoint?x=1", want: 400, wantBody: "unknown query parameter"},
		{method: "GET", path: "/log/tile/0/0001", want: 400, wantBody: "three digits"},
		{method: "GET", path: "/log/tile/0/1", want: 400},
		{method: "GET", path: "/log/tile/64/000", want: 400},
		{method: "GET", path: "/log/tile/00/000", want: 400},
		{method: "GET", path: "/log/tile/0/000.p/0", want: 400},
		{method: "GET", path: "/log/tile/0/000.p/256", want: 400},
		{method: "GET", path: "/log/tile/0/x000/000", want: 400},
		{method: "GET", path: "/log/tile/8/0/000", want: 400}, // a sumdb path
		{method: "GET", path: "/log/tile/0/000?x", want: 400},
		{method: "GET", path: "/log/tile/entries/000.p/017", auth: true, want: 400},
		{method: "GET", path: "/log/entry/01", auth: true, want: 400},
		{method: "GET", path: "/log/entry/-1", auth: true, want: 400},
		{method: "GET", path: "/log/entry/x", auth: true, want: 400},
		{method: "GET", path: "/log/entry/", auth: true, want: 400},
		{method: "GET", path: "/log/entry/18446744073709551616", auth: true, want: 400, wantBody: "out of range"},
		{method: "GET", path: "/log/proof/inclusion", auth: true, want: 400},
		{method: "GET", path: "/log/proof/inclusion?index=1&hash=" + hash, auth: true, want: 400, wantBody: "not both"},
		{method: "GET", path: "/log/proof/inclusion?index=1&foo=2", auth: true, want: 400, wantBody: `unknown query parameter "foo"`},
		{method: "GET", path: "/log/proof/inclusion?index=1&index=2", auth: true, want: 400},
		{method: "GET", path: "/log/proof/inclusion?index=01", auth: true, want: 400},
		{method: "GET", path: "/log/proof/inclusion?index=+1", auth: true, want: 400},
		{method: "GET", path: "/log/proof/inclusion?index=", auth: true, want: 400},
		{method: "GET", path: "/log/proof/inclusion?hash=" + hash[:62], auth: true, want: 400},
		{method: "GET", path: "/log/proof/inclusion?hash=" + hash[:62] + "zz", auth: true, want: 400, wantBody: "not hex"},
		{method: "GET", path: "/log/proof/inclusion?index=1&size=abc", auth: true, want: 400},
		{method: "GET", path: "/log/proof/inclusion?index=%zz", auth: true, want: 400, wantBody: "malformed query"},
		{method: "GET", path: "/log/proof/consistency", auth: true, want: 400},
		{method: "GET", path: "/log/proof/consistency?old=5&new=4", auth: true, want: 400},
		{method: "GET", path: "/log/proof/consistency?old=1&x=2", auth: true, want: 400},
		{method: "GET", path: "/log/proof/consistency?new=4", auth: true, want: 400},
		// Out of range.
		{method: "GET", path: "/log/", want: 404},
		{method: "GET", path: "/log/nope", want: 404},
		{method: "GET", path: "/other", want: 404},
		{method: "GET", path: "/log/checkpoint/", want: 404},
		{method: "GET", path: "/log/" + full.Path(), want: 404},
		{method: "GET", path: "/log/" + wider.Path(), want: 404},
		{method: "GET", path: "/log/" + log.Tile{Level: 0, N: lastTile.N + 1, W: 1}.Path(), want: 404},
		{method: "GET", path: "/log/tile/3/000.p/1", want: 404},
		{method: "GET", path: "/log/tile/63/000.p/1", want: 404},
		{method: "GET", path: "/log/tile/entries/" + full.Path()[len("tile/0/"):], auth: true, want: 404},
		{method: "GET", path: "/log/entry/" + sz, auth: true, want: 404},
		{method: "GET", path: "/log/proof/inclusion?index=" + sz, auth: true, want: 404},
		{method: "GET", path: "/log/proof/inclusion?hash=" + unknown, auth: true, want: 404},
		{method: "GET", path: fmt.Sprintf("/log/proof/inclusion?index=0&size=%d", unsigned), auth: true, want: 404, wantBody: "no checkpoint was signed at size"},
		{method: "GET", path: fmt.Sprintf("/log/proof/inclusion?index=0&size=%d", size+1), auth: true, want: 404, wantBody: "no checkpoint was signed at size"},
		{method: "GET", path: fmt.Sprintf("/log/proof/inclusion?index=%d&size=%d", l.sizes[0], l.sizes[0]), auth: true, want: 404},
		{method: "GET", path: fmt.Sprintf("/log/proof/consistency?old=1&new=%d", size+1), auth: true, want: 404},
		{method: "GET", path: fmt.Sprintf("/log/proof/consistency?old=%d", size+1), auth: true, want: 404},
	} {
		name := tc.method + " " + tc.path
		req, err := http.NewRequest(tc.method, base+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.body != "" {
			req.Body = io.NopCloser(strings.NewReader(tc.body))
			req.ContentLength = int64(len(tc.body))
			if tc.chunked {
				req.ContentLength = -1
			}
		}
		if tc.auth {
			req.Header.Set("Authorization", "Bearer "+testToken)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %s (%s), want %d", name, resp.Status, bytes.TrimSpace(body), tc.want)
			continue
		}
		if tc.want == 200 {
			continue
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" || len(bytes.TrimSpace(body)) == 0 {
			t.Errorf("%s: error body %q of type %q, want a plain-text message", name, body, ct)
		}
		if !strings.Contains(string(body), tc.wantBody) {
			t.Errorf("%s: body %q does not say %q", name, body, tc.wantBody)
		}
		switch tc.want {
		case 401:
			if got := resp.Header.Get("WWW-Authenticate"); got != "Bearer" {
				t.Errorf("%s: WWW-Authenticate %q, want Bearer", name, got)
			}
		case 405:
			if got := resp.Header.Get("Allow"); got != "GET, HEAD" {
				t.Errorf("%s: Allow %q, want \"GET, HEAD\"", name, got)
			}
		}
	}

	// A wrong token is no token.
	req, err := http.NewRequest("GET", base+"/log/entry/0", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer wrong")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong token: %s, want 401", resp.Status)
	}

	after, err := l.store.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Size != before.Size || !bytes.Equal(after.Checkpoint, before.Checkpoint) {
		t.Errorf("the log changed: size %d, want %d", after.Size, before.Size)
	}
	if s, _ := l.seq.Checkpoint(); s != size {
		t.Errorf("sequencer size %d, want %d", s, size)
	}
}
