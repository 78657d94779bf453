package log_test

import (
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
)

// What a verifier holds: the log's verifier key (published by the
// operator, e.g. `provlog vkey`), the exact bytes of an entry, and the
// receipt the entry came with (a call result's _meta["dev.provlog/receipt"],
// or `provlog prove`).
const (
	exampleVKey  = "example.org/log+ceeff07b+ATMT+0cac3qXwmAS7KPQ1C0+0VaV9SGt8ontgYgJIkhC"
	exampleEntry = `{"actor":"alice","kind":"call","server":"docs","time":"2026-12-01T09:00:01.000000000Z","tool":"fetch","v":1}`
)

var exampleReceipt = strings.Join([]string{
	"c2sp.org/tlog-proof@v1",
	"extra JJBc53CrepVxtxZp1kuLCXKzFF301WH1R6hl73vdrpk=",
	"index 1",
	"A8lpBhvW9c4m1djhM8/HvEpdVx13+DpnTHmGf8opfjs=",
	"",
	"example.org/log",
	"2",
	"iyydMZXD985I1Oj/XRingvpvkpy0dbXwBP9TYqI4oII=",
	"",
	"— example.org/log zu/weydVH4aHREqz9qjwrAwCJfE1yali/qjz7L3vTQrLzeAyB3MxhhiP+TqD6PREYJC5nme53nXe6AfQ3fwGCukI0go=",
	"",
}, "\n")

// Verify a receipt offline: the entry is in the log the key names, at the
// index the receipt says, in the tree its signed checkpoint commits to.
func ExampleReceipt_Verify() {
	v, err := note.NewVerifier(exampleVKey)
	if err != nil {
		panic(err)
	}
	r, err := log.ParseReceipt([]byte(exampleReceipt))
	if err != nil {
		panic(err)
	}
	cp, err := r.Verify(log.LeafHash([]byte(exampleEntry)), v)
	if err != nil {
		fmt.Println("does not verify:", err)
		return
	}
	fmt.Printf("entry %d is in %s at size %d\n", r.Index, cp.Origin, cp.Size)

	// One changed byte in the entry and the receipt no longer fits it.
	changed := strings.Replace(exampleEntry, "alice", "alicE", 1)
	_, err = r.Verify(log.LeafHash([]byte(changed)), v)
	fmt.Println("changed entry verifies:", err == nil)
	// Output:
	// entry 1 is in example.org/log at size 2
	// changed entry verifies: false
}

// Read an entry's common fields and its kind's own members. ParseEntry
// accepts only the canonical bytes the log stores.
func ExampleParseEntry() {
	e, err := log.ParseEntry([]byte(exampleEntry))
	if err != nil {
		panic(err)
	}
	fmt.Println(e.Kind, e.Actor, e.Time.Format("15:04:05"), e.Fields["server"], e.Fields["tool"])

	_, err = log.ParseEntry([]byte(`{"v":1,"kind":"call"}`))
	fmt.Println(err)
	// Output:
	// call alice 09:00:01 docs fetch
	// entry: not in RFC 8785 canonical form
}

// Open a signed checkpoint: the log's origin, size and root hash, signed
// by its key (c2sp.org/tlog-checkpoint).
func ExampleOpenCheckpoint() {
	v, err := note.NewVerifier(exampleVKey)
	if err != nil {
		panic(err)
	}
	r, err := log.ParseReceipt([]byte(exampleReceipt))
	if err != nil {
		panic(err)
	}
	cp, _, err := log.OpenCheckpoint(r.Checkpoint, v)
	if err != nil {
		panic(err)
	}
	fmt.Println(cp.Origin, cp.Size, len(cp.Hash))
	// Output: example.org/log 2 32
}
