package main

// `provlog token add` edits the config file's text: it inserts one list
// item and leaves every other byte (comments, indentation, quoting, key
// order) as the operator wrote it.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"gopkg.in/yaml.v3"

	"github.com/provlog/provlog/log/durable"
)

// addTokenToConfig adds {id, token_sha256} to the actors (or readers) list
// of a YAML config, durably, creating the file if it is missing.
func addTokenToConfig(path, actor, hash string, reader bool) error {
	// A config reached through a symbolic link is edited where it is:
	// writing the link's path replaced the link with a file of its own,
	// and the config the sidecar reads never got the token.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	unlock, err := lockConfigDir(path)
	if err != nil {
		return err
	}
	defer unlock()
	b, err := os.ReadFile(path)
	perm, uid, gid := fs.FileMode(0o600), -1, -1
	if err == nil {
		if fi, err := os.Stat(path); err == nil {
			perm = fi.Mode().Perm()
			// The edit keeps the file its owner's and group's (a
			// service user's config, edited with sudo).
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				uid, gid = int(st.Uid), int(st.Gid)
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	key := "actors"
	if reader {
		key = "readers"
	}
	out, err := insertToken(b, key, actor, hash)
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	// The edited config must load as the sidecar loads it: a token add
	// that broke it (an id in an issuer's namespace, one listed twice)
	// printed a token that never worked, and the sidecar's reloads, and
	// its next start, failed until someone mended the file by hand.
	if _, err := parseConfig(path, out); err != nil {
		return usageErr("the config would not load with this token, so it is left as it was: %v", err)
	}
	if err := durable.WriteFileAs(path, out, perm, uid, gid); err != nil {
		return fmt.Errorf("%w; run token add as the config's owner (or root)", err)
	}
	return nil
}

// lockConfigDir holds an exclusive flock on the config file's directory
// until unlock: two token adds at once both read the old text, and the
// last rename won, so the other's token, printed and "stored", never
// worked. The directory is locked, not the file, since each edit replaces
// the file (a lock on the old one would not keep the next reader out),
// and it leaves no lock file behind.
func lockConfigDir(path string) (unlock func(), err error) {
	dir := filepath.Dir(path)
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("locking %s for the edit: %w", dir, err)
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX); err != nil {
		d.Close()
		return nil, fmt.Errorf("locking %s for the edit: %w", dir, err)
	}
	return func() { d.Close() }, nil
}

// insertToken returns the config text with one more item in the list
// under key. It checks that the result parses and holds the item where it
// should.
func insertToken(text []byte, key, actor, hash string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil, err
	}
	var root *yaml.Node
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root = doc.Content[0]
	}
	if root != nil && root.Kind != yaml.MappingNode {
		return nil, errors.New("the config is not a YAML mapping")
	}
	item := func(indent string) string {
		return fmt.Sprintf("%s- id: %q\n%s  token_sha256: %s\n", indent, actor, indent, hash)
	}
	lines := splitLines(text)
	var list, keyNode *yaml.Node
	if root != nil {
		for i := 0; i+1 < len(root.Content); i += 2 {
			if root.Content[i].Value == key {
				keyNode, list = root.Content[i], root.Content[i+1]
			}
		}
	}
	var out []byte
	switch {
	case list == nil:
		// No such key: a new block at the end of the file.
		out = append(ensureNewline(text), key+":\n"+item("  ")...)
	case list.Kind == yaml.ScalarNode && list.Tag == "!!null" && list.Line == keyNode.Line && list.Value == "":
		// "actors:" with nothing after it: the items follow the key line.
		out = insertAfterLine(lines, keyNode.Line, item(strings.Repeat(" ", keyNode.Column-1)+"  "))
	case list.Kind == yaml.SequenceNode && list.Style&yaml.FlowStyle == 0 && len(list.Content) > 0:
		first := list.Content[0]
		line := lines[first.Line-1]
		dash := strings.LastIndex(line[:first.Column-1], "-")
		if dash < 0 {
			return nil, fmt.Errorf("line %d: cannot find the list item's dash", first.Line)
		}
		out = insertAfterLine(lines, lastLine(list), item(line[:dash]))
	case list.Kind == yaml.SequenceNode && list.Style&yaml.FlowStyle != 0 && len(list.Content) == 0 && list.Line == keyNode.Line:
		// "actors: []": the empty flow list becomes a block list.
		line := lines[keyNode.Line-1]
		rest := strings.TrimSpace(line[list.Column-1:])
		if !strings.HasPrefix(rest, "[]") {
			return nil, fmt.Errorf("line %d: cannot edit %q", keyNode.Line, line)
		}
		head, tail := strings.TrimRight(line[:list.Column-1], " "), strings.TrimSpace(rest[2:])
		if tail != "" {
			head += " " + tail
		}
		lines[keyNode.Line-1] = head + "\n"
		out = insertAfterLine(lines, keyNode.Line, item(strings.Repeat(" ", keyNode.Column-1)+"  "))
	default:
		return nil, fmt.Errorf("line %d: %s is not a block list that token add can extend; write it as \"%s:\" followed by \"  - id: ...\" items", keyNode.Line, key, key)
	}
	if err := checkTokenAdded(out, key, actor, hash); err != nil {
		return nil, fmt.Errorf("adding the token would break the file (%v); add it by hand", err)
	}
	return out, nil
}

// checkTokenAdded parses the edited text and checks the new item is the
// last one under key.
func checkTokenAdded(text []byte, key, actor, hash string) error {
	var m map[string]yaml.Node
	if err := yaml.Unmarshal(text, &m); err != nil {
		return err
	}
	n := m[key]
	var list []TokenConfig
	if err := n.Decode(&list); err != nil {
		return err
	}
	if len(list) == 0 || list[len(list)-1] != (TokenConfig{ID: actor, TokenSHA256: hash}) {
		return fmt.Errorf("the new %s item is not where it should be", key)
	}
	return nil
}

// lastLine returns the last line any node in n's subtree starts on.
func lastLine(n *yaml.Node) int {
	l := n.Line
	for _, c := range n.Content {
		l = max(l, lastLine(c))
	}
	return l
}

func splitLines(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, string(b)+"\n")
			break
		}
		out = append(out, string(b[:i+1]))
		b = b[i+1:]
	}
	return out
}

// insertAfterLine returns lines with s inserted after line n (1-based).
func insertAfterLine(lines []string, n int, s string) []byte {
	var b strings.Builder
	for i, l := range lines {
		b.WriteString(l)
		if i+1 == n {
			b.WriteString(s)
		}
	}
	return []byte(b.String())
}

func ensureNewline(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		return append(b, '\n')
	}
	return b
}
