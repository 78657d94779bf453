package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/log/bundle"
)

// getView fetches base+path from a view, whatever its status.
func getView(t *testing.T, base, path string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// TestViewSymlinkOut: a bundle whose files are symbolic links out of its
// directory is refused by provlog view, which would otherwise serve the
// files they point to (a key, the auditor's own files); a link inside the
// directory still opens.
func TestViewSymlinkOut(t *testing.T) {
	const secret = "secret.example/outside+00000000+c2VjcmV0"
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "00000000000000000002.json"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, target, fetch string }{
		{bundle.VKeyFile, filepath.Join(outside, "secret"), "/ui/log.json"},
		{bundle.WitnessesFile, filepath.Join(outside, "secret"), "/ui/log.json"},
		{bundle.AnchorsDir, outside, "/log/anchors/00000000000000000002.json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := exportBundle(t, makeDataDir(t, 3), "")
			os.RemoveAll(filepath.Join(dir, c.name))
			if err := os.Symlink(c.target, filepath.Join(dir, c.name)); err != nil {
				t.Fatal(err)
			}
			v, err := openView(context.Background(), dir)
			if err != nil {
				if !strings.Contains(err.Error(), c.name) {
					t.Errorf("the error does not name %s: %v", c.name, err)
				}
				return
			}
			// A file it may do without (witnesses.txt) may be left out,
			// but what it serves must not be the outside file.
			srv := serveViewOf(t, v)
			if _, body := getView(t, srv, c.fetch); strings.Contains(body, secret) {
				t.Errorf("%s, a link out of the bundle, is served at %s: %s", c.name, c.fetch, body)
			}
		})
	}
	t.Run("inside", func(t *testing.T) {
		dir := exportBundle(t, makeDataDir(t, 3), "")
		if err := os.Rename(filepath.Join(dir, bundle.VKeyFile), filepath.Join(dir, "vkey.real")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("vkey.real", filepath.Join(dir, bundle.VKeyFile)); err != nil {
			t.Fatal(err)
		}
		v, err := openView(context.Background(), dir)
		if err != nil {
			t.Fatalf("a link inside the bundle: %v", err)
		}
		// The directory's bytes are served as data: no sniffing them into
		// a page, no script if a browser renders them anyway.
		resp, body := getView(t, serveViewOf(t, v), "/log/entry/1")
		h := resp.Header
		if resp.StatusCode != 200 || h.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(h.Get("Content-Security-Policy"), "sandbox") {
			t.Errorf("GET /log/entry/1: %d, headers %v: %s", resp.StatusCode, h, body)
		}
	})
}

// TestViewEvidenceIndexLies: an evidence whose manifest names an entry
// past its checkpoint is refused, and one whose checkpoint claims a
// size of 2^62 opens at once, without its task history, instead of
// replaying 2^61 entries first.
func TestViewEvidenceIndexLies(t *testing.T) {
	data := makeDataDir(t, 3)
	// addContext makes an evidence, then adds to its manifest a context
	// entry at index i (a copy of its own entry and receipt).
	addContext := func(t *testing.T, i uint64) string {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "ev")
		if o, code := runCmd(t, "evidence", "--data", data, "--index", "1", "--out", dir); code != 0 {
			t.Fatalf("evidence: %s", o)
		}
		var m map[string]any
		mb, err := os.ReadFile(filepath.Join(dir, evidence.ManifestFile))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(mb, &m); err != nil {
			t.Fatal(err)
		}
		ctxs, _ := m["context"].([]any)
		m["context"] = append(ctxs, map[string]any{"index": i})
		mb, _ = json.Marshal(m)
		writeFile(t, filepath.Join(dir, evidence.ManifestFile), mb)
		name := filepath.Join(dir, evidence.ContextDir, fmt.Sprint(i))
		os.MkdirAll(filepath.Dir(name), 0o700)
		for src, ext := range map[string]string{evidence.EntryFile: ".json", evidence.ReceiptFile: ".tlog-proof"} {
			b, err := os.ReadFile(filepath.Join(dir, src))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, name+ext, b)
		}
		return dir
	}

	dir := addContext(t, 1<<62)
	_, err := openView(context.Background(), dir)
	if err == nil || !strings.Contains(err.Error(), "past its checkpoint's size") {
		t.Errorf("an evidence naming entry 2^62 of a log of 4: %v; want it refused", err)
	}

	dir = addContext(t, 1<<61)
	cpPath := filepath.Join(dir, bundle.CheckpointFile)
	cp, err := os.ReadFile(cpPath)
	if err != nil {
		t.Fatal(err)
	}
	// The checkpoint's second line is its size; the signature is not
	// checked here (the page checks it, and fails).
	writeFile(t, cpPath, regexp.MustCompile(`(?m)^4$`).ReplaceAll(cp, []byte(fmt.Sprint(uint64(1)<<62))))
	v, err := openView(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if v.size != 1<<62 || v.tasks != nil || !strings.Contains(v.noTasks, "rebuilds a task's history only over") {
		t.Errorf("size %d, tasks %v, noTasks %q; want 2^62, none and why", v.size, v.tasks, v.noTasks)
	}
}

// TestViewBundleAnchors: the anchor records of a bundle, read through
// its os.Root, are listed as a sidecar lists them and served byte for
// byte.
func TestViewBundleAnchors(t *testing.T) {
	l := newUILog(t, true)
	l.close()
	out := filepath.Join(t.TempDir(), "bundle")
	if o, code := runCmd(t, "export", "--data", l.data, "--out", out); code != 0 {
		t.Fatalf("export: %s", o)
	}
	ents, err := os.ReadDir(filepath.Join(out, bundle.AnchorsDir))
	if err != nil || len(ents) == 0 {
		t.Fatalf("the bundle's anchors: %v, %v", ents, err)
	}
	base := serveView(t, context.Background(), out)
	var list []struct {
		Name string `json:"name"`
		URL  string `json:"url"`
		Size uint64 `json:"size"`
	}
	if err := json.Unmarshal([]byte(fetch(t, base, "/log/anchors")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != len(ents) {
		t.Fatalf("listed %+v; the bundle holds %d records", list, len(ents))
	}
	for i, s := range list {
		want, err := os.ReadFile(filepath.Join(out, bundle.AnchorsDir, s.Name))
		if err != nil || s.Size == 0 || (i > 0 && s.Size < list[i-1].Size) {
			t.Errorf("record %d: %+v, %v; want a record of the bundle, by size", i, s, err)
		}
		if got := fetch(t, base, s.URL); got != string(want) {
			t.Errorf("%s is not the record's bytes", s.URL)
		}
	}
	if got := fetch(t, base, "/log/anchors?after="+list[len(list)-1].Name); got != "[]" {
		t.Errorf("the page after the last record: %s", got)
	}
}
