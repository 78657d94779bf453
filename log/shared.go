package log

import (
	"context"
	"errors"
	"slices"
)

// ErrUnavailable is returned (wrapped) by a [SharedStorage] commit that
// could not reach its store and wrote nothing, or by a read that could
// not reach it and read nothing: the caller may try again later. A
// commit never returns it when the outcome is unknown.
var ErrUnavailable = errors.New("log store is unavailable")

// ErrFenced is returned (wrapped) for an append whose [Fence] failed:
// another writer committed an entry under the same key at or after the
// fence's size. Nothing of that append was written.
var ErrFenced = errors.New("another writer changed the fenced key first")

// A Fence makes an append conditional, across every writer of a shared
// log: the append is committed only if no entry under Key, or under any
// of Also, was committed at an index at or after After. A writer that has
// read the log up to After, and decided from what it read, fences its
// append so that the decision still holds when it commits. An empty key
// fences nothing; each key of a fenced entry is recorded for later
// fences. Also serves a decision that rests on more than one thing (the
// task engine: an observed claim's task and each call it cites); the
// store checks and records all keys in the same step as Key.
type Fence struct {
	Key   string
	Also  []string
	After uint64
}

// Keys returns f's keys, Key first, without empty or repeated ones.
func (f Fence) Keys() []string {
	if len(f.Also) == 0 {
		if f.Key == "" {
			return nil
		}
		return []string{f.Key}
	}
	keys := make([]string, 0, 1+len(f.Also))
	for _, k := range append([]string{f.Key}, f.Also...) {
		if k != "" && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// Fenced reports whether f has a key: whether it fences anything.
func (f Fence) Fenced() bool {
	return f.Key != "" || slices.ContainsFunc(f.Also, func(k string) bool { return k != "" })
}

// SharedStorage is a [Storage] that any number of writers, in any number
// of processes, commit to at once, serialized by the store itself (logpg:
// a row lock in PostgreSQL). A writer does not keep the tree state between
// commits: it asks the store to lock, gets the state as the last writer,
// whoever that was, left it, builds its batch on it and commits, all while
// the store holds the lock.
type SharedStorage interface {
	Storage

	// CommitShared takes the store's serialization point, checks fences
	// (one per entry to be committed, in order, possibly empty), and calls
	// build with the committed state and which fences failed. build returns
	// the batch to commit, without the fenced-off entries; it must start at
	// the state's size. If build returns an error, nothing is written and
	// CommitShared returns that error. The state build gets is checked
	// against this handle's last one: it extends it (the store reads the
	// leaf hashes appended since and recomputes the range), or CommitShared
	// fails closed. build may be called more than once: a store may first
	// build on the state it knows, assuming no fence failed, and if at the
	// serialization point that state proves old or a fence failed (or
	// that build returned an error or nil), build again on the newest
	// state with the fences as they stand; only the last call's batch or
	// error counts.
	//
	// A nil error means b is durable. An error wrapping [ErrUnavailable]
	// means nothing was written and the store may work again later. Any
	// other error after build returned means the outcome could not be
	// resolved by reading back, and the store refuses further commits.
	CommitShared(ctx context.Context, fences []Fence, build func(st State, fenced []bool) (*Batch, error)) error

	// Latest returns the newest state committed by any writer, checked as
	// for CommitShared, reading it from the store.
	Latest(ctx context.Context) (State, error)

	// Follow registers fn to be called with every newer state this handle
	// learns of, its own commits and other writers' alike, in increasing
	// order of size. fn must not block or call back into the store.
	Follow(fn func(State))
}
