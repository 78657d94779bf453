package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/provlog/provlog/cmd/internal/cli"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/log/server"
	"github.com/provlog/provlog/opp"
	"github.com/provlog/provlog/opp/oppmcp"
	"github.com/provlog/provlog/proxy"
	"github.com/provlog/provlog/proxy/authn"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	cfgPath := fs.String("config", "", "YAML config file (default: the embedded defaults)")
	data := fs.String("data", "", "data dir (overrides the config's data)")
	addr := fs.String("http", "", "serve MCP at /mcp and the log API on this address (default: MCP over stdio)")
	storeURL := fs.String("store", "", "keep the log in PostgreSQL (postgres://…) instead of Pebble in the data dir; overrides the config's store")
	verify := fs.Bool("verify-on-open", false, "read every block of the log store before serving (config verify_on_open)")
	pprofAddr := fs.String("pprof", "", "serve Go's profiling endpoints (/debug/pprof/) on this loopback address (default: off)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	// A client that closes its end of stdout or stderr would have the
	// next write there kill the process (Go's default for SIGPIPE on fd 1
	// and 2), its calls under way left without an outcome; with SIGPIPE
	// noted the write fails instead, and the calls are recorded as usual.
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, syscall.SIGPIPE)
	defer signal.Stop(sigpipe)
	var pln net.Listener
	if *pprofAddr != "" {
		var err error
		if pln, err = listenPprof(*pprofAddr); err != nil {
			return err
		}
		defer pln.Close()
	}
	// stdout carries MCP in stdio mode, so the process log goes to stderr.
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		if *addr == "" {
			return serveStdioAnyway(ctx, nil, err, os.Stdin, stdout, logger)
		}
		return err
	}
	logger, _ = newLogger(stderr, cfg.Log) // loadConfig checked cfg.Log
	if pln != nil {
		pctx, stopPprof := context.WithCancel(ctx)
		defer stopPprof()
		go servePprof(pctx, pln, logger)
	}
	// A reload compares the file with the file, not with what the flags
	// made of it, and passes over the keys the flags set.
	file := *cfg
	flagged := map[string]bool{"data": *data != "", "store": *storeURL != "", "verify_on_open": *verify}
	if *data != "" {
		cfg.Data = *data
	}
	cfg.VerifyOnOpen = cfg.VerifyOnOpen || *verify
	if *storeURL != "" {
		cfg.Store = *storeURL
	}
	// The address is taken before anything is made: a port in use must not
	// leave a new data dir with fresh keys behind.
	var ln net.Listener
	if *addr != "" {
		if ln, err = net.Listen("tcp", *addr); err != nil {
			return fmt.Errorf("cannot serve on %s: %w", *addr, err)
		}
		defer ln.Close()
	}
	sc, err := openSidecar(ctx, cfg, logger, *addr == "")
	if err != nil {
		if *addr == "" {
			return serveStdioAnyway(ctx, cfg, err, os.Stdin, stdout, logger)
		}
		return err
	}
	defer sc.close()
	// SIGHUP asks for a reload. Without a config file there is nothing to
	// reload, and the signal's default (the process ends, its calls under
	// way with it) is not what was asked for.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if *cfgPath != "" {
		go sc.watchConfig(wctx, &configWatch{path: *cfgPath, file: &file, flagged: flagged}, hup)
	} else {
		go ignoreHUP(wctx, hup, logger)
	}
	return sc.serve(ctx, cfg, ln, logger)
}

// ignoreHUP says, for each SIGHUP until ctx ends, that a sidecar started
// without --config has nothing to reload.
func ignoreHUP(ctx context.Context, hup <-chan os.Signal, logger *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			logger.Warn("SIGHUP ignored: provlog was started without --config, so there is no config to reload")
		}
	}
}

// serve serves MCP over stdio (ln nil), or MCP and the log API on ln,
// until ctx ends; cfg is the config it started with.
func (sc *sidecar) serve(ctx context.Context, cfg *Config, ln net.Listener, logger *slog.Logger) error {
	// The namespaces other sidecars of a shared log reserved while this one
	// started are read before its first request, not at the follower's
	// next turn.
	if sh, ok := sc.store.(log.SharedStorage); ok {
		if err := sc.ns.catchUp(ctx, sh); err != nil {
			return fmt.Errorf("reading the shared log for OAuth actors' namespaces: %w", err)
		}
	}
	if ln == nil {
		logger.Info("provlog serving MCP over stdio", "data", cfg.Data, "origin", sc.keys.signer.Name(), "actor", cfg.Actor, "size", sc.size())
		err := sc.proxy.ServeStdio(ctx)
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	srv := &http.Server{
		Handler:           proxy.Front(sc.handler(), proxy.FrontOptions{}),
		ReadHeaderTimeout: proxy.ReadHeaderTimeout,
		IdleTimeout:       proxy.IdleTimeout,
	}
	srv.RegisterOnShutdown(sc.proxy.EndStreams)
	if cfg.Store == "" {
		idle := cfg.Sessions.Idle
		if idle <= 0 {
			idle = proxy.DefaultSessionIdle
		}
		unpublish, err := sc.joinFile.publish(cfg.Data, ln.Addr(), cfg.Actor, idle)
		if err != nil {
			return err
		}
		defer unpublish()
	}
	// Said once it serves: a failure above (a full or read-only data dir)
	// ended it without a line saying it served.
	logger.Info("provlog serving", "addr", ln.Addr().String(), "mcp", "http://"+ln.Addr().String()+"/mcp", "data", cfg.Data,
		"origin", sc.keys.signer.Name(), "size", sc.size(), "local_token_file", filepath.Join(cfg.Data, localToken))
	return cli.Serve(ctx, srv, ln, logger, "provlog")
}

// sidecar is a running provlog: keys, store, sequencer, task engine, the
// MCP proxy, and who may do what.
type sidecar struct {
	cfg   *Config
	keys  *keys
	store log.Storage // logpebble in the data dir, or logpg (store.go)
	seq   *server.Sequencer
	tasks *opp.Engine
	proxy *proxy.Proxy
	// witness collects cosignatures (nil without configured witnesses).
	witness     *witnessing
	stopWitness context.CancelFunc
	// closeShown syncs and closes the record of the newest checkpoint
	// shown (shared stores only; shown.go).
	closeShown func() error
	// logAPI serves /log/ (openLogAPI); closeServed syncs and closes its
	// record of the newest checkpoint /log/checkpoint served (shown.go).
	logAPI      http.Handler
	closeServed func() error
	// servedErr says why that record is not kept (nil: it is): /healthz
	// and provlog__status report it (servedProblem).
	servedErr func() error
	// stopTracing flushes and stops the OTLP exporter (nil: none).
	stopTracing func()
	// tracer makes the log API's spans (nil: no otel: block).
	tracer trace.Tracer
	// anchors anchors checkpoints (nil without anchors: in the config).
	anchors *anchoring
	tokens  *tokens
	// joinFile is sidecar.json, with the hash of the stdio actor's
	// local.token read at the start or last reload, which joining serves
	// check theirs against.
	joinFile *published
	// authn authenticates every HTTP request's token: tokens, and the
	// OAuth issuers of auth:.
	authn  *authn.Authenticator
	logger *slog.Logger
	start  time.Time
	// dirLock holds the data dir of a sidecar on a shared log (dirlock.go);
	// nil when Pebble's lock does.
	dirLock io.Closer
	// blobs holds retained payloads; retention purges them (purge_sidecar.go).
	blobs         *blobs.Store
	stopRetention context.CancelFunc
	retention     sync.WaitGroup
	// ns holds the actor namespaces static tokens may not act in
	// (namespaces_shared.go); on a shared log stopNamespaces stops
	// following it, and background waits for that.
	ns             *namespaces
	stopNamespaces context.CancelFunc
	background     sync.WaitGroup
	// ages indexes the blobs entries name, read once, for purges by age
	// (retention.go).
	ages ageIndex
}

// appendLog is the log as the task engine sees it.
type appendLog struct {
	*server.Sequencer
	log.Storage
}

func (l appendLog) Append(ctx context.Context, e []byte) (*log.Receipt, error) {
	return l.Sequencer.Append(ctx, e)
}

func (l appendLog) Entries(ctx context.Context, start, end uint64) ([][]byte, error) {
	return l.Storage.Entries(ctx, start, end)
}

// openSidecar opens (creating on first start) the data dir and everything
// that runs on it. stdio says whether MCP clients come over stdio, where
// the actor is the config's; over HTTP it is the bearer token's.
func openSidecar(ctx context.Context, cfg *Config, logger *slog.Logger, stdio bool) (_ *sidecar, err error) {
	k, err := openKeys(cfg, logger)
	if err != nil {
		return nil, err
	}
	h, err := ensureLocalToken(cfg.Data)
	if err != nil {
		return nil, err
	}
	// loadConfig held the tokens to the local.token of the file's data
	// dir, which --data may have replaced with another.
	if err := cfg.checkTokenHashes(h); err != nil {
		return nil, err
	}
	tk := newTokens(cfg, h)
	var dirLock io.Closer
	if cfg.Store != "" {
		if dirLock, err = lockDataDir(cfg.Data); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				dirLock.Close()
			}
		}()
	}
	store, err := openLogStore(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	if err := checkStoreOnOpen(ctx, cfg, store, k.verifier, logger); err != nil {
		store.Close()
		return nil, err
	}
	bs, err := openBlobs(cfg.Data, store)
	if err != nil {
		store.Close()
		return nil, err
	}
	sc := &sidecar{cfg: cfg, keys: k, store: store, tokens: tk, joinFile: &published{info: sidecarInfo{TokenSHA256: h}}, logger: logger, start: time.Now(), blobs: bs, dirLock: dirLock,
		ns: &namespaces{data: cfg.Data, logger: logger, logged: map[string]bool{}}}
	if sc.authn, err = authn.New(cfg.Auth, authn.Options{Static: sc.static, Logger: logger}); err != nil {
		store.Close()
		return nil, err
	}
	defer func() {
		if err != nil {
			sc.close()
		}
	}()
	if err := sc.openLog(ctx); err != nil {
		return nil, err
	}
	sh, shared := store.(log.SharedStorage)
	if err := reserveNamespaces(ctx, cfg, sc.nsLog(), sc.ns.logged, logger); err != nil {
		return nil, err
	}
	if err := sc.ns.load(); err != nil {
		return nil, err
	}
	if shared {
		nctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		sc.stopNamespaces = cancel
		sc.background.Go(func() { sc.ns.follow(nctx, sh) })
	}
	lg := appendLog{sc.seq, store}
	sc.tasks, err = opp.Open(ctx, lg, sc.size(), &opp.Options{KnownActor: sc.handoffTarget, IndexFile: filepath.Join(cfg.Data, tasksIndexFile)})
	if err != nil {
		return nil, fmt.Errorf("rebuilding task state: %w", err)
	}
	if from, err := sc.tasks.Resumed(); err == nil {
		logger.Info("task state: from the saved index, and the entries after it", "index_covers", from, "log_size", sc.size())
	} else if from == 0 && sc.size() > 1 {
		logger.Info("task state: replayed the whole log", "entries", sc.size(), "no_saved_index", err.Error())
	}
	if v := sc.tasks.Violations(); len(v) > 0 {
		logger.Warn("the log holds task entries that break a rule; they were ignored", "count", len(v), "first", v[0].String())
	}
	if err := sc.startProxy(ctx, stdio); err != nil {
		return nil, err
	}
	if cfg.Anchors != nil {
		if sc.anchors, err = startAnchoring(ctx, sc, cfg.Anchors, cfg.dir); err != nil {
			return nil, fmt.Errorf("starting anchoring: %w", err)
		}
	}
	size, _ := sc.seq.Checkpoint()
	if err := sc.ages.load(ctx, filepath.Join(cfg.Data, retentionIndexFile), sc.store, size); err != nil {
		sc.logger.Warn("the retention index was not loaded; the next purge by age reads the whole log", "err", err)
	}
	if cfg.Retention.MaxAge > 0 {
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		sc.stopRetention = cancel
		sc.retention.Go(func() { sc.runRetention(rctx) })
	}
	return sc, nil
}

// openKeys loads the data dir's keys, making them on first start; a
// config's origin must be the dir's.
func openKeys(cfg *Config, logger *slog.Logger) (*keys, error) {
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
	return k, nil
}

// openLog opens the sequencer on the sidecar's store and starts
// collecting cosignatures if witnesses are configured.
func (sc *sidecar) openLog(ctx context.Context) error {
	delay := server.DefaultCommitDelay
	if sc.cfg.CommitDelay != nil {
		delay = *sc.cfg.CommitDelay
	}
	opts := &server.SequencerOptions{
		CommitDelay: delay,
		// A full disk resumes in place once space is freed (Pebble only;
		// log/server resume.go says why only a full disk).
		RetryDiskFull: time.Second,
		Genesis: func() ([]byte, error) {
			return log.Genesis(time.Now(), sc.keys.signer.Name(), sc.keys.vkey, sc.keys.anchorPub, version)
		},
	}
	if sc.cfg.Store != "" {
		// A shared store keeps no published record in the data dir: the
		// newest checkpoint shown is kept there instead (shown.go).
		rec, err := shownOut.open(sc.cfg.Data, func(err error) {
			sc.logger.Error("the record of checkpoints shown stopped: the log stops at its next commit", "err", err)
		})
		if err != nil {
			return fmt.Errorf("opening the record of checkpoints shown: %w", err)
		}
		opts.Shown = rec.write
		sc.closeShown = rec.close
	}
	var err error
	sc.seq, err = server.OpenSequencer(ctx, sc.store, sc.keys.signer, sc.keys.verifier, opts)
	if err != nil {
		return err
	}
	sc.witness, err = openWitnessing(sc.cfg.Data, sc.cfg.Witnesses, sc.cfg.WitnessPolicy, sc.keys.verifier, sc.store,
		func(ctx context.Context, e []byte) error { _, err := sc.seq.Append(ctx, e); return err }, sc.logger)
	if err != nil {
		return err
	}
	if sc.witness != nil {
		wctx, cancel := context.WithCancel(context.Background())
		sc.stopWitness = cancel
		go sc.witness.run(wctx, sc.seq)
	}
	return sc.openLogAPI()
}

// openLogAPI makes the log API, which keeps the newest checkpoint
// /log/checkpoint served in the data dir (servedOut, shown.go) and serves
// none older after a restart.
func (sc *sidecar) openLogAPI() error {
	before, err := servedOut.read(sc.cfg.Data)
	if err != nil {
		return err
	}
	var authorized func(*http.Request) bool
	if !sc.cfg.PublicEntries {
		authorized = sc.authn.Authorizer(authn.GroupLog)
	}
	api := server.APIOptions{Store: sc.store, Seq: sc.seq, Authorized: authorized, Signer: sc.keys.signer, ServedBefore: before}
	rec, err := servedOut.open(sc.cfg.Data, func(err error) {
		sc.logger.Error("the record of the checkpoint /log/checkpoint served stopped: /log/checkpoint fails where it would serve a newer one, until provlog is restarted", "err", err)
	})
	if err != nil {
		// A data dir that cannot be written (a read-only mount, a full
		// disk) still serves reads: none older than the one on record,
		// but what is served now is not kept.
		sc.logger.Warn("the record of the checkpoint /log/checkpoint served cannot be written; it serves none older than the one on record, but what it serves now is not kept", "err", err)
		sc.servedErr = func() error {
			return fmt.Errorf("it cannot be opened, so what /log/checkpoint serves now is not kept: %w", err)
		}
	} else {
		api.Served, sc.closeServed = rec.write, rec.close
		sc.servedErr = func() error {
			if err := rec.err(); err != nil {
				return fmt.Errorf("/log/checkpoint answers 500 where it would serve a newer checkpoint, until provlog is restarted: %w", err)
			}
			return nil
		}
	}
	if sc.witness != nil {
		api.Cosigned = sc.witness.cos.Latest
	}
	sc.logAPI = server.NewAPI(api)
	return nil
}

// startProxy starts the MCP front with the task and replay tools on it.
// Over stdio the actor is the config's; over HTTP the bearer token's.
func (sc *sidecar) startProxy(ctx context.Context, stdio bool) error {
	actor := func(ctx context.Context, req *mcp.CallToolRequest) (string, error) {
		if req.Extra != nil && req.Extra.TokenInfo != nil && req.Extra.TokenInfo.UserID != "" {
			return req.Extra.TokenInfo.UserID, nil
		}
		if stdio {
			// Held, as static tokens are (sidecar.static), to the
			// namespaces the shared log reserves while it runs.
			if d := sc.ns.current(); d > 0 {
				return "", fmt.Errorf("this sidecar cannot read the shared log's OAuth actor namespaces, and last read them %s ago, longer than a sidecar adding an issuer waits (%s), so the stdio actor %q might be in one; its calls are refused until it can", d.Round(time.Millisecond), namespacesWait, sc.cfg.Actor)
			}
			if sc.ns.reserves(sc.cfg.Actor) {
				return "", fmt.Errorf("the stdio actor %q (the config's actor:) is in an OAuth issuer's actor namespace this log reserved since provlog started, so it would act as that issuer's actor; give actor: another id and restart provlog", sc.cfg.Actor)
			}
			return sc.cfg.Actor, nil
		}
		return "", errors.New("no authenticated actor: send Authorization: Bearer <token>")
	}
	tracer, stopTracing, err := startTracing(ctx, sc.cfg.OTel, sc.keys.signer.Name(), sc.logger)
	if err != nil {
		return err
	}
	sc.stopTracing, sc.tracer = stopTracing, tracer
	sc.proxy, err = proxy.New(ctx, proxy.Options{
		Servers:                 sc.cfg.Servers,
		ReservedTools:           append(slices.Clone(oppmcp.Names), recordReplayTool),
		Log:                     sc.seq,
		Blobs:                   sc.blobs,
		BlobNamed:               sc.blobNamed,
		Actor:                   actor,
		Status:                  sc.status,
		Prove:                   sc.prove,
		Verifier:                sc.keys.verifier,
		Logger:                  proxyLogger(sc.logger),
		Tracer:                  tracer,
		DrainTimeout:            sc.cfg.DrainTimeout,
		Version:                 version,
		MaxSessions:             sc.cfg.Sessions.Max,
		SessionsPerActor:        sc.cfg.Sessions.PerActor,
		SessionIdle:             sc.cfg.Sessions.Idle,
		MaxParkedCalls:          sc.cfg.Parking.Max,
		ParkedPerActor:          sc.cfg.Parking.PerActor,
		ParkTimeout:             sc.cfg.Parking.Timeout,
		MaxSubscriptions:        sc.cfg.Subscriptions.Max,
		SubscriptionsPerActor:   sc.cfg.Subscriptions.PerActor,
		SubscriptionsPerSession: sc.cfg.Subscriptions.PerSession,
	})
	if err != nil {
		return err
	}
	oppmcp.Register(sc.proxy.Server(), sc.tasks, actor)
	registerReplayTool(sc.proxy.Server(), sc.seq, sc.store, actor)
	return nil
}

// prove returns the receipt of the entry at index (by leaf hash when
// index < 0) on the newest cosigned checkpoint when one covers the entry,
// else on the latest checkpoint: the receipts of the provlog__prove tool,
// as the log API's /log/proof/inclusion gives them (Sequencer.Prove):
// the latest is one the sequencer has shown (recorded as handed out), not
// the store's own, on a shared log perhaps another sidecar's.
func (s *sidecar) prove(ctx context.Context, index int64, leafHash []byte) (*log.Receipt, error) {
	req := inclusionRequest(index, leafHash)
	if s.witness != nil {
		req.Cosigned = s.witness.cos.Latest()
	}
	return s.seq.Prove(ctx, s.store, req)
}

func (s *sidecar) size() uint64 {
	n, _ := s.seq.Checkpoint()
	return n
}

func (s *sidecar) close() {
	if s.proxy != nil {
		if err := s.proxy.Close(); err != nil {
			s.logger.Error("closing proxy", "err", err)
		}
	}
	if s.stopTracing != nil {
		s.stopTracing() // after the proxy: its last spans are flushed
	}
	if s.stopWitness != nil {
		s.stopWitness()
	}
	if s.stopNamespaces != nil {
		s.stopNamespaces()
		s.background.Wait() // before the store closes
	}
	if s.stopRetention != nil {
		s.stopRetention()
		s.retention.Wait() // before the sequencer: a purge may be appending
	}
	s.saveAges(context.Background())
	s.anchors.stop() // before the sequencer: a round may be appending
	// After the proxy, so no task operation is under way.
	if s.tasks != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := s.tasks.SaveIndex(ctx, s.size()); err != nil {
			s.logger.Warn("the task index was not saved; the next start replays the log", "err", err)
		}
		cancel()
	}
	if s.seq != nil {
		if err := s.seq.Close(); err != nil {
			s.logger.Error("closing sequencer", "err", err)
		}
	}
	if s.closeShown != nil {
		if err := s.closeShown(); err != nil {
			s.logger.Error("closing the record of checkpoints shown", "err", err)
		}
	}
	if s.closeServed != nil {
		if err := s.closeServed(); err != nil {
			s.logger.Error("closing the record of the checkpoint /log/checkpoint served", "err", err)
		}
	}
	if err := s.store.Close(); err != nil {
		s.logger.Error("closing store", "err", err)
	}
	if s.dirLock != nil {
		s.dirLock.Close() // last: the data dir's files are written
	}
}

// status is the log's part of provlog__status and /healthz.
func (s *sidecar) status(context.Context) map[string]any {
	size, cp := s.seq.Checkpoint()
	st := map[string]any{
		"origin":     s.keys.signer.Name(),
		"size":       size,
		"checkpoint": string(cp),
		"anchoring":  s.anchors.status(),
		"witnesses":  "none configured",
	}
	if s.witness != nil {
		st["witnesses"] = s.witness.status()
	}
	if sc := s.scrubStatus(); sc != nil {
		st["scrub"] = sc
	}
	st["storage"] = "ok"
	if stopped, unavail := s.logFault(); stopped != nil {
		st["error"] = stopped.Error()
		st["storage"] = storageReason(stopped)
	} else if unavail != nil {
		st["storage"], st["error"] = unavailable(unavail)
	} else if err := s.tasks.Err(); err != nil {
		st["error"] = err.Error()
	}
	st["checkpoint_record"] = "ok"
	if d := s.servedProblem(); d != "" {
		st["checkpoint_record"] = d
	}
	// What /healthz says is wrong, each with its reason word: those that
	// leave it recording are told nowhere else in a word a probe can match.
	st["reasons"] = append([]problem{}, s.problems()...)
	return st
}

// storageReason is what broke, in a word or two: the "storage" member of
// provlog__status and /healthz, and the reason label of
// provlog_storage_fault.
func storageReason(err error) string {
	if r := log.FaultReason(err); r != "" {
		return r
	}
	return "stopped"
}

func (s *sidecar) handler() http.Handler {
	mux := http.NewServeMux()
	var authorized func(*http.Request) bool
	if !s.cfg.PublicEntries {
		authorized = s.authn.Authorizer(authn.GroupLog)
	}
	// Challenger gives the 401s of the log API, the anchors and the task
	// view the same challenge as /mcp's (and a 403 for missing scopes).
	mux.Handle("/log/", traceLogAPI(s.tracer, s.authn.Challenger(s.logAPI)))
	ah := traceLogAPI(s.tracer, s.authn.Challenger(anchorsHandler(s.cfg.Data, authorized)))
	mux.Handle("/log/anchors", ah)
	mux.Handle("/log/anchors/", ah)
	mux.Handle("/mcp", s.proxy.HTTPHandler(s.authn))
	mux.Handle(authn.MetadataPath, s.authn.Metadata())
	mux.Handle(authn.MetadataPath+"/", s.authn.Metadata())
	mux.Handle("POST /log/purge", traceLogAPI(s.tracer, http.HandlerFunc(s.purgeHandler)))
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /metrics", s.metrics)
	s.handleUI(mux, authorized)
	return mux
}

func (s *sidecar) metrics(w http.ResponseWriter, r *http.Request) {
	st := s.seq.Stats()
	size, _ := s.seq.Checkpoint()
	failed := 0
	err := s.seq.Err()
	if err != nil {
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
		{"provlog_expected_appends", "gauge", "Tool calls under way whose entries a commit under load may wait for (commit_delay).", float64(st.Expected)},
		{"provlog_sequencer_failed", "gauge", "1 if the sequencer stopped after a failed commit.", float64(failed)},
		{"provlog_uptime_seconds", "gauge", "Seconds since the sidecar started.", time.Since(s.start).Seconds()},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %g\n", m.name, m.help, m.name, m.typ, m.name, m.v)
	}
	s.writeHealthMetrics(w)
	s.writeScrubMetrics(w)
	fmt.Fprintf(w, "# HELP provlog_storage_fault 1 while the log store refuses writes, labelled with what broke (disk full, read-only, I/O error, corrupt, acknowledged entries lost).\n# TYPE provlog_storage_fault gauge\n")
	if err != nil {
		fmt.Fprintf(w, "provlog_storage_fault{reason=%q} 1\n", storageReason(err))
	} else {
		fmt.Fprintf(w, "provlog_storage_fault{reason=\"\"} 0\n")
	}
	s.anchors.writeMetrics(w)
}
