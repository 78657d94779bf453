package main

// provlog view of an evidence directory (anchor/evidence): its entry and
// context entries with the receipts it holds, its anchor record as the
// page's anchor listing, and the task history its context entries give;
// and the anchor listing of a bundle's records.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/bundle"
)

// maxSparse bounds the entries a task history is rebuilt over from an
// evidence's few: a manifest can name any index below its checkpoint's
// size, and the task index holds log indices below 2^40. The rebuild reads
// the entries the evidence holds alone (opp.SparseReader), wherever
// they are.
const maxSparse = 1 << 40

func openEvidenceView(ctx context.Context, root *os.Root, mb []byte) (*view, error) {
	var m evidence.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", evidence.ManifestFile, err)
	}
	v := &view{root: root, source: "evidence", byLeaf: map[string]uint64{}, given: map[uint64]givenEntry{}, missing: m.Missing}
	if err := v.readKeys(); err != nil {
		return nil, err
	}
	add := func(i uint64, entryFile, receiptFile string) error {
		if i >= v.size {
			return fmt.Errorf("%s names entry %d, past its checkpoint's size %d", evidence.ManifestFile, i, v.size)
		}
		e, err := readIn(root, entryFile)
		if err != nil {
			return err
		}
		rc, err := readIn(root, receiptFile)
		if err != nil {
			return err
		}
		v.given[i] = givenEntry{entry: e, receipt: rc}
		v.byLeaf[string(log.LeafHash(e))] = i
		return nil
	}
	if err := add(m.Index, evidence.EntryFile, evidence.ReceiptFile); err != nil {
		return nil, err
	}
	end := m.Index + 1
	for _, c := range m.Context {
		name := path.Join(evidence.ContextDir, fmt.Sprint(c.Index))
		if err := add(c.Index, name+".json", name+".tlog-proof"); err != nil {
			return nil, err
		}
		end = max(end, c.Index+1)
	}
	// The context holds the task's history and what its claims cite; the
	// other entries below end are of no task's, or of other tasks.
	if end > maxSparse {
		v.noTasks = fmt.Sprintf("the evidence's entries go up to %d, and the view rebuilds a task's history only over the first %d entries", end-1, maxSparse)
	} else if err := v.rebuildTasks(ctx, newSparseReader(v.given), end); err != nil {
		return nil, err
	}
	if b, err := readIn(root, evidence.AnchorFile); err == nil {
		rec, err := anchor.ParseRecord(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", evidence.AnchorFile, err)
		}
		v.anchors = anchorListing([]*anchor.Stored{{Name: evidence.AnchorFile, SHA256: sha256Hex(b), Bytes: b, Record: rec}})
	}
	return v, nil
}

// sparseReader reads the entries an evidence holds; every other entry
// reads as {}, which no task rule looks at. It is an opp.SparseReader:
// a rebuild reads the entries held, not the indices between them.
type sparseReader struct {
	given map[uint64]givenEntry
	held  []uint64 // the indices of given, ascending
}

func newSparseReader(given map[uint64]givenEntry) sparseReader {
	return sparseReader{given, slices.Sorted(maps.Keys(given))}
}

func (s sparseReader) Held(i uint64) (uint64, bool) {
	k, _ := slices.BinarySearch(s.held, i)
	if k == len(s.held) {
		return 0, false
	}
	return s.held[k], true
}

func (s sparseReader) Entries(_ context.Context, start, end uint64) ([][]byte, error) {
	out := make([][]byte, 0, end-start)
	for i := start; i < end; i++ {
		if g, ok := s.given[i]; ok {
			out = append(out, g.entry)
		} else {
			out = append(out, []byte("{}"))
		}
	}
	return out, nil
}

// bundleAnchors reads the anchor records of a bundle's anchors folder,
// if it has one, through root: the files that parse as records, ordered
// as anchor.Store orders them (by tree size, then sequence number).
func bundleAnchors(root *os.Root) ([]*anchor.Stored, error) {
	ents, err := fs.ReadDir(root.FS(), bundle.AnchorsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", bundle.AnchorsDir, err)
	}
	var out []*anchor.Stored
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := readIn(root, path.Join(bundle.AnchorsDir, e.Name()))
		if err != nil {
			return nil, err
		}
		if rec, err := anchor.ParseRecord(b); err == nil {
			out = append(out, &anchor.Stored{Name: e.Name(), SHA256: sha256Hex(b), Bytes: b, Record: rec})
		}
	}
	// A record's name is its size in 20 digits, then -N for the N-th
	// record of that size, then (from when names held one) its short
	// hash: a shorter name of one size comes first.
	slices.SortFunc(out, func(a, b *anchor.Stored) int {
		return cmp.Or(cmp.Compare(a.Name[:min(20, len(a.Name))], b.Name[:min(20, len(b.Name))]), cmp.Compare(len(a.Name), len(b.Name)), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// anchorListing serves /log/anchors as a sidecar would for records, which
// parse: their summaries, in one page, and each record's bytes.
func anchorListing(records []*anchor.Stored) http.Handler {
	list := []online.Summary{}
	byName := map[string][]byte{}
	for _, st := range records {
		list = append(list, online.Summary{Name: st.Name, URL: "/log/anchors/" + st.Name, AnchorEntry: anchor.Fields(st)})
		byName[st.Name] = st.Bytes
	}
	body, err := json.Marshal(list)
	if err != nil {
		panic("view: encoding anchor summaries: " + err.Error()) // strings and numbers: cannot fail
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, isRecord := strings.CutPrefix(r.URL.Path, "/log/anchors/")
		b, ok := byName[name]
		switch {
		case r.URL.Path == "/log/anchors" && r.URL.Query().Has("after"):
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte("[]")) // all records are on the first page
		case r.URL.Path == "/log/anchors":
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
		case isRecord && ok:
			w.Header().Set("Content-Type", "application/json")
			w.Write(b)
		default:
			http.NotFound(w, r)
		}
	})
}
