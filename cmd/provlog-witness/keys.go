package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/durable"
)

func runKeygen(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("keygen", stderr)
	name := fs.String("name", "", "the witness's name, a schema-less URL such as witness.example/w1")
	keyFile := fs.String("key", "", "file to write the private key to (0600); it must not exist")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *name == "" || *keyFile == "" {
		return usageErr("--name and --key are required")
	}
	skey, vkey, err := log.GenerateCosignerKey(rand.Reader, *name)
	if err != nil {
		return err
	}
	if err := writeNewFile(*keyFile, []byte(skey+"\n"), 0o600); err != nil {
		return err
	}
	fmt.Fprintln(stdout, vkey)
	return nil
}

func runVKey(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("vkey", stderr)
	keyFile := fs.String("key", "", "the witness's private key file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *keyFile == "" {
		return usageErr("--key is required")
	}
	s, err := readKey(*keyFile)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, s.Verifier())
	return nil
}

// readKey reads a witness key file made by keygen.
func readKey(path string) (*log.CosignatureSigner, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the witness key: %w", err)
	}
	s, err := log.ParseCosignerKey(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// parseLogVerifier takes a log's verifier key, or the name of a file
// holding one.
func parseLogVerifier(arg string) (note.Verifier, error) {
	v, err := note.NewVerifier(arg)
	if err == nil {
		return v, nil
	}
	b, ferr := os.ReadFile(arg)
	if ferr != nil {
		return nil, fmt.Errorf("%q is neither a verifier key (%v) nor a readable file (%v)", arg, err, ferr)
	}
	v, err = note.NewVerifier(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", arg, err)
	}
	return v, nil
}

// writeNewFile writes a file that must not exist yet, durably.
func writeNewFile(path string, data []byte, perm fs.FileMode) error {
	err := durable.CreateFile(path, data, perm)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s already exists; not overwriting it", path)
	}
	return err
}
