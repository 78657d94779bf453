// Package pebbleguard keeps storage faults in a Pebble v2.1.7 instance
// from taking down, spinning or hanging the process: the first fault
// becomes its store's sticky failure, and the store stops and says so.
// The log's store (log/logpebble) and the witness's (witness/witnesspebble)
// both open Pebble through it.
//
// # Use
//
// A store makes an [FS] for each Pebble instance it opens, with a
// function that records the store's failure (the first one wins) and one
// that reports it, and sets four of the instance's pebble.Options from
// it:
//
//	fs := pebbleguard.NewFS(vfs.Default, fail, failed)
//	po := &pebble.Options{
//		FS:            fs,
//		Logger:        pebbleguard.Logger{Logf: logf, Fail: fs.Record},
//		EventListener: fs.EventListener(logf, dir, errCorrupt),
//	}
//	po.Experimental.CompactionScheduler = fs.CompactionScheduler()
//
// It opens the instance with [FS.OpenDB] and commits with [FS.Commit],
// passing both a channel it closes when it fails; they give up on a call
// Pebble holds after the failure (held.go). It checks its failure after
// every commit Pebble returns: the FS hides a write-ahead log's errors
// from Pebble (which would panic or die on them), so a commit can return
// nil though its record was never written. A commit that returns nil on a
// failed store, or [ErrHeld], has an unknown outcome and must not be
// acknowledged. A commit that returns [ErrPanicked] wedges the instance:
// the store stops, and is not reopened in the process. On Close, the store
// lets go of the instance with [FS.Close], which closes it, abandons it
// if a commit is held in it, or leaves it alone if it is wedged.
//
// # What it stops
//
//   - a write-ahead log write or sync that fails (DB.Apply panics);
//   - a new write-ahead log that cannot be created ("fatal error: sync:
//     unlock of unlocked mutex", which no recover catches);
//   - a flush that cannot create its table (retried at once, for ever);
//   - a MANIFEST or marker write that fails (Logger.Fatalf);
//   - a background error or corruption Pebble reports;
//   - compactions on an instance whose memory may be ahead of its disk;
//   - a commit or an open that waits for good on a flush the failed store
//     never completes;
//   - a panic inside a commit, and a Close that would wait for good on the
//     locks it left held.
//
// fs.go, gate.go and held.go say how.
package pebbleguard

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/provlog/provlog/log"
)

// EventListener routes the events of the instance on f into its store's
// failure: a background error fails it (wrapping corrupt if Pebble says
// the data is corrupt, else classified by [log.FileFault] on dir), and so
// does a corruption report. Faults, and what foretells them (a slow
// disk, little space left), are logged to errorf, the rest to logf (nil:
// dropped).
func (f *FS) EventListener(logf, errorf func(format string, args ...any), dir string, corrupt error) *pebble.EventListener {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if errorf == nil {
		errorf = logf
	}
	return &pebble.EventListener{
		BackgroundError: func(err error) {
			// Every background error stops writing: a flush or compaction
			// that cannot write now is a WAL that cannot be written soon.
			errorf("pebble: background error: %v", err)
			if pebble.IsCorruptionError(err) {
				f.Record(fmt.Errorf("%w: %w", corrupt, err))
			} else {
				f.Record(log.FileFault("in Pebble's background work on", dir, err))
			}
		},
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			err := fmt.Errorf("%w: Pebble found corruption in %s: %v", corrupt, info.Path, info.Details)
			errorf("pebble: %v", err)
			f.Record(err)
		},
		DiskSlow: func(info pebble.DiskSlowInfo) {
			errorf("pebble: %s", info)
		},
		LowDiskSpace: func(info pebble.LowDiskSpaceInfo) {
			errorf("pebble: %s", info)
		},
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			logf("pebble: %s", info)
		},
		WriteStallEnd: func() {
			logf("pebble: write stall ended")
		},
	}
}

// Logger is a pebble.Logger that sends Pebble's log lines to Logf (nil:
// dropped) and fails the store from Fatalf.
type Logger struct {
	Logf func(format string, args ...any)
	Fail func(error) // nil, or called by Fatalf: [FS.Record]
}

func (l Logger) Infof(format string, args ...any) {
	if l.Logf != nil {
		l.Logf("pebble: "+format, args...)
	}
}

func (l Logger) Errorf(format string, args ...any) {
	if l.Logf != nil {
		l.Logf("pebble: error: "+format, args...)
	}
}

// Fatalf is called by Pebble when it cannot go on, such as when a
// MANIFEST write or a commit failed. Pebble's own logger exits the
// process; this one fails the store closed and returns, which Pebble
// v2.1.7 survives at every call site a storage fault reaches (it returns
// the error, or carries on with the store failed and its file system
// frozen, see fs.go). A panic here would be worse: several call sites
// hold Pebble's mutexes, and unwinding through them can turn into an
// unrecoverable "unlock of unlocked mutex".
func (l Logger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf("pebble: fatal: "+format, args...)
	if l.Logf != nil {
		l.Logf("%s", msg)
	}
	if l.Fail != nil {
		l.Fail(log.FileFault("in Pebble:", "", errors.New(msg)))
	}
}
