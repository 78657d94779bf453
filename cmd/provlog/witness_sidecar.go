package main

// The sidecar's side of witnessing (c2sp.org/tlog-witness@v1.0.0): config,
// the cosigner that sends each new checkpoint to the configured witnesses,
// the cosigned checkpoint at /log/checkpoint and in receipts, conflicts
// recorded as witness.conflict entries, and verify-proof's --witness and
// --threshold. The logic is in witness/client; this file wires it.
//
// Config:
//
//	witnesses:
//	  - url: https://witness.example/w1        # submission prefix (POST <url>/add-checkpoint)
//	    vkey: witness.example/w1+1a2b3c4d+BA…  # its cosignature/v1 verifier key
//	witness_policy:
//	  threshold: 2       # how many must cosign (default: all of them)
//	  interval: 250ms    # least time between two rounds (default 250ms)
//	  timeout: 10s       # per witness and round (default 10s)

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/durable"
	"github.com/provlog/provlog/log/server"
	"github.com/provlog/provlog/witness/client"
)

// cosignedFile keeps the newest cosigned checkpoint in a data dir, so
// receipts carry cosignatures right after a restart.
const cosignedFile = "cosigned.checkpoint"

// WitnessConfig is one entry of the config's witnesses list.
type WitnessConfig struct {
	URL  string `yaml:"url"`
	VKey string `yaml:"vkey"`
}

// WitnessPolicyConfig is the config's witness_policy.
type WitnessPolicyConfig struct {
	Threshold int           `yaml:"threshold"`
	Interval  time.Duration `yaml:"interval"`
	Timeout   time.Duration `yaml:"timeout"`
}

// checkWitnesses checks the witnesses list and witness_policy, and sets
// the threshold's default (all of them).
func (c *Config) checkWitnesses() error {
	var keys []note.Verifier
	for i, w := range c.Witnesses {
		if w.URL == "" || w.VKey == "" {
			return fmt.Errorf("config: witnesses[%d]: url and vkey are required", i)
		}
		// Read here, when the config is, so that a bad one is refused
		// before anything (a data dir, keys) is made.
		v, err := log.NewCosignatureVerifier(w.VKey)
		if err != nil {
			return fmt.Errorf("config: witnesses[%d]: %w", i, err)
		}
		if _, err := client.NewHTTP(w.URL, nil); err != nil {
			return fmt.Errorf("config: witnesses[%d]: %w", i, err)
		}
		keys = append(keys, v)
	}
	p := &c.WitnessPolicy
	if len(c.Witnesses) == 0 && *p != (WitnessPolicyConfig{}) {
		return errors.New("config: witness_policy is set, but no witnesses are configured")
	}
	if p.Threshold == 0 {
		p.Threshold = len(c.Witnesses)
	}
	if len(c.Witnesses) > 0 && (p.Threshold < 1 || p.Threshold > len(c.Witnesses)) {
		return fmt.Errorf("config: witness_policy: threshold %d must be between 1 and the %d witnesses", p.Threshold, len(c.Witnesses))
	}
	if len(keys) > 0 {
		if err := (&log.WitnessPolicy{Witnesses: keys, Threshold: p.Threshold}).Check(); err != nil {
			return fmt.Errorf("config: witness_policy: %w", err)
		}
	}
	return nil
}

// witnessing is a sidecar's running witness client.
type witnessing struct {
	cos       *client.Cosigner
	witnesses []note.Verifier
	threshold int
	logger    *slog.Logger
}

// openWitnessing makes the cosigner for the configured witnesses. nodes are
// the log's stored nodes (for consistency proofs); record appends an entry
// to the log (for witness.conflict entries). It returns nil if no witness
// is configured.
func openWitnessing(data string, ws []WitnessConfig, p WitnessPolicyConfig, logV note.Verifier, nodes client.Tree, record func(context.Context, []byte) error, logger *slog.Logger) (*witnessing, error) {
	if len(ws) == 0 {
		return nil, nil
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	w := &witnessing{threshold: p.Threshold, logger: logger}
	var clients []*client.Witness
	for i, c := range ws {
		v, err := log.NewCosignatureVerifier(c.VKey)
		if err != nil {
			return nil, fmt.Errorf("config: witnesses[%d]: %w", i, err)
		}
		h, err := client.NewHTTP(c.URL, hc)
		if err != nil {
			return nil, fmt.Errorf("config: witnesses[%d]: %w", i, err)
		}
		clients = append(clients, client.NewWitness(h, v, nodes))
		w.witnesses = append(w.witnesses, v)
	}
	path := filepath.Join(data, cosignedFile)
	initial, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	w.cos, err = client.NewCosigner(client.CosignerOptions{
		Log:       logV,
		Witnesses: clients,
		Threshold: p.Threshold,
		Initial:   initial,
		Interval:  p.Interval,
		Timeout:   p.Timeout,
		Logger:    logger.With("component", "witness"),
		OnCosigned: func(cosigned []byte) {
			if err := durable.WriteFile(path, cosigned, 0o600); err != nil {
				logger.Error("saving the cosigned checkpoint", "err", err)
			}
		},
		OnConflict: func(ce *client.ConflictError, cp []byte) {
			e, err := client.ConflictEntry(ce, cp, time.Now())
			if err == nil {
				err = record(context.Background(), e)
			}
			if err != nil {
				logger.Error("recording a witness conflict in the log failed", "witness", ce.Witness, "err", err)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("config: witness_policy: %w", err)
	}
	return w, nil
}

// run follows the sequencer's checkpoints and collects cosignatures until
// ctx is done. The cosigner coalesces what it is given; polling the
// sequencer a few times a second is all it needs.
func (w *witnessing) run(ctx context.Context, seq *server.Sequencer) {
	go w.cos.Run(ctx)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var last uint64
	for {
		if size, cp := seq.Checkpoint(); size > last && cp != nil {
			w.cos.Submit(cp)
			last = size
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// readCosigned returns the cosigned checkpoint the sidecar kept in the
// data dir, or nil if there is none.
func readCosigned(data string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(data, cosignedFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// status is the witnesses' part of provlog__status and /healthz.
func (w *witnessing) status() map[string]any {
	st := w.cos.Status()
	var m map[string]any
	b, _ := json.Marshal(st)
	json.Unmarshal(b, &m)
	return m
}

// witnessFlags is verify-proof's and verify-evidence's repeated --witness flag: cosignature/v1
// verifier keys, or files holding one.
type witnessFlags []note.Verifier

func (f *witnessFlags) String() string { return fmt.Sprint(len(*f), " witnesses") }

func (f *witnessFlags) Set(arg string) error {
	v, err := log.NewCosignatureVerifier(arg)
	if err != nil {
		b, ferr := os.ReadFile(arg)
		if ferr != nil {
			return fmt.Errorf("--witness %q is neither a witness verifier key (%v) nor a readable file (%v)", arg, err, ferr)
		}
		if v, err = log.NewCosignatureVerifier(strings.TrimSpace(string(b))); err != nil {
			return fmt.Errorf("%s: %w", arg, err)
		}
	}
	*f = append(*f, v)
	return nil
}

// witnessPolicyFlags are --witness, repeated, and its threshold flag
// (verify-proof's --threshold, verify-evidence's --witness-threshold).
type witnessPolicyFlags struct {
	keys      witnessFlags
	threshold int
	name      string // the threshold flag, for messages
}

func addWitnessFlags(fs *flag.FlagSet, thresholdName, witnessHelp string) *witnessPolicyFlags {
	w := &witnessPolicyFlags{name: "--" + thresholdName}
	fs.Var(&w.keys, "witness", witnessHelp)
	fs.IntVar(&w.threshold, thresholdName, -1, "how many of the --witness keys must have cosigned (default: all)")
	return w
}

// parseCheck parses the command line of a check of one thing (what:
// "receipt FILE"), which needs --vkey (*vkey, read once parsed), and returns the
// witness policy the flags give.
func (w *witnessPolicyFlags) parseCheck(fs *flag.FlagSet, args []string, vkey *string, what string) (log.WitnessPolicy, error) {
	if err := parseFlags(fs, args, 1); err != nil {
		return log.WitnessPolicy{}, err
	}
	if *vkey == "" || fs.NArg() != 1 {
		return log.WitnessPolicy{}, usageErr("--vkey and one %s are required", what)
	}
	return w.policy()
}

// policy is the witness policy the flags give: the keys, and a threshold
// of at least one of them (default: all). A threshold of 0 would let
// through a checkpoint none of the witnesses named cosigned.
func (w *witnessPolicyFlags) policy() (log.WitnessPolicy, error) {
	th := w.threshold
	switch {
	case th < -1:
		return log.WitnessPolicy{}, usageErr("%s %d: give at least 1, or leave it out for all the --witness keys", w.name, th)
	case len(w.keys) == 0 && th > 0:
		return log.WitnessPolicy{}, usageErr("%s needs --witness keys", w.name)
	case th < 0:
		th = len(w.keys)
	case th > len(w.keys):
		return log.WitnessPolicy{}, usageErr("%s %d is more than the %d --witness keys given", w.name, th, len(w.keys))
	case len(w.keys) > 0 && th == 0:
		return log.WitnessPolicy{}, usageErr("%s must be at least 1", w.name)
	}
	p := log.WitnessPolicy{Witnesses: w.keys, Threshold: th}
	if err := p.Check(); err != nil {
		return log.WitnessPolicy{}, usageErr("--witness: %v", err)
	}
	return p, nil
}

// strings returns the keys in their text form.
func (f witnessFlags) strings() []string {
	out := make([]string, len(f))
	for i, v := range f {
		out[i] = fmt.Sprint(v)
	}
	return out
}

// verifyWitnessedReceipt checks a receipt under the witness policy of
// verify-proof's flags and says in plain words what failed.
func verifyWitnessedReceipt(r *log.Receipt, leaf []byte, logV note.Verifier, p log.WitnessPolicy) (log.Checkpoint, error) {
	c, err := r.VerifyWitnessed(leaf, logV, p.Witnesses, p.Threshold)
	var pe *log.WitnessPolicyError
	if errors.As(err, &pe) {
		return log.Checkpoint{}, fmt.Errorf("the log signed this receipt's checkpoint, but not enough of the witnesses you trust vouch for it: %w", pe)
	}
	return c, err
}
