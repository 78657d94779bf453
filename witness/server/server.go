// Package server is provlog's witness: the add-checkpoint call of
// c2sp.org/tlog-witness@v1.0.0 for a configured list of logs, answered
// with Ed25519 cosignature/v1 signatures (c2sp.org/tlog-cosignature).
//
// # Checks
//
// [Witness.AddCheckpoint] checks a request in the order of the spec and
// answers with its status codes (see [witness.Error]): the origin must be a
// configured log (404); a key trusted for it must have signed the checkpoint
// and every trusted signature must verify (403); the old size must not
// exceed the checkpoint's (400); the old size must be the size of the
// checkpoint the witness last cosigned for the log, or 0 if none (409, with
// that size); the consistency proof must verify, and be empty for old size
// 0 (422); and a checkpoint of the size the witness last cosigned must have
// the same root hash (409, as v1.0.0 says; later drafts use 422). A witness
// that never cosigned for a log holds the empty tree (size 0, root
// SHA-256 of nothing).
//
// # State
//
// For each log the witness keeps the last checkpoint it cosigned, with
// only the log's signatures it verified ([witness.Verified]; a store
// written before holds notes as sent, and reads as well), in a
// [witness.Store] (the command keeps it in Pebble, witnesspebble.KV). The
// check of the old size and the update are atomic: requests for one log
// are serialized, and the store's compare-and-swap refuses an update from a
// stale state. The new checkpoint is durable before the cosignature is
// returned. A refused request writes nothing. A failed write is a 500, and
// the witness answers from nothing it cannot read back as durable: the
// Pebble store refuses every call after one until the witness restarts.
//
// # Forks
//
// When a log presents a validly signed checkpoint that contradicts the one
// the witness recorded — same size and another root, or a consistency
// proof that rebuilds the new root from another old root — the witness
// refuses it and hands conclusive [witness.Evidence] to Options.OnFork.
package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/witness"
)

// A Log is a log the witness cosigns for: its origin and the keys trusted
// to sign its checkpoints.
type Log struct {
	Origin    string
	Verifiers []note.Verifier
}

// Options configure a [Witness].
type Options struct {
	// Signer makes the witness's cosignatures.
	Signer *log.CosignatureSigner
	// Logs are the logs the witness cosigns for.
	Logs []Log
	// Store keeps the latest cosigned checkpoint of each log.
	Store witness.Store
	// Logger gets a line for every refused request and every fork. nil
	// means no logging.
	Logger *slog.Logger
	// OnFork, if not nil, is called with conclusive evidence of a fork
	// (after the request was refused, before the response is sent).
	OnFork func(*witness.Evidence)
}

// A Witness answers add-checkpoint requests. It is an http.Handler for
// POST /add-checkpoint, and a [witness.AddCheckpointer] for callers in the
// same process.
type Witness struct {
	signer *log.CosignatureSigner
	logs   map[string]*logState
	store  witness.Store
	logger *slog.Logger
	onFork func(*witness.Evidence)

	// testingOnlyBeforeSwap, if set, runs after a request passed every
	// check and before its checkpoint is recorded, with the log's lock
	// held: tests use it to widen the race window.
	testingOnlyBeforeSwap func()
}

var _ witness.AddCheckpointer = (*Witness)(nil)

// logState is one log's trusted keys and the checkpoint last cosigned.
type logState struct {
	verifiers note.Verifiers

	mu     sync.Mutex // held from the old size check to the update
	loaded bool
	note   []byte         // the recorded signed note, nil if none
	cp     log.Checkpoint // parsed from note; Size 0 and the empty root if none
}

// New returns a witness for the configured logs.
func New(opts Options) (*Witness, error) {
	if opts.Signer == nil || opts.Store == nil {
		return nil, errors.New("witness: a signer and a store are required")
	}
	w := &Witness{
		signer: opts.Signer,
		logs:   map[string]*logState{},
		store:  opts.Store,
		logger: opts.Logger,
		onFork: opts.OnFork,
	}
	if w.logger == nil {
		w.logger = slog.New(slog.DiscardHandler)
	}
	if err := CheckLogs(opts.Logs); err != nil {
		return nil, err
	}
	for _, l := range opts.Logs {
		w.logs[l.Origin] = &logState{verifiers: note.VerifierList(l.Verifiers...)}
	}
	return w, nil
}

// CheckLogs returns why a witness cannot cosign for logs, or nil: a log
// without an origin or a key, an origin listed twice, or two keys of one
// log with one name and key ID (the same key listed twice, or a key ID
// collision), which note.Open refuses as ambiguous for every checkpoint
// signed by either. [New] calls it; a command calls it before it opens
// any state.
func CheckLogs(logs []Log) error {
	seen := map[string]bool{}
	for _, l := range logs {
		if l.Origin == "" {
			return errors.New("witness: a log has no origin")
		}
		if seen[l.Origin] {
			return fmt.Errorf("witness: log %q is configured twice", l.Origin)
		}
		seen[l.Origin] = true
		if len(l.Verifiers) == 0 {
			return fmt.Errorf("witness: log %q has no verifier key", l.Origin)
		}
		ids := map[string]bool{}
		for _, v := range l.Verifiers {
			id := fmt.Sprintf("%s+%08x", v.Name(), v.KeyHash())
			if ids[id] {
				return fmt.Errorf("witness: log %q: key %s is listed twice (the same key, or two keys with one name and key ID)", l.Origin, id)
			}
			ids[id] = true
		}
	}
	return nil
}

// VerifierKey returns the witness's verifier key.
func (w *Witness) VerifierKey() string { return w.signer.Verifier().String() }

func refuse(status int, format string, args ...any) error {
	return &witness.Error{Status: status, Msg: fmt.Sprintf(format, args...)}
}

// AddCheckpoint checks req as the package documentation describes and
// returns the witness's cosignature line, or a [*witness.Error].
func (w *Witness) AddCheckpoint(ctx context.Context, req *witness.AddCheckpointRequest) ([]byte, error) {
	origin := req.Origin()
	ls, ok := w.logs[origin]
	if !ok {
		return nil, refuse(http.StatusNotFound, "unknown log origin %q", origin)
	}
	n, err := note.Open(req.Checkpoint, ls.verifiers)
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		switch {
		case errors.As(err, &unverified):
			return nil, refuse(http.StatusForbidden, "the checkpoint carries no signature by a key trusted for %q", origin)
		case errors.As(err, &invalid):
			return nil, refuse(http.StatusForbidden, "the signature by %s (key ID %08x) does not verify", invalid.Name, invalid.Hash)
		}
		return nil, refuse(http.StatusBadRequest, "malformed checkpoint note: %v", err)
	}
	c, err := log.ParseCheckpoint(n.Text)
	if err != nil {
		return nil, refuse(http.StatusBadRequest, "%v", err)
	}
	if req.OldSize > c.Size {
		return nil, refuse(http.StatusBadRequest, "old size %d is above the checkpoint's size %d", req.OldSize, c.Size)
	}
	// note.Open passed over a line written twice and a second line by a
	// trusted key, unverified; a strict reader refuses such a note. It
	// is refused once it proves no fork: a fork sent so still yields its
	// evidence (from the note as verified).
	strict := witness.CheckSignatureLines(req.Checkpoint, ls.verifiers)
	if strict != nil {
		strict = refuse(http.StatusForbidden, "the checkpoint's signature lines are refused by a strict signed-note reader: %v", strict)
	}

	if err := w.record(ctx, ls, req, c, witness.Verified(n), strict); err != nil {
		return nil, err
	}

	// The checkpoint is recorded (or was already): cosign it.
	signed, err := note.Sign(&note.Note{Text: n.Text}, w.signer)
	if err != nil {
		return nil, fmt.Errorf("cosigning: %w", err)
	}
	return signed[bytes.LastIndex(signed, []byte("\n\n"))+2:], nil
}

// record checks req against the log's recorded checkpoint and records c,
// atomically, as kept (req's checkpoint with only its verified
// signatures). A request that passes every check but strict (not nil) is
// refused with strict, after the checks that find a fork.
func (w *Witness) record(ctx context.Context, ls *logState, req *witness.AddCheckpointRequest, c log.Checkpoint, kept []byte, strict error) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if err := w.load(ctx, ls, c.Origin); err != nil {
		return err
	}
	cur := ls.cp
	if req.OldSize != cur.Size {
		return &witness.Error{Status: http.StatusConflict, Size: cur.Size,
			Msg: fmt.Sprintf("old size %d is not the size of the latest checkpoint cosigned", req.OldSize)}
	}
	switch {
	case req.OldSize == c.Size:
		if len(req.Proof) != 0 {
			// Between equal sizes the proof is empty, as from size 0.
			return refuse(http.StatusUnprocessableEntity, "the consistency proof must be empty when the old size is the checkpoint's")
		}
		if !bytes.Equal(c.Hash, cur.Hash) {
			w.fork(ls, kept, req, "a checkpoint of the recorded size with another root hash")
			return &witness.Error{Status: http.StatusConflict, Size: cur.Size,
				Msg: fmt.Sprintf("the checkpoint of size %d has another root hash than the one cosigned before", c.Size)}
		}
		return strict // nothing new to record
	case req.OldSize == 0:
		if len(req.Proof) != 0 {
			return refuse(http.StatusUnprocessableEntity, "the consistency proof must be empty for old size 0")
		}
	default:
		if err := log.VerifyConsistency(req.OldSize, c.Size, req.Proof, cur.Hash, c.Hash); err != nil {
			w.fork(ls, kept, req, "a consistency proof that does not verify")
			return refuse(http.StatusUnprocessableEntity, "the consistency proof from size %d to %d does not verify", req.OldSize, c.Size)
		}
	}
	if strict != nil {
		return strict
	}
	if w.testingOnlyBeforeSwap != nil {
		w.testingOnlyBeforeSwap()
	}
	if err := w.store.Swap(ctx, c.Origin, ls.note, kept); err != nil {
		ls.loaded = false // read it again: the write may or may not have happened
		if errors.Is(err, witness.ErrConflict) {
			// Someone else sharing the store moved it on (never one
			// process: Pebble locks its directory).
			if lerr := w.load(ctx, ls, c.Origin); lerr != nil {
				return lerr
			}
			return &witness.Error{Status: http.StatusConflict, Size: ls.cp.Size, Msg: "the recorded checkpoint changed meanwhile"}
		}
		w.logger.Error("recording a checkpoint failed", "origin", c.Origin, "size", c.Size, "err", err)
		return &witness.Error{Status: http.StatusInternalServerError, Msg: "recording the checkpoint failed"}
	}
	ls.note, ls.cp = kept, c
	return nil
}

// load reads the log's recorded checkpoint, once.
func (w *Witness) load(ctx context.Context, ls *logState, origin string) error {
	if ls.loaded {
		return nil
	}
	rec, err := w.store.Latest(ctx, origin)
	if err != nil {
		w.logger.Error("reading the recorded checkpoint failed", "origin", origin, "err", err)
		return &witness.Error{Status: http.StatusInternalServerError, Msg: "reading the recorded checkpoint failed"}
	}
	cp := log.Checkpoint{Origin: origin, Size: 0, Hash: log.EmptyRoot()}
	if rec != nil {
		if cp, err = log.ParseCheckpointNote(rec); err != nil || cp.Origin != origin {
			w.logger.Error("the recorded checkpoint is corrupt", "origin", origin, "err", err)
			return &witness.Error{Status: http.StatusInternalServerError, Msg: "the recorded checkpoint is corrupt"}
		}
	}
	ls.note, ls.cp, ls.loaded = rec, cp, true
	return nil
}

// fork logs a validly signed checkpoint the witness refuses as
// inconsistent, and reports conclusive evidence against the checkpoint
// recorded for ls. The evidence holds kept, the checkpoint as verified,
// not the bytes sent: a log could send its note with a line written
// twice, which note.Open passes over and the evidence's verifiers refuse.
func (w *Witness) fork(ls *logState, kept []byte, req *witness.AddCheckpointRequest, what string) {
	var ev *witness.Evidence
	if recorded := ls.note; recorded != nil {
		// A store written before holds notes as sent, perhaps spelled
		// otherwise than canonically: the evidence holds them as
		// verified too.
		if n, err := note.Open(recorded, ls.verifiers); err == nil {
			recorded = witness.Verified(n)
		}
		ev = witness.ForkFromProof(recorded, kept, req.Proof)
	}
	if ev == nil {
		// A wrong proof from a client is not a fork by itself. The spec
		// allows logging the request: it may be one. Logged with the
		// checkpoint as verified: anyone may replay a log's checkpoint
		// with a wrong proof, and the request as sent carried up to 64
		// KiB of other signature lines into the log each time.
		logged := &witness.AddCheckpointRequest{OldSize: req.OldSize, Proof: req.Proof, Checkpoint: kept}
		w.logger.Warn("refused a validly signed checkpoint: "+what, "origin", req.Origin(), "request", logged.String())
		return
	}
	w.logger.Error("log fork: "+ev.Detail, "origin", ev.Origin, "evidence", string(ev.Marshal()))
	if w.onFork != nil {
		w.onFork(ev)
	}
}

// ServeHTTP serves POST /add-checkpoint.
func (w *Witness) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	sigs, err := w.serve(rw, r)
	if err != nil {
		w.writeError(rw, r, err)
		return
	}
	h := rw.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(sigs)))
	h.Set("X-Content-Type-Options", "nosniff")
	rw.WriteHeader(http.StatusOK)
	rw.Write(sigs)
}

func (w *Witness) serve(rw http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.URL.Path != "/add-checkpoint" {
		return nil, refuse(http.StatusNotFound, "not found: the witness serves POST /add-checkpoint (c2sp.org/tlog-witness@v1.0.0)")
	}
	if r.Method != http.MethodPost {
		return nil, refuse(http.StatusMethodNotAllowed, "add-checkpoint takes POST")
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, witness.MaxRequestSize))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, refuse(http.StatusRequestEntityTooLarge, "request body is over %d bytes", witness.MaxRequestSize)
		}
		return nil, refuse(http.StatusBadRequest, "reading the request body: %v", err)
	}
	req, err := witness.ParseAddCheckpoint(body)
	if err != nil {
		return nil, refuse(http.StatusBadRequest, "malformed add-checkpoint request: %v", err)
	}
	return w.AddCheckpoint(r.Context(), req)
}

// writeError is the one place refusals become HTTP responses.
func (w *Witness) writeError(rw http.ResponseWriter, r *http.Request, err error) {
	var we *witness.Error
	if !errors.As(err, &we) {
		w.logger.Error("add-checkpoint failed", "err", err)
		we = &witness.Error{Status: http.StatusInternalServerError, Msg: "internal error"}
	}
	h := rw.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	body := we.Msg + "\n"
	switch we.Status {
	case http.StatusConflict:
		h.Set("Content-Type", witness.ContentTypeSize)
		body = strconv.FormatUint(we.Size, 10) + "\n"
	case http.StatusMethodNotAllowed:
		h.Set("Allow", http.MethodPost)
		fallthrough
	default:
		h.Set("Content-Type", "text/plain; charset=utf-8")
	}
	if we.Status == http.StatusRequestEntityTooLarge {
		h.Set("Connection", "close")
	}
	w.logger.Debug("add-checkpoint refused", "status", we.Status, "msg", we.Msg, "remote", r.RemoteAddr)
	rw.WriteHeader(we.Status)
	io.WriteString(rw, body)
}
