package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
)

// TestCorruptBlobNotKeptAgain: with retain: full, a result is kept
// as a blob named by its hash. The blob file then goes bad (a flipped
// byte: bit rot, a bad sector, a hand edit). The next call that gets the
// same result writes a call.result entry with result_retained: true
// naming the same blob, and the client gets the result and its receipt.
// Either the proxy keeps the result (the store then holds those bytes
// under that name) or, if it cannot, it withholds the result and health
// says blob_store_failing, as for any failed blob write (README).
//
// Before: the call succeeds with a receipt, health lists no problem,
// and the blob is still the corrupt file: the new entry says its result
// is retained when the store cannot give it back. blobSet.put
// (proxy/record.go) finds Get failing and calls Put, but
// dirBackend.WriteBlob (log/blobs/blobs.go) returns nil when a file of
// that name exists, without looking at it, so Store.Put reports success
// and Store.Err stays nil.
func TestCorruptBlobNotKeptAgain(t *testing.T) {
	_, data, cfg := retainingEcho(t)
	ctx := context.Background()
	sc := mustOpenSidecar(t, cfg)
	defer sc.close()
	cs, closeClient := memClient(t, sc, "probe")
	defer closeClient()
	echo := &mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"q": "kept twice"}}
	if res, err := cs.CallTool(ctx, echo); err != nil || res.IsError {
		t.Fatalf("first call: %v %v", err, res)
	}
	size, _ := sc.seq.Checkpoint()
	blob, _ := sidecarEntry(t, sc, size-1).Fields["result_sha256"].(string)
	path := filepath.Join(data, blobDir, blob[:2], blob)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the first result's blob: %v", err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	res, err := cs.CallTool(ctx, echo)
	if err != nil || res.IsError {
		// Refused or withheld: what a failed blob write does. Health
		// must say so.
		for _, p := range sc.problems() {
			if p.Reason == reasonBlobs {
				return
			}
		}
		t.Fatalf("second call withheld (%v %v) but health says nothing of the blob store: %+v", err, res, sc.problems())
	}
	size, _ = sc.seq.Checkpoint()
	e := sidecarEntry(t, sc, size-1)
	if e.Fields["result_sha256"] != blob || e.Fields["result_retained"] != true {
		t.Fatalf("second call.result: %v, want result_retained of blob %s", e.Fields, blob)
	}
	bs, _ := blobs.Open(filepath.Join(data, blobDir))
	if _, err := bs.Get(blob); err != nil {
		t.Errorf("entry %d says its result is retained as blob %s, and the client got its receipt (health problems: %+v), but the store cannot give it back: %v",
			size-1, blob[:12], sc.problems(), err)
	}
}

// TestFullBlobStoreKeepsOutcome: the blob store is on a volume of its
// own that is full; the log (Pebble, elsewhere) is healthy. A call to a
// retain: full server is recorded and forwarded, and the server answers.
// The result cannot be kept, so it is withheld from the client (README,
// blob_store_failing). But the outcome did arrive, and the log can write:
// DESIGN §2 keeps "a call without a result" for a call "whose outcome
// never arrived (crash, kill)". The log must record that the call was
// answered: a call.result with the result's hash (and that it was not
// kept), or with the error the client got.
//
// Before: no call.result is written at all (proxy recordResult returns
// at bs.put's error before it marshals the entry); the call stays open,
// and audit explains it as "cut off by a crash or kill, refused when the
// log failed while recording it, or under way", none of which happened.
// The server's answer, which the proxy held and hashed, is lost to the log.
func TestFullBlobStoreKeepsOutcome(t *testing.T) {
	fx, data, cfg := retainingEcho(t)
	store := filepath.Join(data, blobDir)
	if err := os.MkdirAll(store, 0o700); err != nil {
		t.Fatal(err)
	}
	needMount(t, "-t", "tmpfs", "-o", "size=16k", "tmpfs", store)
	t.Cleanup(func() { umount(t, store) })
	filler := make([]byte, 4096)
	for i := 0; ; i++ {
		err := os.WriteFile(filepath.Join(store, fmt.Sprintf("filler-%d", i)), filler, 0o600)
		if errors.Is(err, syscall.ENOSPC) {
			break
		} else if err != nil || i > 100 {
			t.Fatalf("filling the blob volume: %v", err)
		}
	}

	ctx := context.Background()
	sc := mustOpenSidecar(t, cfg)
	defer sc.close()
	cs, closeClient := memClient(t, sc, "probe")
	defer closeClient()
	before, _ := sc.seq.Checkpoint()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"q": "answered"}})
	if err == nil && !res.IsError {
		t.Fatal("the result was kept: the volume is not full")
	}
	fx.mu.Lock()
	answered := len(fx.got)
	fx.mu.Unlock()
	if answered != 1 {
		t.Fatalf("the server got %d calls, want 1", answered)
	}
	if sc.seq.Err() != nil {
		t.Fatalf("the log stopped: %v", sc.seq.Err())
	}
	after, _ := sc.seq.Checkpoint()
	var call, result int64 = -1, -1
	for i := before; i < after; i++ {
		e := sidecarEntry(t, sc, i)
		switch e.Kind {
		case log.KindCall:
			call = int64(i)
		case log.KindCallResult:
			result = int64(i)
		}
	}
	if call < 0 {
		t.Fatalf("no call entry in [%d, %d)", before, after)
	}
	if result < 0 {
		t.Errorf("call entry %d was forwarded and answered, the log is healthy (size %d, no fault), but no call.result records its outcome: the log shows it as a call cut off by a crash (client error: %v %v)",
			call, after, err, res)
	}
	if result >= 0 {
		e := sidecarEntry(t, sc, uint64(result))
		if e.Fields["result_retained"] != nil || e.Fields["result_sha256"] == nil || !strings.Contains(fmt.Sprint(e.Fields["error"]), "provlog withheld the result from the client: it could not be kept") {
			t.Errorf("call.result %d: %v, want the result's hash, not retained, and an error saying it was withheld", result, e.Fields)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "was answered (log entries") {
		t.Errorf("the client's error: %v, want it to say the call was answered and its result withheld", err)
	}
}
