package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const h1 = "1111111111111111111111111111111111111111111111111111111111111111"

// TestInsertTokenKeepsFormatting: token add changes nothing but the lines
// it adds.
func TestInsertTokenKeepsFormatting(t *testing.T) {
	cases := []struct {
		name, in, key string
		added         string // the lines added, in order
		wantErr       string
	}{
		{"no such key", "# my config\ndata: ./d   # here\nservers:\n  - {id: a, command: [x]}\n", "actors",
			"actors:\n  - id: \"bob\"\n    token_sha256: " + h1 + "\n", ""},
		{"no final newline", "data: ./d", "actors", "actors:\n  - id: \"bob\"\n", ""},
		{"block list, own indentation", "actors:\n    # the team\n    - id: alice     # Alice\n      token_sha256: " + strings.Repeat("a", 64) + "\nservers: []\n", "actors",
			"    - id: \"bob\"\n      token_sha256: " + h1 + "\n", ""},
		{"block list not indented", "readers:\n- id: r1\n  token_sha256: " + strings.Repeat("b", 64) + "\n# trailing comment\n", "readers",
			"- id: \"bob\"\n  token_sha256: " + h1 + "\n", ""},
		{"empty key", "actors:\nservers: []\n", "actors", "  - id: \"bob\"\n", ""},
		{"empty flow list", "actors: []  # none yet\nservers: []\n", "actors", "  - id: \"bob\"\n", ""},
		{"flow list with items", "actors: [{id: a, token_sha256: " + strings.Repeat("a", 64) + "}]\n", "actors", "", "not a block list"},
		{"not a mapping", "- a\n- b\n", "actors", "", "not a YAML mapping"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := insertToken([]byte(tc.in), tc.key, "bob", h1)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Every line of the input is still there, in order, unchanged
			// (but for the emptied flow list).
			got := string(out)
			rest := got
			for _, l := range strings.SplitAfter(tc.in, "\n") {
				l = strings.TrimSuffix(l, "\n")
				if tc.name == "empty flow list" && strings.HasPrefix(l, "actors:") {
					l = "actors: # none yet"
				}
				i := strings.Index(rest, l)
				if i < 0 {
					t.Fatalf("line %q lost or changed:\n%s", l, got)
				}
				rest = rest[i+len(l):]
			}
			if !strings.Contains(got, tc.added) {
				t.Fatalf("added lines %q missing:\n%s", tc.added, got)
			}
		})
	}
}

// TestTokenAddCommand: the command keeps the file's text and mode, and
// the sidecar's config loader reads the token back.
func TestTokenAddCommand(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "servers.yaml")
	orig := "# provlog\ndata: ./d        # beside this file\nactors:\n    - id: alice\n      token_sha256: " + strings.Repeat("a", 64) + "\n"
	os.WriteFile(cfg, []byte(orig), 0o640)
	tok := addToken(t, cfg, "bob")
	b, _ := os.ReadFile(cfg)
	if !strings.HasPrefix(string(b), orig) {
		t.Fatalf("token add changed the file's text:\n%s", b)
	}
	if fi, _ := os.Stat(cfg); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}
	c, err := loadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tk := &tokens{}
	for _, a := range c.Actors {
		tk.add(a.TokenSHA256, a.ID, false)
	}
	if e, ok := tk.lookup(tok); !ok || e.actor != "bob" {
		t.Fatalf("the new token does not act as bob: %+v %v", e, ok)
	}
	if strings.Contains(string(b), tok) {
		t.Fatal("the token itself is in the config")
	}
	// A config reached through a symbolic link is edited where it is,
	// and the link stays a link.
	link := filepath.Join(dir, "link.yaml")
	if err := os.Symlink(cfg, link); err != nil {
		t.Fatal(err)
	}
	addToken(t, link, "dave")
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("token add replaced the link %s: %v %v", link, fi.Mode(), err)
	}
	if c, err := loadConfig(cfg); err != nil || !slices.ContainsFunc(c.Actors, func(a TokenConfig) bool { return a.ID == "dave" }) {
		t.Fatalf("the linked config did not get dave's token: %v %+v", err, c)
	}
	// The sidecar's own actor ids, and one that reads as them (Cyrillic
	// o), are refused, and the file is left as it was.
	before, _ := os.ReadFile(cfg)
	for _, id := range []string{"provlog", "provlog.operator", "pr\u043evlog.operator"} {
		if out, code := runCmd(t, "token", "add", "--config", cfg, "--actor", id); code != 2 || !strings.Contains(out, "the sidecar's own") {
			t.Errorf("token add --actor %s: %d %s", id, code, out)
		}
	}
	if after, _ := os.ReadFile(cfg); !bytes.Equal(after, before) {
		t.Error("a refused token add changed the config")
	}
	// A missing file is created.
	fresh := filepath.Join(dir, "new.yaml")
	addToken(t, fresh, "carol")
	if c, err := loadConfig(fresh); err != nil || len(c.Actors) != 1 || c.Actors[0].ID != "carol" {
		t.Fatalf("new file: %v %+v", err, c)
	}
}
