package replay

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/proxy"
)

// TestChangedPathsNameNoFreshMember: the paths of a changed result name
// only member names the record holds. A fresh result's member the record
// lacks is named by the object holding it: its name is the server's word
// now, never recorded and never scrubbed, and may be a value the sidecar
// redacted (here the record, retained scrubbed, holds "[redacted]" where
// the server now answers with the secret as a member name). Before, the
// report printed "/structuredContent/s3cret-token".
func TestChangedPathsNameNoFreshMember(t *testing.T) {
	bs, err := blobs.Open(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	then := `{"content":[{"type":"text","text":"ok"}],"isError":false,"structuredContent":{"s3cret-token":1}}`
	scrubbed, err := log.Canonicalize([]byte(`{"content":[{"type":"text","text":"ok"}],"isError":false,"structuredContent":{"[redacted]":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	kept, err := bs.Put(scrubbed)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := log.Canonicalize([]byte(`{"content":[{"type":"text","text":"ok"}],"isError":false,"structuredContent":{"a":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bs.Put(plain); err != nil {
		t.Fatal(err)
	}
	now := answer(`{"content":[{"type":"text","text":"ok"}],"isError":false,"structuredContent":{"s3cret-token":2}}`)
	url := wireServer(t, map[string]*atomic.Value{"tools/list": answer(`{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`), "tools/call": now})
	for _, c := range []struct {
		name  string
		entry map[string]any
	}{
		{"retained scrubbed", map[string]any{"result_sha256": jcsSum(t, then), "result_retained": true, "result_retained_sha256": kept}},
		{"retained as received", map[string]any{"result_sha256": blobs.Sum(plain), "result_retained": true}},
	} {
		fields := map[string]any{"server": "w", "tool": "echo", "args": map[string]any{}}
		for k, v := range c.entry {
			fields[k] = v
		}
		opts := Options{Servers: []proxy.ServerConfig{{ID: "w", URL: url, Replay: true}}, Blobs: bs, Runs: 1}
		rep, err := Run(context.Background(), [][]byte{callEntry(t, fields)}, 5, opts)
		if err != nil {
			t.Fatal(err)
		}
		o := rep.Outcomes[0]
		if o.Class != Changed || len(o.Paths) == 0 || strings.Contains(strings.Join(o.Paths, " "), "s3cret") {
			t.Errorf("%s: %s, paths %q; want changed, the paths naming no member the record lacks", c.name, o.Class, o.Paths)
		}
	}
}
