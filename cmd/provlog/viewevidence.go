package main

// provlog view of an evidence directory (anchor/evidence): its entry and
// context entries with the receipts it holds, its anchor record as the
// page's anchor listing, and the task history its context entries give.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"path"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/log"
)

func openEvidenceView(ctx context.Context, dir string, mb []byte) (*view, error) {
	var m evidence.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", evidence.ManifestFile, err)
	}
	v := &view{dir: dir, source: "evidence", byLeaf: map[string]uint64{}, given: map[uint64]givenEntry{}, missing: m.Missing}
	if err := v.readKeys(); err != nil {
		return nil, err
	}
	add := func(i uint64, entryFile, receiptFile string) error {
		e, err := readIn(dir, entryFile)
		if err != nil {
			return err
		}
		rc, err := readIn(dir, receiptFile)
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
	if err := v.rebuildTasks(ctx, sparseReader(v.given), end); err != nil {
		return nil, err
	}
	if b, err := readIn(dir, evidence.AnchorFile); err == nil {
		if v.anchors, err = anchorListing(b); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// sparseReader reads the entries an evidence holds; every other entry
// reads as {}, which no task rule looks at.
type sparseReader map[uint64]givenEntry

func (s sparseReader) Entries(_ context.Context, start, end uint64) ([][]byte, error) {
	out := make([][]byte, 0, end-start)
	for i := start; i < end; i++ {
		if g, ok := s[i]; ok {
			out = append(out, g.entry)
		} else {
			out = append(out, []byte("{}"))
		}
	}
	return out, nil
}

// anchorListing serves /log/anchors as a sidecar would for the one anchor
// record b: its summary, and the record's bytes.
func anchorListing(b []byte) (http.Handler, error) {
	rec, err := anchor.ParseRecord(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", evidence.AnchorFile, err)
	}
	sum := sha256.Sum256(b)
	st := &anchor.Stored{Name: evidence.AnchorFile, SHA256: hex.EncodeToString(sum[:]), Bytes: b, Record: rec}
	list, err := json.Marshal([]online.Summary{{Name: st.Name, URL: "/log/anchors/" + st.Name, AnchorEntry: anchor.Fields(st)}})
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/log/anchors" && r.URL.Query().Has("after"):
			w.Write([]byte("[]")) // one record: no second page
		case r.URL.Path == "/log/anchors":
			w.Write(list)
		case r.URL.Path == "/log/anchors/"+st.Name:
			w.Write(b)
		default:
			http.NotFound(w, r)
		}
	}), nil
}
