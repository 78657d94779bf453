package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/bundle"
	"github.com/provlog/provlog/opp"
)

// bundleEntries reads a verified bundle's entries (provenance.jsonl) by
// log index, as a log.Storage's Entries does: one pass notes where each
// line starts, and each read takes its lines from the file, so memory is
// 8 bytes an entry whatever their size.
type bundleEntries struct {
	f    *os.File
	from uint64
	offs []int64 // where entry from+i starts; the last is the file's end
}

func openBundleEntries(dir string, from uint64) (*bundleEntries, error) {
	f, err := os.Open(filepath.Join(dir, bundle.EntriesFile))
	if err != nil {
		return nil, err
	}
	b := &bundleEntries{f: f, from: from, offs: []int64{0}}
	r := bufio.NewReaderSize(f, 1<<16)
	var off int64
	for {
		line, err := r.ReadSlice('\n')
		off += int64(len(line))
		if len(line) > 0 && line[len(line)-1] == '\n' {
			b.offs = append(b.offs, off)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			return b, nil
		} else if err != nil {
			f.Close()
			return nil, err
		}
	}
}

func (b *bundleEntries) Close() error { return b.f.Close() }

// end is the index after the bundle's last entry.
func (b *bundleEntries) end() uint64 { return b.from + uint64(len(b.offs)-1) }

// Entries returns the entries [start, end); one outside the bundle's range
// is not found (log.ErrNotFound).
func (b *bundleEntries) Entries(ctx context.Context, start, end uint64) ([][]byte, error) {
	if start < b.from || end > b.end() || start > end {
		return nil, fmt.Errorf("entries [%d, %d): the bundle holds [%d, %d): %w", start, end, b.from, b.end(), log.ErrNotFound)
	}
	lo, hi := b.offs[start-b.from], b.offs[end-b.from]
	buf := make([]byte, hi-lo)
	if _, err := b.f.ReadAt(buf, lo); err != nil {
		return nil, fmt.Errorf("reading entries [%d, %d) of %s: %w", start, end, bundle.EntriesFile, err)
	}
	es := make([][]byte, 0, end-start)
	for i := start; i < end; i++ {
		l := b.offs[i-b.from+1] - b.offs[i-b.from]
		es = append(es, bytes.TrimSuffix(buf[:l], []byte("\n")))
		buf = buf[l:]
	}
	return es, nil
}

// bundleTasks rebuilds the tasks from a bundle's entries and holds their
// entries to the ownership and provenance rules, as audit does with the
// log: the problems are the entries that break one. The rules need every
// task entry from the log's first; a bundle that starts later is not
// checked, and the text says so.
func bundleTasks(ctx context.Context, be *bundleEntries, m *bundle.Manifest) (string, *log.ProblemsError, error) {
	if m.From > 0 {
		return fmt.Sprintf("the ownership and provenance rules not applied (the bundle starts at entry %d; they need the log from its first)", m.From), nil, nil
	}
	tasks, err := opp.Rebuild(ctx, be, m.To)
	if err != nil {
		return "", nil, fmt.Errorf("rebuilding the tasks from the bundle's entries: %w", err)
	}
	if vs := tasks.Violations(); len(vs) > 0 {
		pe := &log.ProblemsError{What: "task entries"}
		for _, v := range vs {
			pe.Problems = append(pe.Problems, v.Problem())
		}
		return "", pe, nil
	}
	return fmt.Sprintf("%d rebuilt from the entries, none breaking the ownership and provenance rules", tasks.Len()), nil, nil
}
