package log_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
)

// nodeMap is a log.NodeReader over the perfect nodes a compact range
// reported while leaves were appended, as a Storage keeps them.
type nodeMap map[compact.NodeID][]byte

func (m nodeMap) ReadNodes(_ context.Context, ids []compact.NodeID) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		h, ok := m[id]
		if !ok {
			return nil, fmt.Errorf("node %d/%d: %w", id.Level, id.Index, log.ErrNotFound)
		}
		out[i] = bytes.Clone(h)
	}
	return out, nil
}

// buildTree appends the leaves to a compact range, recording every perfect
// node in a nodeMap, and to the reference tree.
func buildTree(t testing.TB, leaves [][]byte) (nodeMap, *testonly.Tree) {
	t.Helper()
	nodes := nodeMap{}
	rf := &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	rng := rf.NewEmptyRange(0)
	ref := testonly.New(rfc6962.DefaultHasher)
	for _, l := range leaves {
		if err := rng.Append(log.LeafHash(l), func(id compact.NodeID, h []byte) { nodes[id] = h }); err != nil {
			t.Fatal(err)
		}
		ref.AppendData(l)
	}
	return nodes, ref
}

func numberedLeaves(n int) [][]byte {
	leaves := make([][]byte, n)
	for i := range leaves {
		leaves[i] = fmt.Appendf(nil, "leaf %d", i)
	}
	return leaves
}

func dh(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func equalHashes(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func TestProofsAgainstReferenceTree(t *testing.T) {
	ctx := context.Background()
	const n = 70
	nodes, ref := buildTree(t, numberedLeaves(n))
	for size := uint64(1); size <= n; size++ {
		root := ref.HashAt(size)
		for index := uint64(0); index < size; index++ {
			got, err := log.ProveInclusion(ctx, nodes, index, size)
			if err != nil {
				t.Fatalf("ProveInclusion(%d, %d): %v", index, size, err)
			}
			want, err := ref.InclusionProof(index, size)
			if err != nil {
				t.Fatal(err)
			}
			if !equalHashes(got, want) {
				t.Fatalf("ProveInclusion(%d, %d) differs from the reference tree", index, size)
			}
			if err := log.VerifyInclusion(index, size, ref.LeafHash(index), got, root); err != nil {
				t.Fatalf("VerifyInclusion(%d, %d): %v", index, size, err)
			}
		}
		if _, err := log.ProveInclusion(ctx, nodes, size, size); err == nil {
			t.Errorf("ProveInclusion(%d, %d) succeeded for an index outside the tree", size, size)
		}
	}
	for size2 := uint64(0); size2 <= n; size2++ {
		for size1 := uint64(0); size1 <= size2; size1++ {
			got, err := log.ProveConsistency(ctx, nodes, size1, size2)
			if err != nil {
				t.Fatalf("ProveConsistency(%d, %d): %v", size1, size2, err)
			}
			want, err := ref.ConsistencyProof(size1, size2)
			if err != nil {
				t.Fatal(err)
			}
			if !equalHashes(got, want) {
				t.Fatalf("ProveConsistency(%d, %d) differs from the reference tree", size1, size2)
			}
			if size1 == 0 {
				continue // nothing to verify against the empty tree
			}
			if err := log.VerifyConsistency(size1, size2, got, ref.HashAt(size1), ref.HashAt(size2)); err != nil {
				t.Fatalf("VerifyConsistency(%d, %d): %v", size1, size2, err)
			}
		}
	}
	if _, err := log.ProveConsistency(ctx, nodes, 5, 4); err == nil {
		t.Error("ProveConsistency(5, 4) succeeded")
	}
	// A proof needing a node the reader lacks fails with ErrNotFound.
	if _, err := log.ProveInclusion(ctx, nodes, 0, n+1); !errors.Is(err, log.ErrNotFound) {
		t.Errorf("ProveInclusion beyond the stored tree: got %v, want ErrNotFound", err)
	}
}

// The RFC 6962 test vectors of the Certificate Transparency C++ code, as
// restated in transparency-dev/merkle proof/verify_test.go: the tree of the
// eight leaves in testonly.LeafInputs, its roots at sizes 1..8, and proofs.
var (
	rfcRoots = [][]byte{
		dh("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
		dh("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"),
		dh("aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77"),
		dh("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
		dh("4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4"),
		dh("76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef"),
		dh("ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c"),
		dh("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"),
	}
	rfcInclusion = []struct {
		index, size uint64
		proof       [][]byte
	}{
		{0, 1, nil},
		{0, 8, [][]byte{
			dh("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
			dh("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
			dh("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
		}},
		{5, 8, [][]byte{
			dh("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
			dh("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
			dh("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
		}},
		{2, 3, [][]byte{
			dh("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"),
		}},
		{1, 5, [][]byte{
			dh("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
			dh("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
			dh("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
		}},
	}
	rfcConsistency = []struct {
		size1, size2 uint64
		proof        [][]byte
	}{
		{1, 1, nil},
		{1, 8, [][]byte{
			dh("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
			dh("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
			dh("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
		}},
		{6, 8, [][]byte{
			dh("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
			dh("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
			dh("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
		}},
		{2, 5, [][]byte{
			dh("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
			dh("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
		}},
		{6, 7, [][]byte{
			dh("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
			dh("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f"),
			dh("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
		}},
	}
)

func TestRFC6962Vectors(t *testing.T) {
	ctx := context.Background()
	leaves := testonly.LeafInputs()
	nodes, ref := buildTree(t, leaves)
	for i, want := range rfcRoots {
		if got := ref.HashAt(uint64(i + 1)); !bytes.Equal(got, want) {
			t.Fatalf("reference root at size %d = %x, want %x", i+1, got, want)
		}
	}
	if got, want := log.EmptyRoot(), dh("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"); !bytes.Equal(got, want) {
		t.Errorf("EmptyRoot() = %x, want %x", got, want)
	}
	for _, v := range rfcInclusion {
		got, err := log.ProveInclusion(ctx, nodes, v.index, v.size)
		if err != nil {
			t.Fatalf("ProveInclusion(%d, %d): %v", v.index, v.size, err)
		}
		if !equalHashes(got, v.proof) {
			t.Errorf("ProveInclusion(%d, %d) = %x, want %x", v.index, v.size, got, v.proof)
		}
		root := rfcRoots[v.size-1]
		leaf := log.LeafHash(leaves[v.index])
		if err := log.VerifyInclusion(v.index, v.size, leaf, v.proof, root); err != nil {
			t.Errorf("VerifyInclusion(%d, %d): %v", v.index, v.size, err)
		}
		if v.size > 1 {
			if err := log.VerifyInclusion(v.index^1, v.size, leaf, v.proof, root); err == nil {
				t.Errorf("VerifyInclusion(%d, %d) accepted the proof of index %d", v.index^1, v.size, v.index)
			}
		}
	}
	for _, v := range rfcConsistency {
		got, err := log.ProveConsistency(ctx, nodes, v.size1, v.size2)
		if err != nil {
			t.Fatalf("ProveConsistency(%d, %d): %v", v.size1, v.size2, err)
		}
		if !equalHashes(got, v.proof) {
			t.Errorf("ProveConsistency(%d, %d) = %x, want %x", v.size1, v.size2, got, v.proof)
		}
		r1, r2 := rfcRoots[v.size1-1], rfcRoots[v.size2-1]
		if err := log.VerifyConsistency(v.size1, v.size2, v.proof, r1, r2); err != nil {
			t.Errorf("VerifyConsistency(%d, %d): %v", v.size1, v.size2, err)
		}
		if v.size1 != v.size2 {
			if err := log.VerifyConsistency(v.size1, v.size2, v.proof, r2, r1); err == nil {
				t.Errorf("VerifyConsistency(%d, %d) accepted swapped roots", v.size1, v.size2)
			}
		}
	}
}

// The examples of c2sp.org/signed-note and golang.org/x/mod/sumdb/note.
func TestSignedNoteVectors(t *testing.T) {
	const (
		skey = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
		vkey = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
		text = "If you think cryptography is the answer to your problem,\n" +
			"then you don't know what your problem is.\n"
		signed = text + "\n— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
	)
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := note.Sign(&note.Note{Text: text}, s)
	if err != nil {
		t.Fatal(err)
	}
	if string(msg) != signed {
		t.Errorf("signed note:\n%s\nwant:\n%s", msg, signed)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := note.Open([]byte(signed), note.VerifierList(v)); err != nil || n.Text != text {
		t.Errorf("Open(PeterNeumann vector) = %v, %v", n, err)
	}

	const (
		fooKey  = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
		fooNote = "This is an example message.\n\n— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n"
	)
	fv, err := note.NewVerifier(fooKey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open([]byte(fooNote), note.VerifierList(fv))
	if err != nil {
		t.Fatalf("Open(example.com/foo vector): %v", err)
	}
	if n.Text != "This is an example message.\n" {
		t.Errorf("example.com/foo text = %q", n.Text)
	}
	tampered := strings.Replace(fooNote, "example message", "example massage", 1)
	if _, err := note.Open([]byte(tampered), note.VerifierList(fv)); err == nil {
		t.Error("Open accepted a tampered example.com/foo note")
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	s, v := logtest.NewKey(t, "example.com/log")
	for _, c := range []log.Checkpoint{
		{Origin: "example.com/log", Size: 0, Hash: log.EmptyRoot()},
		{Origin: "example.com/log", Size: 20852163, Hash: log.LeafHash([]byte("x"))},
		{Origin: "example.com/log", Size: 1<<64 - 1, Hash: log.LeafHash(nil), Extensions: []string{"ext one", "ext two"}},
	} {
		text := c.String()
		got, err := log.ParseCheckpoint(text)
		if err != nil {
			t.Fatalf("ParseCheckpoint(%q): %v", text, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("ParseCheckpoint(String()) = %+v, want %+v", got, c)
		}
		msg, err := log.SignCheckpoint(c, s)
		if err != nil {
			t.Fatal(err)
		}
		opened, n, err := log.OpenCheckpoint(msg, v)
		if err != nil {
			t.Fatalf("OpenCheckpoint: %v", err)
		}
		if !reflect.DeepEqual(opened, c) || n.Text != text {
			t.Errorf("OpenCheckpoint = %+v, want %+v", opened, c)
		}
		if unverified, err := log.ParseCheckpointNote(msg); err != nil || !reflect.DeepEqual(unverified, c) {
			t.Errorf("ParseCheckpointNote = %+v, %v", unverified, err)
		}
	}

	// The example of c2sp.org/tlog-checkpoint.
	const sofa = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
	c, err := log.ParseCheckpoint(sofa)
	if err != nil {
		t.Fatal(err)
	}
	if c.Origin != "example.com/behind-the-sofa" || c.Size != 20852163 || hex.EncodeToString(c.Hash) != "0ac5186a91863e8e1d90c808014aa89bf5da8e3ee1d9f07630f0378f68f1ab62" {
		t.Errorf("ParseCheckpoint(tlog-checkpoint example) = %+v", c)
	}
	if c.String() != sofa {
		t.Errorf("String() = %q, want %q", c.String(), sofa)
	}

	for _, bad := range []string{
		"",
		"example.com/log\n1\n",
		"example.com/log\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=",    // no final newline
		"\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n",                 // empty origin
		"example.com/log\n01\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n", // leading zero
		"example.com/log\n-1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n",
		"example.com/log\n18446744073709551616\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n",
		"example.com/log\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2=\n",    // not strict base64
		"example.com/log\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jx\n",       // short hash
		"example.com/log\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n", // empty extension
		"example.com/log\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\r\n", // base64 with \r
		"example.com/log\n1\nCsUYapGGPo4dkMgIAUqom/Xajj\r7h2fB2MPA3j2jxq2I=\n",
	} {
		if c, err := log.ParseCheckpoint(bad); err == nil {
			t.Errorf("ParseCheckpoint(%q) = %+v, want error", bad, c)
		}
	}

	// Signing needs the origin's key; opening needs the log's key.
	other, otherV := logtest.NewKey(t, "example.com/other")
	if _, err := log.SignCheckpoint(log.Checkpoint{Origin: "example.com/log", Size: 1, Hash: log.LeafHash(nil)}, other); err == nil {
		t.Error("SignCheckpoint accepted a signer that is not the origin")
	}
	msg, err := log.SignCheckpoint(log.Checkpoint{Origin: "example.com/other", Size: 1, Hash: log.LeafHash(nil)}, other)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := log.OpenCheckpoint(msg, v); err == nil {
		t.Error("OpenCheckpoint accepted another log's checkpoint")
	}
	_, impostor := logtest.NewKey(t, "example.com/other")
	if _, _, err := log.OpenCheckpoint(msg, impostor); err == nil {
		t.Error("OpenCheckpoint accepted a checkpoint signed by another key of the same name")
	}
	if _, _, err := log.OpenCheckpoint(msg, otherV); err != nil {
		t.Errorf("OpenCheckpoint: %v", err)
	}
}

// The examples of c2sp.org/tlog-tiles.
func TestTileGeometry(t *testing.T) {
	type tile struct {
		level int
		n     uint64
	}
	for _, tc := range []struct {
		size uint64
		want map[tile]int // every tile that exists, by width
	}{
		{size: 0, want: map[tile]int{}},
		{size: 1, want: map[tile]int{{0, 0}: 1}},
		{size: 256, want: map[tile]int{{0, 0}: 256, {1, 0}: 1}},
		{size: 70000, want: func() map[tile]int {
			m := map[tile]int{}
			for n := uint64(0); n < 273; n++ {
				m[tile{0, n}] = 256
			}
			m[tile{0, 273}] = 112
			m[tile{1, 0}] = 256
			m[tile{1, 1}] = 17
			m[tile{2, 0}] = 1
			return m
		}()},
	} {
		for level := 0; level <= 3; level++ {
			for n := uint64(0); n < 300; n++ {
				got := log.TileWidthAt(level, n, tc.size)
				if want := tc.want[tile{level, n}]; got != want {
					t.Errorf("size %d: TileWidthAt(%d, %d) = %d, want %d", tc.size, level, n, got, want)
				}
				if level == 0 {
					if eg := log.TileWidthAt(log.EntriesLevel, n, tc.size); eg != got {
						t.Errorf("size %d: entry bundle %d width %d, want %d like level 0", tc.size, n, eg, got)
					}
				}
			}
		}
	}
	if w := log.TileWidthAt(63, 0, 1<<64-1); w != 0 {
		t.Errorf("TileWidthAt(63, 0, max) = %d, want 0", w)
	}
	if w := log.TileWidthAt(64, 0, 1<<64-1); w != 0 {
		t.Errorf("TileWidthAt(64, 0, max) = %d, want 0", w)
	}
	if w := log.TileWidthAt(7, 0, 1<<64-1); w != 255 {
		t.Errorf("TileWidthAt(7, 0, max) = %d, want 255", w)
	}

	ids := log.Tile{Level: 1, N: 2, W: 3}.NodeIDs()
	want := []compact.NodeID{compact.NewNodeID(8, 512), compact.NewNodeID(8, 513), compact.NewNodeID(8, 514)}
	if !reflect.DeepEqual(ids, want) {
		t.Errorf("NodeIDs() = %v, want %v", ids, want)
	}
}

func TestTilePaths(t *testing.T) {
	for _, tc := range []struct {
		tile log.Tile
		path string
	}{
		{log.Tile{Level: 0, N: 1234067, W: 256}, "tile/0/x001/x234/067"},
		{log.Tile{Level: 0, N: 0, W: 256}, "tile/0/000"},
		{log.Tile{Level: 2, N: 1000, W: 1}, "tile/2/x001/000.p/1"},
		{log.Tile{Level: 63, N: 999, W: 255}, "tile/63/999.p/255"},
		{log.Tile{Level: log.EntriesLevel, N: 5, W: 17}, "tile/entries/005.p/17"},
		{log.Tile{Level: log.EntriesLevel, N: 1234067, W: 256}, "tile/entries/x001/x234/067"},
		{log.Tile{Level: 1, N: 1<<64 - 1, W: 256}, "tile/1/x018/x446/x744/x073/x709/x551/615"},
	} {
		if got := tc.tile.Path(); got != tc.path {
			t.Errorf("%+v.Path() = %q, want %q", tc.tile, got, tc.path)
		}
		got, err := log.ParseTilePath(tc.path)
		if err != nil || got != tc.tile {
			t.Errorf("ParseTilePath(%q) = %+v, %v, want %+v", tc.path, got, err, tc.tile)
		}
	}
	for _, bad := range []string{
		"", "tile/", "tile/0", "tile/0/", "tile/0/1", "tile/0/0001", "tile/0/x1/000",
		"tile/00/000", "tile/64/000", "tile/-1/000", "tile/data/000", "tile/+1/000",
		"tile/0/001/002", "tile/0/x000/001", "tile/0/x001/x002",
		"tile/0/000.p/0", "tile/0/000.p/256", "tile/0/000.p/017", "tile/0/000.p/", "tile/0/000.p/x",
		"tile/0/x018/x446/x744/x073/x709/x551/616", // 2^64
		"tile/0/x001/x002/x003/x004/x005/x006/x007/008",
		"tiles/0/000", "/tile/0/000", "tile/0/000/", "tile/8/0/000",
	} {
		if got, err := log.ParseTilePath(bad); err == nil {
			t.Errorf("ParseTilePath(%q) = %+v, want error", bad, got)
		}
	}
}

func TestEntryBundle(t *testing.T) {
	entries := [][]byte{[]byte("one"), {}, bytes.Repeat([]byte{'x'}, log.MaxEntrySize)}
	b, err := log.MarshalEntryBundle(entries)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x00\x03one\x00\x00\xff\xff")) {
		t.Errorf("bundle starts %q", b[:10])
	}
	got, err := log.ParseEntryBundle(b)
	if err != nil || !equalHashes(got, entries) {
		t.Errorf("ParseEntryBundle(MarshalEntryBundle) = %d entries, %v", len(got), err)
	}
	if _, err := log.MarshalEntryBundle([][]byte{make([]byte, log.MaxEntrySize+1)}); !errors.Is(err, log.ErrEntryTooLarge) {
		t.Errorf("MarshalEntryBundle(oversized) error = %v, want ErrEntryTooLarge", err)
	}
	for _, bad := range [][]byte{{0}, {0, 2, 'a'}} {
		if _, err := log.ParseEntryBundle(bad); err == nil {
			t.Errorf("ParseEntryBundle(%q) succeeded", bad)
		}
	}
}

// signedTree builds a tree of n leaves and signs its checkpoint.
func signedTree(t *testing.T, n int, s note.Signer) (nodeMap, [][]byte, []byte) {
	t.Helper()
	leaves := numberedLeaves(n)
	nodes, ref := buildTree(t, leaves)
	cp, err := log.SignCheckpoint(log.Checkpoint{Origin: s.Name(), Size: uint64(n), Hash: ref.Hash()}, s)
	if err != nil {
		t.Fatal(err)
	}
	return nodes, leaves, cp
}

func TestReceipt(t *testing.T) {
	ctx := context.Background()
	s, v := logtest.NewKey(t, "example.com/log")
	const n = 37
	nodes, leaves, cp := signedTree(t, n, s)
	receipt := func(i uint64) *log.Receipt {
		p, err := log.ProveInclusion(ctx, nodes, i, n)
		if err != nil {
			t.Fatal(err)
		}
		return &log.Receipt{Extra: log.LeafHash(leaves[i]), Index: i, Proof: p, Checkpoint: cp}
	}
	for i := uint64(0); i < n; i++ {
		r := receipt(i)
		text := r.String()
		if !strings.HasPrefix(text, log.ReceiptHeader+"\nextra ") {
			t.Fatalf("receipt starts %q", text[:40])
		}
		got, err := log.ParseReceipt([]byte(text))
		if err != nil {
			t.Fatalf("ParseReceipt: %v\n%s", err, text)
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("ParseReceipt(String()) = %+v, want %+v", got, r)
		}
		if got.String() != text {
			t.Errorf("receipt does not round-trip")
		}
		c, err := got.Verify(log.LeafHash(leaves[i]), v)
		if err != nil {
			t.Fatalf("Verify(%d): %v", i, err)
		}
		if c.Size != n {
			t.Errorf("Verify returned size %d, want %d", c.Size, n)
		}
	}
	// Without the extra line, too.
	r := receipt(3)
	r.Extra = nil
	if got, err := log.ParseReceipt([]byte(r.String())); err != nil || got.Extra != nil || got.String() != r.String() {
		t.Errorf("receipt without extra: %+v, %v", got, err)
	}
	if _, err := r.Verify(log.LeafHash(leaves[3]), v); err != nil {
		t.Errorf("Verify without extra: %v", err)
	}

	_, otherV := logtest.NewKey(t, "example.com/log")
	_, otherName := logtest.NewKey(t, "example.com/other")
	for _, tc := range []struct {
		name   string
		modify func(r *log.Receipt) (leaf []byte, v note.Verifier)
	}{
		{"wrong leaf", func(r *log.Receipt) ([]byte, note.Verifier) { return log.LeafHash(leaves[5]), v }},
		{"wrong leaf without extra", func(r *log.Receipt) ([]byte, note.Verifier) {
			r.Extra = nil
			return log.LeafHash(leaves[5]), v
		}},
		{"short leaf hash", func(r *log.Receipt) ([]byte, note.Verifier) { return r.Extra[:31], v }},
		{"wrong index", func(r *log.Receipt) ([]byte, note.Verifier) {
			r.Index++
			return r.Extra, v
		}},
		{"index outside the tree", func(r *log.Receipt) ([]byte, note.Verifier) {
			r.Index = n
			return r.Extra, v
		}},
		{"tampered proof", func(r *log.Receipt) ([]byte, note.Verifier) {
			r.Proof[1] = bytes.Clone(r.Proof[1])
			r.Proof[1][0] ^= 1
			return r.Extra, v
		}},
		{"missing proof line", func(r *log.Receipt) ([]byte, note.Verifier) {
			r.Proof = r.Proof[1:]
			return r.Extra, v
		}},
		{"tampered checkpoint", func(r *log.Receipt) ([]byte, note.Verifier) {
			r.Checkpoint = bytes.Replace(r.Checkpoint, []byte("\n37\n"), []byte("\n38\n"), 1)
			return r.Extra, v
		}},
		{"wrong key", func(r *log.Receipt) ([]byte, note.Verifier) { return r.Extra, otherV }},
		{"other log", func(r *log.Receipt) ([]byte, note.Verifier) { return r.Extra, otherName }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := receipt(4)
			leaf, v := tc.modify(r)
			if c, err := r.Verify(leaf, v); err == nil {
				t.Errorf("Verify succeeded: %+v", c)
			}
			// The same after a trip through the text form.
			if p, err := log.ParseReceipt([]byte(r.String())); err == nil {
				if _, err := p.Verify(leaf, v); err == nil {
					t.Error("Verify of the parsed receipt succeeded")
				}
			}
		})
	}

	good := receipt(4).String()
	for _, bad := range []string{
		"",
		"c2sp.org/tlog-proof@v2\n" + good[len(log.ReceiptHeader)+1:],
		strings.Replace(good, "index 4\n", "index 04\n", 1),
		strings.Replace(good, "index 4\n", "index -4\n", 1),
		strings.Replace(good, "index 4\n", "index 18446744073709551616\n", 1),
		strings.Replace(good, "index 4\n", "", 1),
		strings.Replace(good, "extra ", "extra !", 1),
		strings.Replace(good, "\n\n", "\n", 1), // no blank line
		good[:strings.Index(good, "\n\n")+2],   // no checkpoint
		strings.Replace(good, "index 4\n", "index 4\nAAAA\n", 1),
		strings.Replace(good, "\nindex", "\r\nindex", 1), // \r inside base64
		strings.Replace(good, "\n\n", "\r\n\n", 1),
	} {
		if r, err := log.ParseReceipt([]byte(bad)); err == nil {
			t.Errorf("ParseReceipt(%q) = %+v, want error", bad, r)
		}
	}
}

// TestRangeRoot holds RangeRoot to the reference tree at every size up to
// 40, and checks that a range of the wrong length gives nil.
func TestRangeRoot(t *testing.T) {
	rf := &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	rng := rf.NewEmptyRange(0)
	ref := testonly.New(rfc6962.DefaultHasher)
	for size := uint64(0); size <= 40; size++ {
		if got, want := log.RangeRoot(size, rng.Hashes()), ref.Hash(); !bytes.Equal(got, want) {
			t.Fatalf("RangeRoot(%d) = %x, want %x", size, got, want)
		}
		if size > 0 && log.RangeRoot(size+1, rng.Hashes()) != nil && len(compact.RangeNodes(0, size+1, nil)) != len(rng.Hashes()) {
			t.Fatalf("RangeRoot(%d) with the range of size %d is not nil", size+1, size)
		}
		l := fmt.Appendf(nil, "leaf %d", size)
		if err := rng.Append(log.LeafHash(l), nil); err != nil {
			t.Fatal(err)
		}
		ref.AppendData(l)
	}
}
