package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/provlog/provlog/cmd/internal/cli"
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
	srv := &http.Server{
		Handler:           http.MaxBytesHandler(mux, witness.MaxRequestSize+1),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	logger.Info("provlog-witness serving", "addr", ln.Addr().String(), "vkey", w.VerifierKey(), "logs", len(logs), "data", cfg.Data)
	return cli.Serve(ctx, srv, ln, logger, "provlog-witness")
}

// writeEvidence writes fork evidence into dir as a new JSON file named after
// the time and the origin, and returns its path.
func writeEvidence(dir string, e *witness.Evidence) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	h := sha256.Sum256([]byte(e.Origin))
	base := fmt.Sprintf("%s-%s-%x", time.Now().UTC().Format("20060102T150405Z"), e.Kind, h[:4])
	for i := 0; ; i++ {
		name := base + ".json"
		if i > 0 {
			name = fmt.Sprintf("%s-%d.json", base, i)
		}
		path := filepath.Join(dir, name)
		err := writeNewFile(path, e.Marshal(), 0o644)
		if err == nil {
			return path, nil
		}
		if _, serr := os.Stat(path); serr != nil || i == 100 {
			return "", err
		}
	}
}
