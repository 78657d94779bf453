package main

// What verify-proof says when a receipt does not verify: the most likely
// cause in words, not the verifier's internals.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
)

// checkEntryBytes compares the entry file's leaf hash with the one the
// receipt names, and when they differ says whether the file holds the same
// entry re-encoded (pretty-printed, a trailing newline) rather than the
// exact bytes the log holds.
func checkEntryBytes(entry []byte, r *log.Receipt) error {
	leaf := log.LeafHash(entry)
	if r.Extra == nil || bytes.Equal(leaf, r.Extra) {
		return nil
	}
	if sameEntryReencoded(entry, r.Extra) {
		return errNotExactBytes(r.Index)
	}
	return fmt.Errorf("the receipt is for another entry: it names leaf hash %x, the --entry file's is %x", r.Extra, leaf)
}

// sameEntryReencoded reports whether entry is JSON whose canonical (RFC
// 8785) form has the given leaf hash.
func sameEntryReencoded(entry, leaf []byte) bool {
	if !json.Valid(entry) {
		return false
	}
	c, err := log.Canonicalize(entry)
	return err == nil && bytes.Equal(log.LeafHash(c), leaf)
}

func errNotExactBytes(index uint64) error {
	return fmt.Errorf("the --entry file holds entry %d re-encoded (pretty-printed, reordered or with a trailing newline), "+
		"not the exact bytes the log holds; a receipt proves exact bytes: save them unchanged from /log/entry/%d "+
		"(curl -o FILE) or from the tool result", index, index)
}

// explainReceiptFailure rewrites a failed verification of r against the
// log key v. entry is the --entry file's bytes, or nil.
func explainReceiptFailure(err error, r *log.Receipt, v note.Verifier, entry []byte) error {
	var un *note.UnverifiedNoteError
	if errors.As(err, &un) {
		return fmt.Errorf("the receipt's checkpoint is not signed by the key you gave: %s", signerMismatch(r.Checkpoint, un.Note, v))
	}
	if entry != nil && r.Extra == nil && strings.Contains(err.Error(), "inclusion proof does not verify") {
		c, cerr := log.Canonicalize(entry)
		if cerr == nil && !bytes.Equal(c, entry) {
			if _, verr := r.Verify(log.LeafHash(c), v); verr == nil {
				return errNotExactBytes(r.Index)
			}
		}
		return fmt.Errorf("%w (the --entry file is not the entry at index %d of this tree)", err, r.Index)
	}
	return err
}

// signerMismatch says how the checkpoint's signers differ from the
// verifier key: another key of the same name (a second log made with the
// same origin), or another name altogether.
func signerMismatch(cp []byte, n *note.Note, v note.Verifier) string {
	origin := "?"
	if c, err := log.ParseCheckpointNote(cp); err == nil {
		origin = c.Origin
	}
	var signers []string
	sameName := false
	for _, s := range n.UnverifiedSigs {
		signers = append(signers, fmt.Sprintf("%s (key ID %08x)", s.Name, s.Hash))
		sameName = sameName || s.Name == v.Name()
	}
	got := strings.Join(signers, ", ")
	if sameName {
		return fmt.Sprintf("it is signed by %s, and --vkey is %s with key ID %08x: the same name with another key. "+
			"Another log uses this origin (often a second data dir that made new keys), or --vkey is not this log's key",
			got, v.Name(), v.KeyHash())
	}
	return fmt.Sprintf("the checkpoint's origin is %q and it is signed by %s, but --vkey names %s (key ID %08x): "+
		"the receipt comes from another log, or --vkey is not its key", origin, got, v.Name(), v.KeyHash())
}
