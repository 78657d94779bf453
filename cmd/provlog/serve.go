package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpebble"
	"github.com/provlog/provlog/log/server"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	cfgPath := fs.String("config", "", "YAML config file (default: the embedded defaults)")
	data := fs.String("data", "", "data dir (overrides the config's data)")
	addr := fs.String("http", "", "serve MCP at /mcp and the log API on this address (default: MCP over stdio)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if *data != "" {
		cfg.Data = *data
	}
	if *addr == "" {
		return errors.New("MCP over stdio is not built yet; run with --http ADDR to serve the log API")
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))

	sc, err := openSidecar(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer sc.close()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           http.MaxBytesHandler(sc.handler(), 1<<20),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
	}
	logger.Info("provlog serving", "addr", ln.Addr().String(), "data", cfg.Data, "origin", sc.keys.signer.Name(),
		"size", sc.size(), "local_token_file", filepath.Join(cfg.Data, localToken))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("provlog shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// sidecar is a running log: keys, store, sequencer and who may read it.
type sidecar struct {
	cfg    *Config
	keys   *keys
	store  *logpebble.Store
	seq    *server.Sequencer
	tokens *tokens
	logger *slog.Logger
	start  time.Time
}

func openSidecar(ctx context.Context, cfg *Config, logger *slog.Logger) (*sidecar, error) {
	if _, err := os.Stat(filepath.Join(cfg.Data, logKeyFile)); errors.Is(err, os.ErrNotExist) {
		if err := keygen(cfg.Data, cfg.Origin); err != nil {
			return nil, err
		}
		logger.Info("made new log keys", "data", cfg.Data)
	}
	k, err := loadKeys(cfg.Data)
	if err != nil {
		return nil, err
	}
	if cfg.Origin != "" && cfg.Origin != k.signer.Name() {
		return nil, fmt.Errorf("config origin %q differs from the data dir's origin %q; an origin never changes for a data dir", cfg.Origin, k.signer.Name())
	}
	tk := &tokens{}
	h, err := ensureLocalToken(cfg.Data)
	if err != nil {
		return nil, err
	}
	tk.add(h, cfg.Actor, false)
	for _, a := range cfg.Actors {
		tk.add(a.TokenSHA256, a.ID, false)
	}
	for _, r := range cfg.Readers {
		tk.add(r.TokenSHA256, r.ID, true)
	}
	if err := os.MkdirAll(filepath.Join(cfg.Data, blobDir), 0o700); err != nil {
		return nil, err
	}
	store, err := logpebble.Open(filepath.Join(cfg.Data, dbDir), &logpebble.Options{
		Logf: func(format string, args ...any) { logger.Info(fmt.Sprintf(format, args...), "component", "pebble") },
	})
	if errors.Is(err, logpebble.ErrLocked) {
		return nil, fmt.Errorf("data dir %s is held by another running provlog", cfg.Data)
	}
	if err != nil {
		return nil, err
	}
	seq, err := server.OpenSequencer(ctx, store, k.signer, k.verifier, &server.SequencerOptions{
		Genesis: func() ([]byte, error) {
			return log.Genesis(time.Now(), k.signer.Name(), k.vkey, k.anchorPub, version)
		},
	})
	if err != nil {
		store.Close()
		return nil, err
	}
	return &sidecar{cfg: cfg, keys: k, store: store, seq: seq, tokens: tk, logger: logger, start: time.Now()}, nil
}

func (s *sidecar) size() uint64 {
	n, _ := s.seq.Checkpoint()
	return n
}

func (s *sidecar) close() {
	if err := s.seq.Close(); err != nil {
		s.logger.Error("closing sequencer", "err", err)
	}
	if err := s.store.Close(); err != nil {
		s.logger.Error("closing store", "err", err)
	}
}

func (s *sidecar) handler() http.Handler {
	mux := http.NewServeMux()
	var authorized func(*http.Request) bool
	if !s.cfg.PublicEntries {
		authorized = func(r *http.Request) bool {
			_, ok := s.tokens.fromRequest(r)
			return ok
		}
	}
	mux.Handle("/log/", server.NewAPI(server.APIOptions{Store: s.store, Seq: s.seq, Authorized: authorized}))
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /metrics", s.metrics)
	return mux
}

func (s *sidecar) healthz(w http.ResponseWriter, r *http.Request) {
	size, _ := s.seq.Checkpoint()
	body := map[string]any{"status": "ok", "origin": s.keys.signer.Name(), "size": size}
	code := http.StatusOK
	if err := s.seq.Err(); err != nil {
		body["status"] = "failed"
		body["error"] = err.Error()
		code = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(body)
}

func (s *sidecar) metrics(w http.ResponseWriter, r *http.Request) {
	st := s.seq.Stats()
	size, _ := s.seq.Checkpoint()
	failed := 0
	if s.seq.Err() != nil {
		failed = 1
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	for _, m := range []struct {
		name, typ, help string
		v               float64
	}{
		{"provlog_log_size", "gauge", "Entries in the log (size of the latest checkpoint).", float64(size)},
		{"provlog_appends_total", "counter", "Entries committed since start.", float64(st.Appends)},
		{"provlog_commits_total", "counter", "Batches committed since start.", float64(st.Commits)},
		{"provlog_commit_errors_total", "counter", "Failed commits since start.", float64(st.CommitErrors)},
		{"provlog_commit_seconds_total", "counter", "Time spent committing batches.", float64(st.CommitNanos) / 1e9},
		{"provlog_sequencer_failed", "gauge", "1 if the sequencer stopped after a failed commit.", float64(failed)},
		{"provlog_uptime_seconds", "gauge", "Seconds since the sidecar started.", time.Since(s.start).Seconds()},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %g\n", m.name, m.help, m.name, m.typ, m.name, m.v)
	}
}
