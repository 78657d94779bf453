package bundle_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/bundle"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/log/server"
	"github.com/transparency-dev/merkle/compact"
)

// anchorAfter appends n calls to the fixture's log and anchors its newest
// checkpoint; it returns the record (whose anchor entry the runner then
// appends).
func (f *fixture) anchorAfter(t *testing.T, n int) *anchor.Stored {
	t.Helper()
	for i := range n {
		f.app(t, "call", "bob", map[string]any{"server": "uniprot", "tool": "get_entry", "args": map[string]any{"n": i},
			"started": time.Now().UTC().Format(log.TimeFormat)})
	}
	st, err := f.runner.AnchorNow(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// forkRecord makes an anchor record of a second log signed with the
// fixture's log key (and anchored with its anchoring key and
// authorities), whose entries differ from the first: a tree of size with
// another root, signed by the same log. It returns the record's bytes.
func (f *fixture) forkRecord(t *testing.T, size uint64) []byte {
	t.Helper()
	ctx := context.Background()
	store := logtest.NewMemory()
	v, _ := note.NewVerifier(f.vkey)
	pub, _ := x509.MarshalPKIXPublicKey(&f.anchorKey.PublicKey)
	seq, err := server.OpenSequencer(ctx, store, f.signer, v, &server.SequencerOptions{
		Genesis: func() ([]byte, error) { return log.Genesis(time.Now(), f.signer.Name(), f.vkey, pub, "fork") },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	for n, _ := seq.Checkpoint(); n < size; n, _ = seq.Checkpoint() {
		b, _ := (&log.Entry{Kind: "call", Time: time.Now(), Actor: "mallory", Fields: map[string]any{"n": n}}).Marshal()
		if _, err := seq.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := anchor.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, err := online.NewRunner(ctx, online.Options{Config: f.anchorCfg, Log: seq, Tree: store, Records: recs, Signer: f.anchorKey, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.AnchorNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Record.Size != size {
		t.Fatalf("the fork's record anchors size %d, want %d", st.Record.Size, size)
	}
	return st.Bytes
}

// dropFile removes name from the bundle in dir and from its manifest.
func dropFile(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(name))); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, bundle.ManifestFile)
	var m bundle.Manifest
	mb, _ := os.ReadFile(p)
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	delete(m.Files, name)
	out, _ := json.MarshalIndent(m, "", "  ")
	os.WriteFile(p, out, 0o644)
}

// rangedFixture is a log with anchors at sizes below, at the start of,
// inside, at the end of and above the range [from, to) it exports under
// the checkpoint cp (of size n), and one above n.
type rangedFixture struct {
	*fixture
	cp       []byte
	from, to uint64
	n        uint64
	records  map[string]uint64 // record name -> anchored size
	dir      string            // the exported bundle
}

func newRangedFixture(t *testing.T) *rangedFixture {
	f := &rangedFixture{fixture: newFixture(t, 2, true), records: map[string]uint64{}}
	names, err := filepath.Glob(filepath.Join(f.anchors, "*.json"))
	if err != nil || len(names) != 1 {
		t.Fatalf("the fixture's anchors: %v %v", names, err)
	}
	f.records[filepath.Base(names[0])] = 0 // below the range; its size below
	add := func(st *anchor.Stored) uint64 { f.records[st.Name] = st.Record.Size; return st.Record.Size }
	f.from = add(f.anchorAfter(t, 2))
	add(f.anchorAfter(t, 2))
	f.to = add(f.anchorAfter(t, 2))
	add(f.anchorAfter(t, 2))
	f.app(t, "task.claim", "bob", map[string]any{"task_id": "t_1", "provenance": "reported", "summary": "s", "source": "a paper"})
	f.n, f.cp = f.seq.Checkpoint()
	add(f.anchorAfter(t, 2))
	for name, size := range f.records {
		if size == 0 {
			b, _ := os.ReadFile(filepath.Join(f.anchors, name))
			r, err := anchor.ParseRecord(b)
			if err != nil {
				t.Fatal(err)
			}
			f.records[name] = r.Size
		}
	}
	f.dir, err = f.exportCheckpoint(t, f.cp, nil, f.anchors, f.from, f.to)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestAnchorsTiedWhateverRange: in a bundle of [from, to) from a log
// anchored below from, at from, inside, at to, between to and the
// checkpoint's size and above it, every record is tied to the bundle's
// tree: by the entries in [from, to], by consistency.json elsewhere.
// Without consistency.json (the layout exported before it) the bundle
// still verifies, the records outside [from, to] verified but untied.
func TestAnchorsTiedWhateverRange(t *testing.T) {
	ctx := context.Background()
	f := newRangedFixture(t)
	rep, err := bundle.Verify(ctx, f.dir, anchor.VerifyBundled)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Anchors != 6 || rep.AnchorsOnEntries != 6 || rep.AnchorsByProof != 3 {
		t.Errorf("records at %v in [%d, %d) of %d: %d anchors, %d tied, %d by proof; want 6, 6, 3",
			f.records, f.from, f.to, f.n, rep.Anchors, rep.AnchorsOnEntries, rep.AnchorsByProof)
	}
	var cf bundle.Consistency
	b, _ := os.ReadFile(filepath.Join(f.dir, bundle.ConsistencyFile))
	if err := json.Unmarshal(b, &cf); err != nil || len(cf.Proofs) != 3 {
		t.Errorf("%s: %v, %d proofs; want 3 (below, after the range, above the checkpoint)", bundle.ConsistencyFile, err, len(cf.Proofs))
	}

	old := copyDir(t, f.dir)
	dropFile(t, old, bundle.ConsistencyFile)
	rep, err = bundle.Verify(ctx, old, anchor.VerifyBundled)
	if err != nil || rep.Anchors != 6 || rep.AnchorsOnEntries != 3 || rep.AnchorsByProof != 0 {
		t.Errorf("without %s: %v; want 6 anchors, 3 tied by the entries", bundle.ConsistencyFile, err)
	}
}

// TestAnchorForkRefused: a record anchoring another root at its size (a
// second log signed with the same key) is refused in every position of a
// bundle, naming the record, the size and both roots; and Export refuses
// to write a bundle with it.
func TestAnchorForkRefused(t *testing.T) {
	ctx := context.Background()
	f := newRangedFixture(t)
	for name, size := range f.records {
		t.Run(fmt.Sprintf("size%d", size), func(t *testing.T) {
			forked := f.forkRecord(t, size)
			good, _ := os.ReadFile(filepath.Join(f.anchors, name))
			goodRoot, forkRoot := recordRoot(t, good), recordRoot(t, forked)
			if bytes.Equal(goodRoot, forkRoot) {
				t.Fatal("the fork has the log's root")
			}
			dir := copyDir(t, f.dir)
			rec := bundle.AnchorsDir + "/" + name
			os.WriteFile(filepath.Join(dir, filepath.FromSlash(rec)), forked, 0o644)
			fixManifest(t, dir, rec, forked)
			_, err := bundle.Verify(ctx, dir, anchor.VerifyBundled)
			if p := problemOf(err, rec, "anchors root"); p == "" ||
				!strings.Contains(p, fmt.Sprintf("%x at size %d", forkRoot, size)) || !strings.Contains(p, hex.EncodeToString(goodRoot)) {
				t.Errorf("a forked record at size %d of [%d, %d) under size %d: %v", size, f.from, f.to, f.n, err)
			}

			anchors := t.TempDir()
			os.CopyFS(anchors, os.DirFS(f.anchors))
			os.WriteFile(filepath.Join(anchors, name), forked, 0o644)
			_, err = f.exportCheckpoint(t, f.cp, nil, anchors, f.from, f.to)
			if err == nil || !strings.Contains(err.Error(), "the log signed two trees of one size") {
				t.Errorf("exporting a forked record at size %d: %v", size, err)
			}
		})
	}
}

// TestAnchorProofTampered: a changed consistency proof, a changed root in
// consistency.json, a proof left out, a proof no record needs and a
// changed left frontier
// (tree.json) are each refused, named.
func TestAnchorProofTampered(t *testing.T) {
	ctx := context.Background()
	f := newRangedFixture(t)
	edit := func(t *testing.T, fn func(cf *bundle.Consistency)) string {
		dir := copyDir(t, f.dir)
		var cf bundle.Consistency
		p := filepath.Join(dir, bundle.ConsistencyFile)
		b, _ := os.ReadFile(p)
		json.Unmarshal(b, &cf)
		fn(&cf)
		b, _ = json.Marshal(cf)
		os.WriteFile(p, b, 0o644)
		fixManifest(t, dir, bundle.ConsistencyFile, b)
		return dir
	}
	flip := func(h *bundle.Hash) { h[0] ^= 1 }
	flipString := func(s *string) {
		h, _ := base64.StdEncoding.DecodeString(*s)
		h[0] ^= 1
		*s = base64.StdEncoding.EncodeToString(h)
	}
	for _, tc := range []struct {
		name, part, want string
		dir              func(t *testing.T) string
	}{
		{"proof", bundle.ConsistencyFile, "does not tie root", func(t *testing.T) string {
			return edit(t, func(cf *bundle.Consistency) { flip(&cf.Proofs[0].Proof[len(cf.Proofs[0].Proof)-1]) })
		}},
		{"root", bundle.ConsistencyFile, "does not tie root", func(t *testing.T) string {
			return edit(t, func(cf *bundle.Consistency) { flip(&cf.Proofs[1].Root) })
		}},
		{"dropped", bundle.ConsistencyFile, "holds no valid proof for size", func(t *testing.T) string {
			return edit(t, func(cf *bundle.Consistency) { cf.Proofs = cf.Proofs[1:] })
		}},
		{"unneeded", bundle.ConsistencyFile, "where no verified anchor record needs one", func(t *testing.T) string {
			dir := copyDir(t, f.dir)
			for name, size := range f.records {
				if size > f.n {
					dropFile(t, dir, bundle.AnchorsDir+"/"+name)
				}
			}
			return dir
		}},
		{"frontier", bundle.EntriesFile, "do not recompute the checkpoint's root", func(t *testing.T) string {
			dir := copyDir(t, f.dir)
			var tree bundle.Tree
			p := filepath.Join(dir, bundle.TreeFile)
			b, _ := os.ReadFile(p)
			json.Unmarshal(b, &tree)
			flipString(&tree.Left[0])
			b, _ = json.Marshal(tree)
			os.WriteFile(p, b, 0o644)
			fixManifest(t, dir, bundle.TreeFile, b)
			return dir
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := bundle.Verify(ctx, tc.dir(t), anchor.VerifyBundled)
			if problemOf(err, tc.part, tc.want) == "" {
				t.Errorf("want a problem in %s saying %q; got %v", tc.part, tc.want, err)
			}
		})
	}
}

// problemOf returns the message of err's first problem in part that
// contains want, or "".
func problemOf(err error, part, want string) string {
	var ve *bundle.VerifyError
	if !errors.As(err, &ve) {
		return ""
	}
	for _, p := range ve.Problems {
		if p.Part == part && strings.Contains(p.Msg, want) {
			return p.Msg
		}
	}
	return ""
}

func recordRoot(t *testing.T, b []byte) []byte {
	r, err := anchor.ParseRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	return r.Root
}

// checkpointSource is a Source that vouches only for the tree of one
// checkpoint (as a running sidecar's tiles do for the checkpoint it
// serves): nodes past it are not held.
type checkpointSource struct {
	bundle.Source
	size uint64
}

func (s checkpointSource) ReadNodes(ctx context.Context, ids []compact.NodeID) ([][]byte, error) {
	for _, id := range ids {
		if (id.Index+1)<<id.Level > s.size {
			return nil, fmt.Errorf("node %d/%d: %w", id.Level, id.Index, bundle.ErrNotHeld)
		}
	}
	return s.Source.ReadNodes(ctx, ids)
}

// TestAnchorPastSourceUntied: a record anchoring a tree past the
// checkpoint, when the export's source holds only the checkpoint's tree
// (a sidecar's served checkpoint, with a newer anchor), is exported untied
// as before consistency.json; the others are tied, and the bundle
// verifies. The export failed on reading the newer tree's root.
func TestAnchorPastSourceUntied(t *testing.T) {
	f := newRangedFixture(t)
	dir := filepath.Join(t.TempDir(), "bundle")
	_, err := bundle.Export(context.Background(), checkpointSource{f.store, f.n}, bundle.ExportOptions{
		Dir: dir, From: f.from, To: f.to, Checkpoint: f.cp, VKey: f.vkey, AnchorPub: f.anchorPEM,
		AnchorsDir: f.anchors, ReadAnchor: anchor.ReadBundled, TSARoots: f.tsaRoots, RekorKeys: f.rekorKeys, Generator: "provlog test",
	})
	if err != nil {
		t.Fatalf("export from a source holding the checkpoint's tree alone: %v", err)
	}
	rep, err := bundle.Verify(context.Background(), dir, anchor.VerifyBundled)
	if err != nil || rep.Anchors != 6 || rep.AnchorsOnEntries != 5 || rep.AnchorsByProof != 2 {
		t.Errorf("verify: %v, %+v; want 6 anchors, 5 tied (2 by proof), the one past the checkpoint untied", err, rep)
	}
}

// TestAnchorEmptyTree: a record anchoring the empty tree (size 0), which
// provlog's runner never writes but a bundle, being untrusted, may hold,
// is tied by RFC 6962's fixed root for it, SHA-256 of nothing, whatever
// the range: tied when it anchors that root, refused as a fork, named,
// when it anchors another. It was reported untied, or blamed on
// consistency.json for lacking a proof no size 0 can have. Export checks
// it the same way. The record is made by changing what the real anchor
// check returns: the runner refuses to anchor an empty log.
func TestAnchorEmptyTree(t *testing.T) {
	ctx := context.Background()
	f := newRangedFixture(t)
	var inside string // a record inside [from, to], which needs no proof
	for name, size := range f.records {
		if size > f.from && size < f.to {
			inside = name
		}
	}
	if inside == "" {
		t.Fatalf("no record inside [%d, %d]: %v", f.from, f.to, f.records)
	}
	insideBytes, _ := os.ReadFile(filepath.Join(f.anchors, inside))
	zeros := make([]byte, log.HashSize)
	for _, tc := range []struct {
		name string
		root []byte
		want string // the problem in the record, "" for none
	}{
		{"empty root", log.EmptyRoot(), ""},
		{"other root", zeros, fmt.Sprintf("anchors root %x at size 0, but the empty tree's root is %x", zeros, log.EmptyRoot())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			atZero := func(ctx context.Context, record []byte, v note.Verifier, key crypto.PublicKey, trust *bundle.Trust) (*bundle.Anchored, error) {
				a, err := anchor.VerifyBundled(ctx, record, v, key, trust)
				if err == nil && bytes.Equal(record, insideBytes) {
					a.Size, a.Root = 0, tc.root
				}
				return a, err
			}
			for _, dir := range []string{f.dir, f.export(t, 0, 0)} {
				rep, err := bundle.Verify(ctx, dir, atZero)
				if tc.want == "" {
					if err != nil || rep.Anchors != 6 || rep.AnchorsOnEntries != 6 {
						t.Errorf("a record of the empty tree's root: %v, %+v; want 6 anchors, all tied", err, rep)
					}
					continue
				}
				var ve *bundle.VerifyError
				if p := problemOf(err, bundle.AnchorsDir+"/"+inside, tc.want); p == "" || !errors.As(err, &ve) || len(ve.Problems) != 1 {
					t.Errorf("a record of another root at size 0: %v; want one problem saying %q", err, tc.want)
				}
			}

			atZeroRead := func(record []byte) (uint64, []byte, error) {
				size, root, err := anchor.ReadBundled(record)
				if err == nil && bytes.Equal(record, insideBytes) {
					size, root = 0, tc.root
				}
				return size, root, err
			}
			_, err := bundle.Export(ctx, f.store, bundle.ExportOptions{
				Dir: filepath.Join(t.TempDir(), "bundle"), From: f.from, To: f.to, Checkpoint: f.cp, VKey: f.vkey, AnchorPub: f.anchorPEM,
				AnchorsDir: f.anchors, ReadAnchor: atZeroRead, TSARoots: f.tsaRoots, RekorKeys: f.rekorKeys, Generator: "provlog test",
			})
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), "the log signed two trees of one size")) {
				t.Errorf("exporting a record of size 0 and root %x: %v", tc.root, err)
			}
		})
	}
}
