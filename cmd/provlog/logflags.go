package main

import (
	"context"
	"encoding/hex"
	"flag"
	"os"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/server"
)

// logFlags are the flags of the commands that read a log, in a stopped
// sidecar's data dir or through a running one's API: exactly one of
// --data D and --log URL (with --token, default $PROVLOG_TOKEN), and,
// where the command trusts a key, --vkey.
type logFlags struct {
	data, url, token string
	vkey             string
	needVKey         bool // --vkey is required with --log
}

// addLogFlags adds --data, --log and --token to fs; logHelp and tokenHelp
// say what --log and --token do where it is more than reading ("": the
// common words).
func addLogFlags(fs *flag.FlagSet, logHelp, tokenHelp string) *logFlags {
	if logHelp == "" {
		logHelp = "base URL of a running sidecar"
	}
	if tokenHelp == "" {
		tokenHelp = "reader token for --log (default $PROVLOG_TOKEN)"
	}
	l := &logFlags{}
	fs.StringVar(&l.data, "data", "", "data dir of a stopped sidecar")
	fs.StringVar(&l.url, "log", "", logHelp)
	fs.StringVar(&l.token, "token", os.Getenv("PROVLOG_TOKEN"), tokenHelp)
	return l
}

// addVKey adds --vkey, which check requires with --log; help says more
// of it where the common words do not ("").
func (l *logFlags) addVKey(fs *flag.FlagSet, help string) {
	if help == "" {
		help = "the log's verifier key, or a file holding it (required with --log)"
	}
	fs.StringVar(&l.vkey, "vkey", "", help)
	l.needVKey = true
}

// check refuses a command line that names both sources or neither, or
// --log without a --vkey the command needs.
func (l *logFlags) check() error {
	if (l.data == "") == (l.url == "") {
		return usageErr("give exactly one of --data and --log")
	}
	if l.needVKey && l.url != "" && l.vkey == "" {
		return usageErr("--vkey is required with --log")
	}
	return nil
}

// openData opens the log --data names, for reading: the shared log in
// PostgreSQL when the config at cfgPath ("": none) names one, else the
// data dir's Pebble store.
func (l *logFlags) openData(ctx context.Context, cfgPath string) (log.Storage, error) {
	storeURL, err := configStore(cfgPath)
	if err != nil {
		return nil, err
	}
	return openCommandStore(ctx, l.data, storeURL, true)
}

// openAppender opens a stopped sidecar's log to append to: the data dir's
// keys, the log's store (storeURL "": the data dir's Pebble store; see
// openCommandStore) and a sequencer over them. The caller closes the
// sequencer and then the store.
func openAppender(ctx context.Context, data, storeURL string) (log.Storage, *server.Sequencer, error) {
	k, err := loadKeys(data)
	if err != nil {
		return nil, nil, err
	}
	store, err := openCommandStore(ctx, data, storeURL, false)
	if err != nil {
		return nil, nil, err
	}
	seq, err := server.OpenSequencer(ctx, store, k.signer, k.verifier, nil)
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	return store, seq, nil
}

// openRemote returns a client of the sidecar --log names, the verifier
// key --vkey gives, and a new temporary directory for what the command
// fetches to check (anchor records); the caller removes the directory.
func (l *logFlags) openRemote() (r *remote, vkey, tmp string, err error) {
	if vkey, err = parseVKeyArg(l.vkey); err != nil {
		return nil, "", "", err
	}
	if tmp, err = os.MkdirTemp("", "provlog-anchors-"); err != nil {
		return nil, "", "", err
	}
	return newRemote(l.url, l.token), vkey, tmp, nil
}

// entryFlags are --index N and --leaf-hash HEX, of which a command about
// one entry takes exactly one.
type entryFlags struct {
	fs    *flag.FlagSet
	index *int64
	leaf  *string
}

func addEntryFlags(fs *flag.FlagSet) *entryFlags {
	return &entryFlags{fs: fs, index: fs.Int64("index", -1, "entry index"), leaf: fs.String("leaf-hash", "", "entry leaf hash, hex")}
}

// entry returns the entry the flags name: its index (-1 with
// --leaf-hash) or its decoded leaf hash (nil with --index).
func (e *entryFlags) entry() (index int64, leafHash []byte, err error) {
	if *e.index < 0 && given(e.fs, "index") {
		return 0, nil, usageErr("--index %d: an index is 0 or more", *e.index)
	}
	if (*e.index < 0) == (*e.leaf == "") {
		return 0, nil, usageErr("give exactly one of --index and --leaf-hash")
	}
	if *e.leaf == "" {
		return *e.index, nil, nil
	}
	if leafHash, err = hex.DecodeString(*e.leaf); err != nil || len(leafHash) != log.HashSize {
		return 0, nil, usageErr("--leaf-hash must be %d hex digits", 2*log.HashSize)
	}
	return *e.index, leafHash, nil
}

// given reports whether the flag name was set on the command line (its
// default value can be a value given too).
func given(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
