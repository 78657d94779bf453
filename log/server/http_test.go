package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpebble"
	"github.com/provlog/provlog/log/logtest"
)

// backends are the stores every server test runs against. open returns an
// empty store and a function that closes it and opens it again, as a
// restart would. size is the log TestAPI builds: in memory the example of
// c2sp.org/tlog-tiles (tiles at three levels, a full one at level 1), on
// disk a smaller log, as every commit there waits for an fsync.
var backends = []struct {
	name string
	size int
	open func(t *testing.T) (s log.Storage, reopen func() log.Storage)
}{
	{"memory", 70000, func(t *testing.T) (log.Storage, func() log.Storage) {
		m := logtest.NewMemory()
		return m, func() log.Storage {
			m.Close()
			m = m.Reopen()
			return m
		}
	}},
	{"pebble", 5000, func(t *testing.T) (log.Storage, func() log.Storage) {
		dir := t.TempDir()
		open := func() *logpebble.Store {
			s, err := logpebble.Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		s := open()
		t.Cleanup(func() { s.Close() })
		return s, func() log.Storage {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = open()
			return s
		}
	}},
}

// testLog is a log built through a Sequencer, with what the test knows it
// holds.
type testLog struct {
	store    log.Storage
	seq      *Sequencer
	verifier note.Verifier
	entries  [][]byte          // by index
	ref      *testonly.Tree    // reference tree over entries
	roots    map[uint64][]byte // root of every signed checkpoint, by size
	sizes    []uint64          // sizes of signed checkpoints, increasing
	stored   []tlog.Hash       // x/mod sumdb/tlog's stored hashes for entries
}

// buildLog appends n distinct entries of arbitrary bytes to store from
// several goroutines at once, so the sequencer commits them in batches of
// varying sizes, each with its own checkpoint.
func buildLog(t *testing.T, store log.Storage, n int) *testLog {
	t.Helper()
	ctx := context.Background()
	signer, verifier := logtest.NewKey(t, "provlog.test/http")
	seq, err := OpenSequencer(ctx, store, signer, verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seq.Close() })

	const workers = 32
	entries := make([][]byte, n)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 0))
			for i := w; i < n; i += workers {
				e := fmt.Appendf(nil, "%d:", i)
				e = append(e, make([]byte, rng.IntN(64))...)
				for j := len(e) - 1; j >= 0 && e[j] == 0; j-- {
					e[j] = byte(rng.Uint32())
				}
				r, err := seq.Append(ctx, e)
				if err != nil {
					errs <- err
					return
				}
				entries[r.Index] = e
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	l := &testLog{store: store, seq: seq, verifier: verifier, entries: entries, roots: map[uint64][]byte{}}
	l.ref = testonly.New(rfc6962.DefaultHasher)
	for i, e := range entries {
		if e == nil {
			t.Fatalf("no receipt returned index %d", i)
		}
		l.ref.AppendData(e)
	}
	err = store.Checkpoints(ctx, 0, func(size uint64, msg []byte) error {
		c, _, err := log.OpenCheckpoint(msg, verifier)
		if err != nil {
			return err
		}
		if c.Size != size || !bytes.Equal(c.Hash, l.ref.HashAt(size)) {
			return fmt.Errorf("checkpoint %d does not match the reference tree", size)
		}
		l.roots[size] = c.Hash
		l.sizes = append(l.sizes, size)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.sizes) < 2 || l.sizes[len(l.sizes)-1] != uint64(n) {
		t.Fatalf("checkpoint sizes %v, want several ending at %d", l.sizes, n)
	}

	r := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = l.stored[x]
		}
		return out, nil
	})
	for i, e := range entries {
		h, err := tlog.StoredHashes(int64(i), e, r)
		if err != nil {
			t.Fatal(err)
		}
		l.stored = append(l.stored, h...)
	}
	return l
}

func (l *testLog) hashReader() tlog.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = l.stored[x]
		}
		return out, nil
	})
}

const testToken = "reader-token"

func authorized(r *http.Request) bool {
	return r.Header.Get("Authorization") == "Bearer "+testToken
}

// client fetches from a test server, with or without the reader token.
type client struct {
	t    *testing.T
	base string
	auth bool
}

func (c *client) do(method, path string, body io.Reader) (*http.Response, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.send(req)
}

// send sends req, with the client's token if it has one, and returns the
// answer and its body.
func (c *client) send(req *http.Request) (*http.Response, []byte) {
	c.t.Helper()
	if c.auth {
		req.Header.Set("Authorization", "Bearer "+testToken)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, b
}

// get fetches path and fails the test unless it answers 200.
func (c *client) get(path string) (*http.Response, []byte) {
	c.t.Helper()
	resp, b := c.do(http.MethodGet, path, nil)
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("GET %s: %s: %s", path, resp.Status, b)
	}
	return resp, b
}

// tileReader is an x/mod sumdb/tlog TileReader over the server's hash
// tiles, so tlog.TileHashReader authenticates them against a tree hash.
type tileReader struct {
	c *client
}

func (r tileReader) Height() int { return log.TileHeight }

func (r tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		if t.H != log.TileHeight || t.L < 0 {
			return nil, fmt.Errorf("unexpected tile %v", t)
		}
		// sumdb paths carry the height (tile/8/L/N); ours do not.
		path := "/log/" + log.Tile{Level: t.L, N: uint64(t.N), W: t.W}.Path()
		resp, b := r.c.do(http.MethodGet, path, nil)
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		out[i] = b
	}
	return out, nil
}

func (r tileReader) SaveTiles([]tlog.Tile, [][]byte) {}

func TestAPI(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			n := b.size
			if testing.Short() {
				n = 1500
			}
			store, _ := b.open(t)
			l := buildLog(t, store, n)
			srv := httptest.NewServer(NewAPI(APIOptions{Store: l.store, Seq: l.seq, Authorized: authorized}))
			defer srv.Close()
			reader := &client{t: t, base: srv.URL, auth: true}
			anon := &client{t: t, base: srv.URL}
			t.Run("checkpoint", func(t *testing.T) { testCheckpoint(t, l, anon) })
			t.Run("tiles", func(t *testing.T) { testTiles(t, l, anon) })
			t.Run("tlog", func(t *testing.T) { testTlogTiles(t, l, anon) })
			t.Run("entries", func(t *testing.T) { testEntries(t, l, reader) })
			t.Run("inclusion", func(t *testing.T) { testInclusion(t, l, reader) })
			t.Run("consistency", func(t *testing.T) { testConsistency(t, l, reader) })
			t.Run("errors", func(t *testing.T) { testErrors(t, l, srv.URL) })
			t.Run("head", func(t *testing.T) { testHead(t, reader) })
		})
	}
}

func testCheckpoint(t *testing.T, l *testLog, c *client) {
	resp, b := c.get("/log/checkpoint")
	if got, want := resp.Header.Get("Content-Type"), "text/plain; charset=utf-8"; got != want {
		t.Errorf("Content-Type = %q, want %q", got, want)
	}
	if got, want := resp.Header.Get("Cache-Control"), "no-cache"; got != want {
		t.Errorf("Cache-Control = %q, want %q", got, want)
	}
	cp, _, err := log.OpenCheckpoint(b, l.verifier)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Size != uint64(len(l.entries)) || !bytes.Equal(cp.Hash, l.ref.Hash()) {
		t.Errorf("checkpoint (%d, %x), want (%d, %x)", cp.Size, cp.Hash, len(l.entries), l.ref.Hash())
	}
}

// testTiles checks every hash tile of the tree against x/mod's tiles over
// the same entries, and partial reads of full tiles.
func testTiles(t *testing.T, l *testLog, c *client) {
	size := uint64(len(l.entries))
	hr := l.hashReader()
	count := 0
	for level := 0; level <= 3; level++ {
		for n := uint64(0); ; n++ {
			w := log.TileWidthAt(level, n, size)
			if w == 0 {
				break
			}
			want, err := tlog.ReadTileData(tlog.Tile{H: log.TileHeight, L: level, N: int64(n), W: w}, hr)
			if err != nil {
				t.Fatal(err)
			}
			tile := log.Tile{Level: level, N: n, W: w}
			resp, got := c.get("/log/" + tile.Path())
			if !bytes.Equal(got, want) {
				t.Fatalf("%s differs from the recomputed tile", tile.Path())
			}
			if got, want := resp.Header.Get("Content-Type"), "application/octet-stream"; got != want {
				t.Errorf("Content-Type = %q, want %q", got, want)
			}
			cc := resp.Header.Get("Cache-Control")
			if full := w == log.TileWidth; full != strings.Contains(cc, "immutable") || !strings.HasPrefix(cc, "public") {
				t.Errorf("%s: Cache-Control %q", tile.Path(), cc)
			}
			// A client with an older checkpoint reads a narrower tile.
			for _, pw := range []int{1, w / 2, w - 1} {
				if pw < 1 || pw >= w {
					continue
				}
				p := log.Tile{Level: level, N: n, W: pw}
				if _, got := c.get("/log/" + p.Path()); !bytes.Equal(got, want[:pw*log.HashSize]) {
					t.Fatalf("%s is not a prefix of %s", p.Path(), tile.Path())
				}
			}
			count++
		}
	}
	if size == 70000 && count != 273+1+1+1+1 {
		t.Errorf("served %d hash tiles at size 70000, want 277", count)
	}
}

// testTlogTiles reads the tree through x/mod sumdb/tlog's TileHashReader,
// which authenticates every tile it fetches against the tree hash, for the
// latest checkpoint and for older ones.
func testTlogTiles(t *testing.T, l *testLog, c *client) {
	rng := rand.New(rand.NewPCG(1, 2))
	size := int64(len(l.entries))
	sizes := []uint64{uint64(size), l.sizes[0], l.sizes[len(l.sizes)/2]}
	for range 5 {
		sizes = append(sizes, l.sizes[rng.IntN(len(l.sizes))])
	}
	for _, s := range sizes {
		var tree tlog.Tree
		tree.N = int64(s)
		copy(tree.Hash[:], l.roots[s])
		thr := tlog.TileHashReader(tree, tileReader{c})
		th, err := tlog.TreeHash(tree.N, thr)
		if err != nil {
			t.Fatalf("TreeHash(%d) over served tiles: %v", s, err)
		}
		if th != tree.Hash {
			t.Fatalf("TreeHash(%d) = %v, want %v", s, th, tree.Hash)
		}
		for range 5 {
			i := rng.Int64N(tree.N)
			p, err := tlog.ProveRecord(tree.N, i, thr)
			if err != nil {
				t.Fatalf("ProveRecord(%d, %d): %v", tree.N, i, err)
			}
			if err := tlog.CheckRecord(p, tree.N, tree.Hash, i, tlog.RecordHash(l.entries[i])); err != nil {
				t.Fatalf("CheckRecord(%d, %d): %v", tree.N, i, err)
			}
		}
		if s < uint64(size) {
			latest := tlog.Tree{N: size}
			copy(latest.Hash[:], l.ref.Hash())
			p, err := tlog.ProveTree(size, tree.N, tlog.TileHashReader(latest, tileReader{c}))
			if err != nil {
				t.Fatalf("ProveTree(%d, %d): %v", size, tree.N, err)
			}
			if err := tlog.CheckTree(p, size, latest.Hash, tree.N, tree.Hash); err != nil {
				t.Fatalf("CheckTree(%d, %d): %v", size, tree.N, err)
			}
		}
	}
}

func testEntries(t *testing.T, l *testLog, c *client) {
	size := uint64(len(l.entries))
	for n := uint64(0); ; n++ {
		w := log.TileWidthAt(log.EntriesLevel, n, size)
		if w == 0 {
			break
		}
		tile := log.Tile{Level: log.EntriesLevel, N: n, W: w}
		resp, b := c.get("/log/" + tile.Path())
		got, err := log.ParseEntryBundle(b)
		if err != nil {
			t.Fatalf("%s: %v", tile.Path(), err)
		}
		start := n * log.TileWidth
		if want := l.entries[start : start+uint64(w)]; !slices.EqualFunc(got, want, bytes.Equal) {
			t.Fatalf("%s does not hold the entries appended", tile.Path())
		}
		if cc := resp.Header.Get("Cache-Control"); !strings.HasPrefix(cc, "private") {
			t.Errorf("%s: Cache-Control %q, want private", tile.Path(), cc)
		}
		if w > 1 {
			p := log.Tile{Level: log.EntriesLevel, N: n, W: w - 1}
			_, b := c.get("/log/" + p.Path())
			if got, _ := log.ParseEntryBundle(b); !slices.EqualFunc(got, l.entries[start:start+uint64(w-1)], bytes.Equal) {
				t.Fatalf("%s does not hold the entries appended", p.Path())
			}
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, i := range []uint64{0, size - 1, rng.Uint64N(size), rng.Uint64N(size)} {
		resp, b := c.get("/log/entry/" + strconv.FormatUint(i, 10))
		if !bytes.Equal(b, l.entries[i]) {
			t.Errorf("entry %d = %q, want %q", i, b, l.entries[i])
		}
		if got, want := resp.Header.Get("Content-Type"), "application/json"; got != want {
			t.Errorf("Content-Type = %q, want %q", got, want)
		}
	}
}

func testInclusion(t *testing.T, l *testLog, c *client) {
	size := uint64(len(l.entries))
	rng := rand.New(rand.NewPCG(5, 6))
	check := func(query string, index, wantSize uint64) {
		t.Helper()
		resp, b := c.get("/log/proof/inclusion?" + query)
		if got, want := resp.Header.Get("Content-Type"), "text/plain; charset=utf-8"; got != want {
			t.Errorf("Content-Type = %q, want %q", got, want)
		}
		r, err := log.ParseReceipt(b)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		leaf := log.LeafHash(l.entries[index])
		if r.Index != index || !bytes.Equal(r.Extra, leaf) {
			t.Fatalf("%s: receipt for index %d, extra %x; want %d, %x", query, r.Index, r.Extra, index, leaf)
		}
		cp, err := r.Verify(leaf, l.verifier)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		if cp.Size != wantSize {
			t.Fatalf("%s: receipt for size %d, want %d", query, cp.Size, wantSize)
		}
	}
	for _, i := range []uint64{0, 1, 255, 256, size - 1} {
		check("index="+strconv.FormatUint(i, 10), i, size)
	}
	for range 50 {
		i := rng.Uint64N(size)
		check("index="+strconv.FormatUint(i, 10), i, size)
		check("hash="+hex.EncodeToString(log.LeafHash(l.entries[i])), i, size)
		s := l.sizes[rng.IntN(len(l.sizes))]
		i = rng.Uint64N(s)
		check(fmt.Sprintf("index=%d&size=%d", i, s), i, s)
		check(fmt.Sprintf("size=%d&hash=%X", s, log.LeafHash(l.entries[i])), i, s)
	}
}

func testConsistency(t *testing.T, l *testLog, c *client) {
	size := uint64(len(l.entries))
	rng := rand.New(rand.NewPCG(7, 8))
	check := func(query string, old, new uint64) {
		t.Helper()
		_, b := c.get("/log/proof/consistency?" + query)
		var p [][]byte
		for _, line := range strings.SplitAfter(string(b), "\n") {
			if line == "" {
				continue
			}
			h, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(line, "\n"))
			if err != nil || len(h) != log.HashSize || !strings.HasSuffix(line, "\n") {
				t.Fatalf("%s: bad proof line %q", query, line)
			}
			p = append(p, h)
		}
		if old == 0 || old == new {
			if len(p) != 0 {
				t.Fatalf("%s: %d hashes, want none", query, len(p))
			}
			return
		}
		if err := log.VerifyConsistency(old, new, p, l.roots[old], l.roots[new]); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	for range 50 {
		a, b := l.sizes[rng.IntN(len(l.sizes))], l.sizes[rng.IntN(len(l.sizes))]
		if a > b {
			a, b = b, a
		}
		check(fmt.Sprintf("old=%d&new=%d", a, b), a, b)
		check(fmt.Sprintf("old=%d", a), a, size)
	}
	check(fmt.Sprintf("old=0&new=%d", size), 0, size)
	check(fmt.Sprintf("old=%d&new=%d", size, size), size, size)
}

func testHead(t *testing.T, c *client) {
	for _, path := range []string{"/log/checkpoint", "/log/tile/0/000", "/log/tile/entries/000", "/log/entry/3", "/log/proof/inclusion?index=3"} {
		get, body := c.get(path)
		head, hb := c.do(http.MethodHead, path, nil)
		if head.StatusCode != http.StatusOK || len(hb) != 0 {
			t.Errorf("HEAD %s: %s with %d body bytes", path, head.Status, len(hb))
		}
		if head.ContentLength != int64(len(body)) {
			t.Errorf("HEAD %s: Content-Length %d, want %d", path, head.ContentLength, len(body))
		}
		if got, want := head.Header.Get("Content-Type"), get.Header.Get("Content-Type"); got != want {
			t.Errorf("HEAD %s: Content-Type %q, want %q", path, got, want)
		}
	}
	head, _ := c.do(http.MethodHead, "/log/tile/0/000.p/0", nil)
	if head.StatusCode != http.StatusBadRequest {
		t.Errorf("HEAD of a bad tile path: %s", head.Status)
	}
}

// TestAPIPublic checks a log whose entries are public (Authorized nil).
func TestAPIPublic(t *testing.T) {
	l := buildLog(t, logtest.NewMemory(), 300)
	srv := httptest.NewServer(NewAPI(APIOptions{Store: l.store, Seq: l.seq}))
	defer srv.Close()
	c := &client{t: t, base: srv.URL}
	for _, path := range []string{"/log/tile/entries/000", "/log/entry/299", "/log/proof/inclusion?index=299", "/log/proof/consistency?old=1"} {
		resp, _ := c.get(path)
		if cc := resp.Header.Get("Cache-Control"); !strings.HasPrefix(cc, "public") {
			t.Errorf("%s: Cache-Control %q, want public", path, cc)
		}
	}
}

// TestAPIEmptyLog checks the API of a log with no entries yet.
func TestAPIEmptyLog(t *testing.T) {
	store := logtest.NewMemory()
	signer, verifier := logtest.NewKey(t, "provlog.test/empty")
	seq, err := OpenSequencer(context.Background(), store, signer, verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	srv := httptest.NewServer(NewAPI(APIOptions{Store: store, Seq: seq}))
	defer srv.Close()
	c := &client{t: t, base: srv.URL}
	for path, want := range map[string]int{
		"/log/checkpoint":                    404,
		"/log/tile/0/000.p/1":                404,
		"/log/tile/entries/000.p/1":          404,
		"/log/entry/0":                       404,
		"/log/proof/inclusion?index=0":       404,
		"/log/proof/consistency?old=0":       200,
		"/log/proof/consistency?old=0&new=1": 404,
	} {
		if resp, b := c.do(http.MethodGet, path, nil); resp.StatusCode != want {
			t.Errorf("%s: %s (%s), want %d", path, resp.Status, b, want)
		}
	}
}

func TestParseInclusionQuery(t *testing.T) {
	h := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		query string
		want  inclusionQuery
		ok    bool
	}{
		{"index=0", inclusionQuery{}, true},
		{"index=18446744073709551615", inclusionQuery{index: 1<<64 - 1}, true},
		{"index=7&size=9", inclusionQuery{index: 7, size: 9, hasSize: true}, true},
		{"hash=" + h, inclusionQuery{leafHash: bytes.Repeat([]byte{0xab}, 32)}, true},
		{"hash=" + strings.ToUpper(h) + "&size=0", inclusionQuery{leafHash: bytes.Repeat([]byte{0xab}, 32), hasSize: true}, true},
		{"", inclusionQuery{}, false},
		{"size=3", inclusionQuery{}, false},
		{"index=18446744073709551616", inclusionQuery{}, false},
		{"index=1&hash=" + h, inclusionQuery{}, false},
		{"index=1&index=1", inclusionQuery{}, false},
		{"index=1&size=1&size=1", inclusionQuery{}, false},
		{"index=1&Size=1", inclusionQuery{}, false},
		{"index=0x1", inclusionQuery{}, false},
		{"index=1e3", inclusionQuery{}, false},
		{"hash=" + h + "00", inclusionQuery{}, false},
		{"hash=" + h[:63] + "g", inclusionQuery{}, false},
	} {
		q, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseInclusionQuery(q)
		if (err == nil) != tc.ok {
			t.Errorf("parseInclusionQuery(%q): error %v, want ok=%v", tc.query, err, tc.ok)
			continue
		}
		if tc.ok && (got.index != tc.want.index || got.size != tc.want.size || got.hasSize != tc.want.hasSize || !bytes.Equal(got.leafHash, tc.want.leafHash)) {
			t.Errorf("parseInclusionQuery(%q) = %+v, want %+v", tc.query, got, tc.want)
		}
		if err != nil {
			if ae, ok := err.(*apiError); !ok || ae.status != http.StatusBadRequest {
				t.Errorf("parseInclusionQuery(%q) error %v is not a 400", tc.query, err)
			}
		}
	}
}
