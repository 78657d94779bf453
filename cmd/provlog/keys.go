package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log/durable"
)

// Files in a data dir. The keys sit beside the Pebble store, so commands
// such as vkey work while a sidecar holds the store's lock.
const (
	logKeyFile    = "log.key"    // note signer key (PRIVATE+KEY+...), 0600
	logVKeyFile   = "log.vkey"   // note verifier key
	anchorKeyFile = "anchor.key" // P-256 PKCS#8 PEM, 0600
	anchorPubFile = "anchor.pub" // P-256 PKIX PEM
	dbDir         = "db"
	blobDir       = "blobs"
	localToken    = "local.token"
	// tasksIndexFile is the task engine's saved index (opp.Options.IndexFile):
	// derived from the log, so deleting it costs a replay, nothing more.
	tasksIndexFile = "tasks.idx"
)

// keys is a data dir's key material.
type keys struct {
	signer    note.Signer
	verifier  note.Verifier
	vkey      string
	anchorPub []byte // DER SubjectPublicKeyInfo
}

// keygen makes the log's note key and anchoring key in dir. It refuses to
// overwrite existing keys: an origin never changes for a data dir.
func keygen(dir, origin string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating data dir: %w", err)
	}
	for _, f := range []string{logKeyFile, anchorKeyFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return fmt.Errorf("%s already exists: keys are made once per data dir and never replaced", filepath.Join(dir, f))
		}
	}
	if origin == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "localhost"
		}
		origin = "provlog.local/" + h
	}
	if strings.ContainsAny(origin, " +\n\t") {
		return fmt.Errorf("origin %q must not contain spaces, '+' or newlines", origin)
	}
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		return fmt.Errorf("generating log key: %w", err)
	}
	ak, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating anchoring key: %w", err)
	}
	priv, err := x509.MarshalPKCS8PrivateKey(ak)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&ak.PublicKey)
	if err != nil {
		return err
	}
	// Every file is its owner's alone, the public keys too: the data dir
	// is the sidecar's, and they are handed out by provlog vkey and the
	// log API.
	files := []struct {
		name string
		data []byte
	}{
		{logKeyFile, []byte(skey + "\n")},
		{anchorKeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: priv})},
		{anchorPubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})},
		{logVKeyFile, []byte(vkey + "\n")},
	}
	for _, f := range files {
		if err := durable.CreateFile(filepath.Join(dir, f.name), f.data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// loadKeys reads a data dir's keys.
func loadKeys(dir string) (*keys, error) {
	skey, err := os.ReadFile(filepath.Join(dir, logKeyFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no log key in %s: run 'provlog keygen --data %s' first", dir, dir)
	}
	if err != nil {
		return nil, err
	}
	signer, err := note.NewSigner(strings.TrimSpace(string(skey)))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", logKeyFile, err)
	}
	vkey, err := readVKey(filepath.Join(dir, logVKeyFile))
	if err != nil {
		return nil, err
	}
	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", logVKeyFile, err)
	}
	if verifier.Name() != signer.Name() || verifier.KeyHash() != signer.KeyHash() {
		return nil, fmt.Errorf("%s and %s are not one key pair", logKeyFile, logVKeyFile)
	}
	pubPEM, err := os.ReadFile(filepath.Join(dir, anchorPubFile))
	if err != nil {
		return nil, fmt.Errorf("reading anchoring public key: %w", err)
	}
	blk, _ := pem.Decode(pubPEM)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("%s is not a PEM public key", anchorPubFile)
	}
	return &keys{signer: signer, verifier: verifier, vkey: vkey, anchorPub: blk.Bytes}, nil
}

func readVKey(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading verifier key: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
