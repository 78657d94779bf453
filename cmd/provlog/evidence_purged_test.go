package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// TestEvidencePurgedPayload: a claim cites a call whose result a server
// with retain: full kept as a blob; an erasure purges it. provlog
// evidence for the claim says, plainly, that the cited call's result was
// purged, by which purge entry and why; before the purge it says nothing
// of the kind. Before, it never did: the evidence read as if the payload
// were there to be had.
func TestEvidencePurgedPayload(t *testing.T) {
	_, data, cfg := retainingEcho(t)
	sc := mustOpenSidecar(t, cfg)
	cs, closeClient := memClient(t, sc, "evidence-purge")
	created, _ := callTool(t, cs, "create_task", map[string]any{"title": "echo it"})
	id := created["task_id"].(string)
	callTool(t, cs, "accept_task", map[string]any{"task_id": id})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"q": "keep me"}})
	if err != nil || res.IsError {
		t.Fatalf("fx__echo: %v %v", err, res)
	}
	rc, err := log.ParseReceipt([]byte(res.Meta["dev.provlog/receipt"].(string)))
	if err != nil {
		t.Fatal(err)
	}
	result := rc.Index
	cr, err := log.ParseCallResult(sidecarEntry(t, sc, result))
	if err != nil {
		t.Fatal(err)
	}
	blob, call := cr.ResultSHA256, cr.Call
	_, claimRC := callTool(t, cs, "report_completion", map[string]any{"task_id": id, "provenance": "observed",
		"summary": "echoed", "evidence": []uint64{call}})
	crc, err := log.ParseReceipt([]byte(claimRC))
	if err != nil {
		t.Fatal(err)
	}
	claim := strconv.FormatUint(crc.Index, 10)
	closeClient()
	sc.close()

	out, code := runCmd(t, "evidence", "--data", data, "--index", claim, "--out", filepath.Join(t.TempDir(), "before"))
	if code != 0 || strings.Contains(out, "purged") {
		t.Fatalf("evidence before any purge: exit %d:\n%s", code, out)
	}
	if out, code := runCmd(t, "purge", "--data", data, "--blob", blob, "--reason", "erasure request #9"); code != 0 {
		t.Fatalf("purge: exit %d:\n%s", code, out)
	}
	out, code = runCmd(t, "evidence", "--data", data, "--index", claim, "--out", filepath.Join(t.TempDir(), "after"))
	if code != 0 {
		t.Fatalf("evidence after the purge: exit %d:\n%s", code, out)
	}
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "purged") {
			line = l
		}
	}
	for _, want := range []string{fmt.Sprintf("entry %d", result), "result", blob[:16], "erasure request #9"} {
		if !strings.Contains(line, want) {
			t.Fatalf("evidence for claim %s citing call %d, whose result (entry %d, blob %s) was purged, says no line with %q:\n%s", claim, call, result, blob[:12], want, out)
		}
	}
}
