// Package oppmcp serves an [opp.Engine] as MCP tools: create_task,
// accept_task, report_completion, handoff_task, release_task, cancel_task,
// get_task_status and list_unaccepted_tasks (DESIGN.md §5, §7).
//
// # Arguments
//
// Every tool has a hand-written JSON Schema (types, maxLength, enum,
// additionalProperties false), and arguments are decoded strictly against
// the same description: unknown fields, duplicate keys, wrong types (a
// provenance given as an array, a number for a title, a null), fractional
// or negative indices and oversized arguments are refused with an isError
// result that says what was wrong, and nothing is written.
//
// # Results
//
// A result is text content holding JSON, and the same object as
// structuredContent. A tool that wrote an entry puts that entry's receipt
// (c2sp.org/tlog-proof@v1 text) in the result's _meta under
// [ReceiptMetaKey], as recorded calls do; get_task_status and
// list_unaccepted_tasks write nothing and carry no receipt.
//
// # Identity
//
// The acting actor comes from the actor function given to [Register] (the
// bearer token's actor over HTTP, the configured actor over stdio), never
// from arguments.
package oppmcp

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/opp"
)

// ReceiptMetaKey is the _meta key of the receipt of the entry a tool wrote.
const ReceiptMetaKey = "dev.provlog/receipt"

// Tool names.
const (
	ToolCreate         = "create_task"
	ToolAccept         = "accept_task"
	ToolReport         = "report_completion"
	ToolHandoff        = "handoff_task"
	ToolRelease        = "release_task"
	ToolCancel         = "cancel_task"
	ToolStatus         = "get_task_status"
	ToolListUnaccepted = "list_unaccepted_tasks"
)

// Names lists the tools Register adds, so a proxy can keep downstream tool
// names from colliding with them.
var Names = []string{ToolCreate, ToolAccept, ToolReport, ToolHandoff, ToolRelease, ToolCancel, ToolStatus, ToolListUnaccepted}

// MaxListed bounds how many tasks list_unaccepted_tasks returns (the
// oldest), so that its result stays small however many tasks wait.
const MaxListed = 500

// MaxArgumentBytes bounds the JSON arguments of one call: the largest valid
// arguments (4,000 characters of text, escaped) fit well within it.
const MaxArgumentBytes = 64 << 10

// ActorFunc returns the authenticated actor of a tool call.
type ActorFunc func(ctx context.Context, req *mcp.CallToolRequest) (string, error)

// param describes one tool argument, for both the schema and the decoder.
type param struct {
	name     string
	kind     string // "string" or "indices"
	required bool
	max      int // maxLength (characters) or maxItems
	enum     []string
	rule     string // rule named when it is malformed (default invalid_argument)
	desc     string
}

type toolDef struct {
	name, title, desc string
	params            []param
	readOnly          bool
	handle            func(ctx context.Context, e *opp.Engine, actor string, a args) (any, *opp.Result, error)
}

// args are decoded arguments by name.
type args struct {
	s  map[string]string
	ix map[string][]uint64
}

var taskIDParam = param{name: "task_id", kind: "string", required: true, max: 34,
	desc: "The task's id (t_ followed by 32 hex digits), from create_task or list_unaccepted_tasks."}

func noteParam(what string) param {
	return param{name: "note", kind: "string", max: opp.MaxText, desc: what}
}

var tools = []toolDef{
	{
		name:  ToolCreate,
		title: "Create a task",
		desc: "Create a task. It starts in pending_acceptance with no owner: nobody owns it until an actor calls accept_task. " +
			"offer_to reserves it for one actor (only they may accept it); it does not make them the owner. Returns the new task_id.",
		params: []param{
			{name: "title", kind: "string", required: true, max: opp.MaxTitle, desc: "What is to be done, in one line."},
			{name: "description", kind: "string", max: opp.MaxText, desc: "Details, acceptance criteria."},
			{name: "offer_to", kind: "string", max: opp.MaxActor, desc: "Reserve the task for this actor id."},
		},
		handle: func(ctx context.Context, e *opp.Engine, actor string, a args) (any, *opp.Result, error) {
			r, err := e.Create(ctx, actor, opp.CreateArgs{Title: a.s["title"], Description: a.s["description"], OfferTo: a.s["offer_to"]})
			return msg("Created task %s. It has no owner until someone calls accept_task.", r), r, err
		},
	},
	{
		name:  ToolAccept,
		title: "Accept a task",
		desc: "Become the owner of a task. A task has at most one owner; of simultaneous accepts exactly one wins. " +
			"Refused if another actor owns it, if it is reserved for someone else, or if it is completed or cancelled.",
		params: []param{taskIDParam},
		handle: func(ctx context.Context, e *opp.Engine, actor string, a args) (any, *opp.Result, error) {
			r, err := e.Accept(ctx, actor, a.s["task_id"])
			return msg("You now own task %s.", r), r, err
		},
	},
	{
		name:  ToolReport,
		title: "Report completion",
		desc: "Report that a task you own is done, and say how you know: provenance is exactly one of " +
			`"observed" (you saw it yourself; cite as evidence your own tool-call log entries made while you owned the task, at least one of a call that succeeded, none cited as observed evidence for another task), ` +
			`"reviewed" (you checked someone else's work; cite what you checked) or ` +
			`"reported" (someone told you; name them in source). ` +
			"evidence is a list of log entry indices (from receipts); each must exist. A claim more certain than your previous claim on the task " +
			"(reported < reviewed < observed) must cite evidence you have not cited before. The first claim completes the task.",
		params: []param{
			taskIDParam,
			{name: "provenance", kind: "string", required: true, enum: []string{"observed", "reviewed", "reported"}, rule: opp.RuleProvenance,
				desc: "How you know the claim is true."},
			{name: "summary", kind: "string", required: true, max: opp.MaxText, desc: "What was done."},
			{name: "evidence", kind: "indices", max: opp.MaxEvidence, desc: "Log entry indices supporting the claim."},
			{name: "source", kind: "string", max: opp.MaxSource, desc: "Who said so; required when provenance is reported."},
		},
		handle: func(ctx context.Context, e *opp.Engine, actor string, a args) (any, *opp.Result, error) {
			r, err := e.ReportCompletion(ctx, actor, opp.ClaimArgs{TaskID: a.s["task_id"], Provenance: a.s["provenance"],
				Summary: a.s["summary"], Evidence: a.ix["evidence"], Source: a.s["source"]})
			return msg("Recorded your completion claim on task %s.", r), r, err
		},
	},
	{
		name:  ToolHandoff,
		title: "Hand off a task",
		desc: "Hand a task you own to another actor. A snapshot of the task is frozen into the log, you stop owning it, " +
			"and it is reserved for the recipient, who must call accept_task to own it.",
		params: []param{
			taskIDParam,
			{name: "to", kind: "string", required: true, max: opp.MaxActor, desc: "The actor id to hand the task to (not yourself)."},
			noteParam("What the recipient should know."),
		},
		handle: func(ctx context.Context, e *opp.Engine, actor string, a args) (any, *opp.Result, error) {
			r, err := e.Handoff(ctx, actor, opp.HandoffArgs{TaskID: a.s["task_id"], To: a.s["to"], Note: a.s["note"]})
			return msg("Handed off task %s; it is reserved for the recipient until they accept it.", r), r, err
		},
	},
	{
		name:   ToolRelease,
		title:  "Release a task",
		desc:   "Give up a task you own. It returns to pending_acceptance with no owner and no reservation, and shows in list_unaccepted_tasks.",
		params: []param{taskIDParam, noteParam("Why you are giving it up.")},
		handle: func(ctx context.Context, e *opp.Engine, actor string, a args) (any, *opp.Result, error) {
			r, err := e.Release(ctx, actor, a.s["task_id"], a.s["note"])
			return msg("Released task %s; it has no owner now.", r), r, err
		},
	},
	{
		name:   ToolCancel,
		title:  "Cancel a task",
		desc:   "End a task you created that is neither completed nor cancelled. Any owner or reservation is cleared; nobody can act on it afterwards.",
		params: []param{taskIDParam, noteParam("Why it is cancelled.")},
		handle: func(ctx context.Context, e *opp.Engine, actor string, a args) (any, *opp.Result, error) {
			r, err := e.Cancel(ctx, actor, a.s["task_id"], a.s["note"])
			return msg("Cancelled task %s.", r), r, err
		},
	},
	{
		name:     ToolStatus,
		title:    "Get task status",
		desc:     "A task's state, owner, reservation and full history: every entry with its log index and leaf hash, so each can be proven.",
		params:   []param{taskIDParam},
		readOnly: true,
		handle: func(ctx context.Context, e *opp.Engine, actor string, a args) (any, *opp.Result, error) {
			t, err := e.Status(ctx, a.s["task_id"])
			return t, nil, err
		},
	},
	{
		name:  ToolListUnaccepted,
		title: "List unaccepted tasks",
		desc: fmt.Sprintf("The tasks with no owner that can be accepted (new, handed off or released), oldest first, with their age and reservation: "+
			"the oldest %d of them, with total saying how many there are.", MaxListed),
		readOnly: true,
		handle: func(ctx context.Context, e *opp.Engine, actor string, a args) (any, *opp.Result, error) {
			now := time.Now()
			list, total, err := e.ListUnaccepted(ctx, MaxListed)
			if err != nil {
				return nil, nil, err
			}
			type item struct {
				opp.Summary
				AgeSeconds     int64  `json:"age_seconds"`
				Age            string `json:"age"`
				WaitingSeconds int64  `json:"waiting_seconds"` // since it last lost its owner (or was created)
			}
			out := struct {
				Tasks []item `json:"tasks"`
				Total int    `json:"total"` // how many tasks can be accepted; the oldest MaxListed are listed
			}{Tasks: make([]item, len(list)), Total: total}
			for i, s := range list {
				out.Tasks[i] = item{Summary: s, AgeSeconds: int64(now.Sub(s.Created) / time.Second), Age: opp.Age(now.Sub(s.Created)),
					WaitingSeconds: int64(now.Sub(s.Since) / time.Second)}
			}
			return out, nil, nil
		},
	},
}

// written is the result of a tool that wrote an entry.
type written struct {
	Message string `json:"message"`
	opp.Summary
	Entry opp.EntryRef `json:"entry"`
}

// msg builds the result body of a write from its engine result.
func msg(format string, r *opp.Result) any {
	if r == nil {
		return nil
	}
	return written{Message: fmt.Sprintf(format, r.Task.ID), Summary: r.Task,
		Entry: opp.EntryRef{Index: r.Index, LeafHash: hex.EncodeToString(r.LeafHash)}}
}

// Register adds the OPP tools to s, served by e, with the caller's actor
// taken from actor.
func Register(s *mcp.Server, e *opp.Engine, actor ActorFunc) {
	for _, d := range tools {
		s.AddTool(&mcp.Tool{
			Name:        d.name,
			Title:       d.title,
			Description: d.desc,
			InputSchema: schema(d.params),
			Annotations: &mcp.ToolAnnotations{Title: d.title, ReadOnlyHint: d.readOnly, OpenWorldHint: new(false),
				DestructiveHint: new(d.name == ToolCancel)},
		}, handler(d, e, actor))
	}
}

func schema(ps []param) map[string]any {
	props := map[string]any{}
	required := []string{}
	for _, p := range ps {
		var s map[string]any
		switch p.kind {
		case "string":
			s = map[string]any{"type": "string", "description": p.desc}
			if p.enum != nil {
				s["enum"] = p.enum
			} else {
				s["maxLength"] = p.max
			}
		case "indices":
			s = map[string]any{"type": "array", "description": p.desc, "maxItems": p.max, "uniqueItems": true,
				"items": map[string]any{"type": "integer", "minimum": 0}}
		}
		props[p.name] = s
		if p.required {
			required = append(required, p.name)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

func handler(d toolDef, e *opp.Engine, actorOf ActorFunc) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		defer func() {
			if p := recover(); p != nil {
				res, err = nil, fmt.Errorf("%s: internal error: %v", d.name, p)
			}
		}()
		actor, aerr := actorOf(ctx, req)
		if aerr != nil {
			return refusal(opp.Refuse(opp.RuleIdentity, "could not establish who is calling: %v", aerr)), nil
		}
		var raw json.RawMessage
		if req.Params != nil {
			raw = req.Params.Arguments
		}
		a, rerr := decode(d.params, raw)
		if rerr != nil {
			return refusal(rerr), nil
		}
		body, r, err := d.handle(ctx, e, actor, a)
		if _, ok := opp.Refusal(err); ok {
			return refusal(err), nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.name, err)
		}
		out, err := result(body)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.name, err)
		}
		if r != nil && r.Receipt != nil {
			out.Meta = mcp.Meta{ReceiptMetaKey: r.Receipt.String()}
		}
		return out, nil
	}
}

func result(body any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encoding result: %w", err)
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
		StructuredContent: json.RawMessage(b),
	}, nil
}

// refusal is the tool result of err, a refusal made by [opp.Refuse].
func refusal(err error) *mcp.CallToolResult {
	re, _ := opp.Refusal(err)
	text := fmt.Sprintf("Refused by rule %s: %s. Nothing was written to the log.", re.Rule, strings.TrimSuffix(re.Msg, "."))
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"rule": re.Rule, "message": re.Msg}})
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: json.RawMessage(b),
	}
}

// decode checks raw against ps strictly and returns the values.
func decode(ps []param, raw json.RawMessage) (args, *log.ProblemsError) {
	a := args{s: map[string]string{}, ix: map[string][]uint64{}}
	fields, perr := decodeFields(ps, raw)
	if perr != nil {
		return a, perr
	}
	for _, p := range ps {
		v, ok := fields[p.name]
		if !ok {
			if p.required {
				m := fmt.Sprintf("missing required argument %s", p.name)
				if p.enum != nil {
					m += "; it must be exactly one of " + quoteAll(p.enum)
				}
				return a, opp.Refuse(p.ruleOf(), "%s", m)
			}
			continue
		}
		if perr := p.decodeInto(a, v); perr != nil {
			return a, perr
		}
	}
	return a, nil
}

// badArguments is the refusal of arguments that are malformed as a whole.
func badArguments(format string, v ...any) *log.ProblemsError {
	return opp.Refuse(opp.RuleInvalidArgument, format, v...)
}

// decodeFields checks that raw is one JSON object of at most
// MaxArgumentBytes, with no argument ps does not name, and returns its
// fields.
func decodeFields(ps []param, raw json.RawMessage) (map[string]json.RawMessage, *log.ProblemsError) {
	if len(raw) > MaxArgumentBytes {
		return nil, badArguments("arguments are %d bytes, over the limit of %d; shorten the text fields", len(raw), MaxArgumentBytes)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	// Canonicalize refuses what JSON cannot say once and for all: invalid
	// UTF-8, lone surrogates and duplicate keys (which would make
	// {"provenance":"reported","provenance":"observed"} mean two things).
	if _, err := log.Canonicalize(raw); err != nil {
		return nil, badArguments("arguments are not valid JSON (%v); send one JSON object", err)
	}
	if raw[0] != '{' {
		return nil, badArguments("arguments must be a JSON object, got %s", describe(raw))
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, badArguments("arguments do not decode: %v", err)
	}
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.name
	}
	for k := range fields {
		if !slices.Contains(names, k) {
			if len(names) == 0 {
				return nil, badArguments("unknown argument %q; this tool takes no arguments", trim(k))
			}
			return nil, badArguments("unknown argument %q; this tool takes only %s", trim(k), strings.Join(names, ", "))
		}
	}
	return fields, nil
}

// ruleOf returns the rule a malformed p is refused by.
func (p param) ruleOf() string {
	if p.rule == "" {
		return opp.RuleInvalidArgument
	}
	return p.rule
}

// decodeInto decodes v, the value of p, into a.
func (p param) decodeInto(a args, v json.RawMessage) *log.ProblemsError {
	wrong := func(want string) *log.ProblemsError {
		m := fmt.Sprintf("%s must be %s, got %s", p.name, want, describe(v))
		if p.enum != nil {
			m = fmt.Sprintf("%s must be exactly one of %s as a string, got %s", p.name, quoteAll(p.enum), describe(v))
		}
		return opp.Refuse(p.ruleOf(), "%s", m)
	}
	switch p.kind {
	case "string":
		if v[0] != '"' {
			return wrong("a string")
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return wrong("a string")
		}
		a.s[p.name] = s
	case "indices":
		if v[0] != '[' {
			return wrong("an array of log indices (whole numbers)")
		}
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil {
			return wrong("an array of log indices (whole numbers)")
		}
		if len(items) > p.max {
			return badArguments("%s lists %d items, over the limit of %d", p.name, len(items), p.max)
		}
		out := make([]uint64, 0, len(items))
		for _, it := range items {
			n, err := strconv.ParseUint(string(it), 10, 64)
			if err != nil {
				return badArguments("%s must hold log indices written as whole numbers like 12, got %s", p.name, describe(it))
			}
			out = append(out, n)
		}
		a.ix[p.name] = out
	}
	return nil
}

// describe names the JSON type of v (and shows short values) for messages.
func describe(v json.RawMessage) string {
	if len(v) == 0 {
		return "nothing"
	}
	kind := map[byte]string{'"': "a string", '[': "an array", '{': "an object", 't': "a boolean", 'f': "a boolean", 'n': "null"}[v[0]]
	if kind == "" {
		kind = "a number"
	}
	if len(v) <= 40 && kind != "null" {
		return kind + " " + string(v)
	}
	return kind
}

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = strconv.Quote(x)
	}
	return strings.Join(q, ", ")
}

func trim(s string) string {
	if len(s) > 40 {
		cut := 40
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut-- // at a character's start: half of one shows as bytes
		}
		return s[:cut] + "…"
	}
	return s
}
