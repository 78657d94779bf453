package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/server"
	"github.com/provlog/provlog/proxy/replay"
)

// recordReplayTool is the MCP tool through which `provlog replay --log`
// records its run in a running sidecar's log (the HTTP log API is
// read-only). The entry is the caller's report, read strictly as a
// [replay.Record] and attributed to the caller's authenticated actor like
// every other entry; it is recorded, so it is not one of the provlog__
// question tools.
const recordReplayTool = "record_replay"

// maxReplayArgs bounds the tool's arguments: one entry's worth.
const maxReplayArgs = log.MaxEntrySize

// A recordAnswer is record_replay's answer.
type recordAnswer struct {
	Index uint64 `json:"index"`
	// Hashed are the members the sidecar replaced by their hash
	// ([replay.Record.Fit]): the caller sized the fields under its own
	// idea of the actor, and the entry, written under the caller's
	// authenticated actor and auth, was too large for the log.
	Hashed []string `json:"hashed,omitempty"`
	Note   string   `json:"note,omitempty"`
}

func registerReplayTool(s *mcp.Server, seq *server.Sequencer, store entryReader, actor func(context.Context, *mcp.CallToolRequest) (string, error)) {
	s.AddTool(&mcp.Tool{
		Name:        recordReplayTool,
		Description: "Record the summary of a replay run (provlog replay --log) as a replay entry in the log, attributed to the caller.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"fields":{"type":"object","description":"the replay entry's fields as provlog replay makes them: range, runs, counts, outcomes or outcomes_sha256, and optionally definitions, definition_changes or definition_changes_sha256, ignore_sha256"}},"required":["fields"],"additionalProperties":false}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		refuse := func(format string, args ...any) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...) + " Nothing was written to the log."}}}, nil
		}
		a, err := actor(ctx, req)
		if err != nil {
			return refuse("%v.", err)
		}
		if len(req.Params.Arguments) > maxReplayArgs {
			return refuse("The arguments are %d bytes, over the limit of %d.", len(req.Params.Arguments), maxReplayArgs)
		}
		var args struct {
			Fields map[string]any `json:"fields"`
		}
		dec := json.NewDecoder(bytes.NewReader(req.Params.Arguments))
		dec.UseNumber()
		dec.DisallowUnknownFields()
		if err := dec.Decode(&args); err != nil || dec.More() {
			return refuse("The arguments must be one object {\"fields\": {...}}: %v.", err)
		}
		// The fields are held to what provlog replay writes, so that no
		// client puts members of its own under the replay kind.
		rec, err := replay.ParseRecord(&log.Entry{Kind: replay.KindReplay, Fields: args.Fields})
		if err != nil {
			return refuse("fields is not a replay report as provlog replay makes one (docs/formats.md, replay): %v.", err)
		}
		// A report names calls of this log: a range past its size
		// speaks of entries it does not hold.
		if size, _ := seq.Checkpoint(); rec.To > size {
			return refuse("range.to %d is past the log's size %d: a replay reports on entries the log holds.", rec.To, size)
		}
		// And the calls it names must be calls of this log.
		if err := checkReplayCalls(ctx, store, rec); err != nil {
			return refuse("The report does not match the log: %v.", err)
		}
		rec.Time, rec.Actor, rec.Auth = time.Now(), a, log.AuthFrom(ctx)
		hashed := rec.Fit()
		b, err := rec.Marshal()
		if err != nil {
			return refuse("The entry cannot be made: %v.", err)
		}
		rc, err := seq.Append(ctx, b)
		if err != nil {
			return nil, fmt.Errorf("provlog: recording the replay run: %w", err)
		}
		out, _ := json.Marshal(recordAnswer{Index: rc.Index, Hashed: hashed, Note: fitNote(hashed)})
		return &mcp.CallToolResult{
			Meta:    mcp.Meta{"dev.provlog/receipt": rc.String()},
			Content: []mcp.Content{&mcp.TextContent{Text: string(out)}},
		}, nil
	})
}

// checkReplayCalls holds rec to the call entries of store
// (replay.Record.CheckCalls), reading those rec names.
func checkReplayCalls(ctx context.Context, store entryReader, rec *replay.Record) error {
	return rec.CheckCalls(func(lo, hi uint64) ([]bool, error) {
		es, err := store.Entries(ctx, lo, hi)
		if err != nil {
			return nil, fmt.Errorf("reading entries [%d, %d): %w", lo, hi, err)
		}
		is := make([]bool, len(es))
		for j, b := range es {
			e, err := log.ParseEntry(b)
			is[j] = err == nil && e.Kind == log.KindCall
		}
		return is, nil
	})
}

// replayArgs returns record_replay's arguments for r, {"fields": ...},
// as they go to the sidecar: the MCP client sends a json.RawMessage as it
// is, so their length is the one the sidecar holds to maxReplayArgs.
func replayArgs(r *replay.Record) (json.RawMessage, error) {
	e, err := r.Entry()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // <, > and & as themselves, as the SDK's encoder writes them
	if err := enc.Encode(map[string]any{"fields": e.Fields}); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// fitArgs pins members of r by their hash ([replay.Record.FitBy]) only
// while record_replay's arguments for r are over maxReplayArgs, which the
// sidecar refuses outright; it returns the members it replaced. The
// fitting proper is the sidecar's: it alone knows the actor and auth the
// entry is written under. What fitArgs pins the sidecar would have pinned
// too: the entry holds the same fields, written no longer than here
// (JCS, which escapes no more than this encoder), plus kind, time and
// actor, so arguments over maxReplayArgs (log.MaxEntrySize) mean an
// entry too large under any actor.
func fitArgs(r *replay.Record) []string {
	return r.FitBy(func(r *replay.Record) bool {
		args, err := replayArgs(r)
		return err != nil || len(args) <= maxReplayArgs // an error is recordReplayRemote's to report
	})
}

// recordReplayRemote records a replay run through a running sidecar's MCP
// front and returns the entry's index and the members the sidecar
// replaced by their hash to fit it. The sidecar writes r's members under
// the token's actor, at its own time.
func recordReplayRemote(ctx context.Context, base, token string, r *replay.Record) (uint64, []string, error) {
	args, err := replayArgs(r)
	if err != nil {
		return 0, nil, fmt.Errorf("recording the replay run: %w", err)
	}
	if token == "" {
		return 0, nil, errors.New("recording the replay run needs an actor's token (--token or PROVLOG_TOKEN)")
	}
	endpoint, err := log.JoinURL(base, "mcp")
	if err != nil {
		return 0, nil, fmt.Errorf("--log: %w", err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "provlog-replay", Version: version}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: &http.Client{Transport: bearerTransport{token}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return 0, nil, fmt.Errorf("connecting to the sidecar to record the replay run: %w", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: recordReplayTool, Arguments: args})
	if err != nil {
		return 0, nil, fmt.Errorf("recording the replay run: %w", err)
	}
	var text string
	for _, ct := range res.Content {
		if t, ok := ct.(*mcp.TextContent); ok {
			text += t.Text
		}
	}
	if res.IsError {
		return 0, nil, fmt.Errorf("recording the replay run: %s", text)
	}
	var out recordAnswer
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		return 0, nil, fmt.Errorf("recording the replay run: unexpected answer %q", text)
	}
	return out.Index, out.Hashed, nil
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
