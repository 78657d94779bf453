package main

// provlog token add: a bearer token made, printed once, stored hashed.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
)

// runToken adds an actor's bearer token to a config file: the token is
// printed once, and only its SHA-256 is stored.
func runToken(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "add" {
		return usageErr("say 'token add'")
	}
	fs := newFlags("token add", stderr)
	cfgPath := fs.String("config", "", "config file to add the token to (created if missing)")
	actor := fs.String("actor", "", "actor id the token acts as")
	reader := fs.Bool("reader", false, "a read-only token for the log API (listed under readers:)")
	if err := parseFlags(fs, args[1:], 0); err != nil {
		return err
	}
	if *cfgPath == "" || *actor == "" {
		return usageErr("--config and --actor are required")
	}
	if err := checkActorID(*actor); err != nil {
		return usageErr("--actor: %v", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	tok := base64.RawURLEncoding.EncodeToString(raw)
	sum := sha256.Sum256([]byte(tok))
	if err := addTokenToConfig(*cfgPath, *actor, hex.EncodeToString(sum[:]), *reader); err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	fmt.Fprintf(stderr, "stored the SHA-256 of a new token for %q in %s; the token above is shown only now\n", *actor, *cfgPath)
	return nil
}
