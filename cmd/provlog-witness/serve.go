package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/net/netutil"

	"github.com/provlog/provlog/cmd/internal/cli"
	"github.com/provlog/provlog/log/durable"
	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/server"
	"github.com/provlog/provlog/witness/witnesspebble"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	cfgPath := fs.String("config", "", "YAML config file")
	addr := fs.String("http", "", "address to serve add-checkpoint on, e.g. localhost:7380")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *cfgPath == "" || *addr == "" {
		return usageErr("--config and --http are required")
	}
	cfg, logs, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	signer, err := readKey(cfg.Key)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))

	kv, err := witnesspebble.Open(filepath.Join(cfg.Data, "db"))
	if errors.Is(err, witnesspebble.ErrLocked) {
		return fmt.Errorf("data dir %s is held by another running provlog-witness", cfg.Data)
	}
	if err != nil {
		return err
	}
	defer kv.Close()
	evidenceDir := filepath.Join(cfg.Data, "evidence")
	w, err := server.New(server.Options{
		Signer: signer,
		Logs:   logs,
		Store:  witness.KVStore(kv),
		Logger: logger,
		OnFork: func(e *witness.Evidence) {
			path, err := writeEvidence(evidenceDir, e)
			if err != nil {
				logger.Error("writing fork evidence", "origin", e.Origin, "err", err)
				return
			}
			logger.Error("LOG FORK: evidence written", "origin", e.Origin, "file", path)
		},
	})
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.Handle("/add-checkpoint", w)
	mux.HandleFunc("GET /{$}", func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(rw, "provlog-witness %s\n\nPOST /add-checkpoint (c2sp.org/tlog-witness@v1.0.0)\n\nlogs:\n", w.VerifierKey())
		for _, l := range logs {
			fmt.Fprintf(rw, "  %s\n", l.Origin)
		}
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	conns := maxConns()
	ln = netutil.LimitListener(ln, conns)
	srv := &http.Server{
		Handler:           http.MaxBytesHandler(mux, witness.MaxRequestSize+1),
		ReadHeaderTimeout: 5 * time.Second,
		// An add-checkpoint request needs a few hundred bytes of headers;
		// Go's default of 1 MiB let each of maxConns connections hold
		// that much until its header timeout.
		MaxHeaderBytes: maxHeaderBytes,
		ReadTimeout:    10 * time.Second,
		WriteTimeout:   10 * time.Second,
		IdleTimeout:    2 * time.Minute,
		BaseContext:    func(net.Listener) context.Context { return ctx },
	}
	logger.Info("provlog-witness serving", "addr", ln.Addr().String(), "vkey", w.VerifierKey(), "logs", len(logs), "data", cfg.Data, "max_conns", conns)
	return cli.Serve(ctx, srv, ln, logger, "provlog-witness")
}

// maxConns is how many connections serve accepts at once: half the
// process's file descriptors (Go raises the soft limit to the hard one),
// at most 4096. The rest are the store's and the evidence files': a
// client with network access and no key that held every descriptor with
// idle connections made the store fail to open a file, and the witness
// stopped cosigning until restarted. Connections past the bound wait to
// be accepted.
func maxConns() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur/2 > 4096 {
		return 4096
	}
	return max(int(rl.Cur/2), 1)
}

// maxHeaderBytes bounds a request's headers (Go adds 4 KiB).
const maxHeaderBytes = 16 << 10

// maxEvidenceFiles bounds the evidence files one data dir collects: one
// conclusive file proves a fork, and a log whose key signs ever new
// forks must not fill the witness's disk.
const maxEvidenceFiles = 1000

// writeEvidence writes evidence into dir as a JSON file named after the
// origin, the kind and the two checkpoints
// (<origin hash>-<kind>-<checkpoints hash>.json), and returns its path.
// The same two checkpoints sent again find their file there and write
// nothing; past maxEvidenceFiles files nothing more is written.
func writeEvidence(dir string, e *witness.Evidence) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	o := sha256.Sum256([]byte(e.Origin))
	c := sha256.Sum256([]byte(e.Checkpoints[0] + "\x00" + e.Checkpoints[1]))
	path := filepath.Join(dir, fmt.Sprintf("%x-%s-%x.json", o[:4], e.Kind, c[:8]))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	if len(ents) >= maxEvidenceFiles {
		return "", fmt.Errorf("%s holds %d evidence files already; this one is not written", dir, len(ents))
	}
	if err := durable.CreateFile(path, e.Marshal(), 0o644); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	return path, nil
}
