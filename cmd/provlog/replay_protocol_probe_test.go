package main

// A probe of replay of a call a client made in the newest MCP revision.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/proxy/replay"
)

// TestReplayProbeNewerRevisionCall: a 2026-07-28 client calls a stdio
// server (this test binary as the sidefx server, a go-sdk server) through
// the sidecar; the proxy serves that client from a second session in the
// newest revision (proxy/revision.go, sessionFor) and records the result
// as that session received it. Replaying the call against the same,
// unchanged server must say unchanged.
//
// Observed: "changed" ("3 fresh runs agree with each other but differ
// from the record"), paths /_meta and /resultType: the recorded result
// carries "resultType":"complete" and _meta serverInfo, which a go-sdk
// server adds on a 2026-07-28 session only, while replay always dials in
// 2025-11-25 (proxy.Dial: ProtocolVersion downstreamProtocolVersion,
// whatever the call entry's protocol_version or the server's protocol:
// pin). Every call of a newest-revision client to a stdio go-sdk server
// replays as changed.
//
// Fix: let replay dial a session per revision, as the proxy does: the
// call entry's protocol_version (>= 2026-07-28: the newest revision's
// session; a pinned protocol: that one), and compare the fresh result
// from the session the call would have gone to.
func TestReplayProbeNewerRevisionCall(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfgPath := filepath.Join(dir, "provlog.yaml")
	cfg := loadConfigText(t, cfgPath, fmt.Sprintf(`data: %s
servers:
  - id: fx
    command: [%q]
    env: {%s: %q}
    retain: full
    replay: true
`, data, os.Args[0], sidefxEnv, filepath.Join(dir, "effects")))
	ctx := context.Background()
	sc := mustOpenSidecar(t, cfg)
	ct, st := mcp.NewInMemoryTransports()
	ss, err := sc.proxy.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "probe", Version: "1"}, nil).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %s", v)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__append", Arguments: map[string]any{"text": "x"}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %v", err, res)
	}
	size, _ := sc.seq.Checkpoint()
	cs.Close()
	ss.Close()
	sc.close()
	if e := entryAt(t, data, size-2); e.Fields["protocol_version"] != "2026-07-28" {
		t.Fatalf("call entry: %v", e.Fields)
	}

	rep := replayJSON(t, data, cfgPath, size-2, size)
	if len(rep.Outcomes) != 1 {
		t.Fatalf("outcomes %+v", rep.Outcomes)
	}
	if o := rep.Outcomes[0]; o.Class != replay.Unchanged {
		t.Errorf("replay of a 2026-07-28 client's call to an unchanged server: %s (%s), paths %v; want unchanged", o.Class, o.Reason, o.Paths)
	}
}
