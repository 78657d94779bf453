package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/log/server"
)

// TestRawRetainedResult guards the one place a retained result is hashed
// again: a result that was not I-JSON (a lone surrogate, which JCS
// refuses) is kept as received, named by its result_sha256, and audit
// finds it intact, checking it as the entry's result_canonical: false
// says. A bundle carries no payloads, so export and verify-bundle hash
// none and only count it as named.
func TestRawRetainedResult(t *testing.T) {
	data := makeDataDir(t, 0)
	raw := []byte(`{"content":[{"type":"text","text":"\ud800"}]}`)
	if _, err := log.Canonicalize(raw); err == nil {
		t.Fatal("JCS took a lone surrogate: the result is not raw")
	}
	k, err := loadKeys(data)
	if err != nil {
		t.Fatal(err)
	}
	store, err := openStore(data, false)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := server.OpenSequencer(context.Background(), store, k.signer, k.verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	bs, _ := blobs.Open(filepath.Join(data, blobDir))
	sum, err := bs.Put(raw)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c := appendEntry(t, seq, &log.Entry{Kind: log.KindCall, Time: now, Actor: "bob", Fields: map[string]any{
		"server": "s", "tool": "t", "args": map[string]any{}, "started": now.Format(log.TimeFormat)}})
	res := &log.CallResultEntry{Time: now, Actor: "bob", Call: c, ResultSHA256: sum, ResultBytes: int64(len(raw)), ResultRaw: true, ResultRetained: true, Duration: 1}
	b, err := res.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seq.Append(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	seq.Close()
	store.Close()

	if out, code := runCmd(t, "audit", "--data", data); code != 0 || !strings.Contains(out, "1 named by entries, 1 present and intact, 0 purged") {
		t.Fatalf("audit: %d %s", code, out)
	}
	bundle := filepath.Join(t.TempDir(), "bundle")
	if out, code := runCmd(t, "export", "--data", data, "--out", bundle); code != 0 {
		t.Fatalf("export: %d %s", code, out)
	}
	if out, code := runCmd(t, "verify-bundle", bundle); code != 0 || !strings.Contains(out, "the entries name 1 (not in the bundle); 0 of them were purged") {
		t.Fatalf("verify-bundle: %d %s", code, out)
	}
}
