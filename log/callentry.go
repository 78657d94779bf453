package log

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// KindCallResult is the kind of the entry that ends a call (see [CallResultEntry]).
const KindCallResult = "call.result"

// A CallEntry is a call entry (DESIGN §2): a tools/call the proxy is about to
// forward, recorded before anything reaches the downstream server. Its
// outcome follows in a [CallResultEntry] citing the call's index; a call
// without one was cut off (a crash, a kill) or is still under way.
//
// Logs written before call.result existed hold one call entry per call,
// written after the call with its outcome in it; [ParseCall] reads those
// too and returns their outcome in Outcome.
type CallEntry struct {
	Time   time.Time // when the proxy took the call (also its "started")
	Actor  string
	Auth   *Auth  // how Actor was authenticated, if by an identity provider
	Server string // the downstream server's id
	Tool   string // the tool's name on that server
	// ToolSHA256 is the hex SHA-256 of the JCS form of the tool's
	// definition as the server listed it, if known.
	ToolSHA256 string
	// Args are the arguments, redacted, in canonical form; nil when they
	// moved to a blob and only ArgsSHA256 is kept.
	Args       CanonicalJSON
	ArgsSHA256 string
	Client     *CallClient // from the client's initialize, if known
	// ProtocolVersion is the client's protocol revision, if known.
	ProtocolVersion string

	// A call the server answered with an input_required result (MCP
	// 2026-07-28, SEP-2322) goes on in further legs, each a call entry
	// of its own with the same tool and arguments (wire: "continues",
	// "input_responses_sha256"). Continues is the index of the
	// call.result entry whose input_required result the leg answers (0:
	// the call's first leg, or a retry the proxy could not tie to one);
	// InputResponsesSHA256 is the hex SHA-256 of the JCS form of the
	// inputResponses the leg carries to the server, configured fields
	// redacted. Its requestState is the server's own, from the result
	// that Continues names.
	Continues            uint64
	InputResponsesSHA256 string

	// Outcome is the outcome of a call recorded in one entry (old logs),
	// with Call left 0: it is the entry's own. Marshal refuses a CallEntry with
	// an Outcome; provlog writes a CallResult instead.
	Outcome *CallResultEntry
}

// CallClient names the client software that made a call.
type CallClient struct {
	Name, Version string
}

// A CallResultEntry is a call.result entry: the outcome of the call entry at
// index Call, recorded before the client sees it.
type CallResultEntry struct {
	Time  time.Time // when the outcome arrived
	Actor string    // the call's actor
	Auth  *Auth     // the call's authentication, if by an identity provider
	Call  uint64    // the index of the call entry

	// ResultSHA256 is the hex SHA-256 of the JCS form of the result as
	// the server sent it (of the bytes as received when ResultRaw);
	// empty when there was no result (an error).
	ResultSHA256 string
	ResultBytes  int64 // the size of that result as received
	// ResultRaw says the result is not I-JSON, so JCS could not apply.
	ResultRaw bool
	// ResultRetained says the result is kept as a blob (retain: full),
	// in the form ResultSHA256 is over, named ResultSHA256 unless
	// RetainedSHA256 is set (wire: "result_retained", only ever true).
	ResultRetained bool
	// RetainedSHA256 names the kept blob when it is not the result as
	// received: a result echoing a redacted value is kept with that
	// value replaced by "[redacted]", under this hash of its own.
	RetainedSHA256 string
	// ResultRemarshalled says the wire bytes were not captured and the
	// SDK's re-encoding was hashed (not expected).
	ResultRemarshalled bool

	IsError     bool
	Error       string // a failed call's error text, redacted values scrubbed out
	ErrorCode   int64  // its JSON-RPC code, if any
	DataRelease string // the server's data release, if it has a source (wire: "release")
	Duration    time.Duration
}

// Marshal returns the call entry's bytes. It fails as [Entry.Marshal]
// does; an entry too large wraps [ErrEntryTooLarge], and the caller may
// move Args to a blob and set ArgsSHA256 instead.
func (c *CallEntry) Marshal() ([]byte, error) {
	if c.Outcome != nil {
		return nil, errors.New("call entry: an outcome goes in a call.result entry")
	}
	if c.Server == "" || c.Tool == "" {
		return nil, errors.New("call entry: server and tool are required")
	}
	if (c.Args == nil) == (c.ArgsSHA256 == "") {
		return nil, errors.New("call entry: exactly one of args and args_sha256 is required")
	}
	// The members by type, in canonical order (appendMembers sorts
	// them anyway): no map, no boxed values.
	var buf [14]member // and the common ones (marshalEntry)
	ms := buf[:0]
	if c.Args != nil {
		ms = append(ms, member{key: "args", kind: memberCanonical, raw: c.Args})
	} else {
		ms = append(ms, strMember("args_sha256", c.ArgsSHA256))
	}
	var client [2]member
	if c.Client != nil {
		client = [2]member{strMember("name", c.Client.Name), strMember("version", c.Client.Version)}
		ms = append(ms, member{key: "client", kind: memberObject, sub: client[:]})
	}
	if c.Continues != 0 {
		ms = append(ms, numMember("continues", float64(c.Continues)))
	}
	if c.InputResponsesSHA256 != "" {
		ms = append(ms, strMember("input_responses_sha256", c.InputResponsesSHA256))
	}
	if c.ProtocolVersion != "" {
		ms = append(ms, strMember("protocol_version", c.ProtocolVersion))
	}
	ms = append(ms, strMember("server", c.Server), timeMember("started", c.Time), strMember("tool", c.Tool))
	if c.ToolSHA256 != "" {
		ms = append(ms, strMember("tool_sha256", c.ToolSHA256))
	}
	return marshalEntry(KindCall, c.Time, c.Actor, c.Auth, ms, nil)
}

// Marshal returns the call.result entry's bytes.
func (r *CallResultEntry) Marshal() ([]byte, error) {
	var buf [17]member
	ms := append(buf[:0], numMember("call", float64(r.Call)), numMember("duration_ns", float64(r.Duration.Nanoseconds())),
		boolMember("is_error", r.IsError))
	ms = r.appendOutcome(ms)
	return marshalEntry(KindCallResult, r.Time, r.Actor, r.Auth, ms, nil)
}

// appendOutcome appends the outcome's members to ms.
func (r *CallResultEntry) appendOutcome(ms []member) []member {
	// Each member is written when it is set, so what parses marshals back
	// as it was.
	for _, m := range [...]struct {
		k, v string
	}{{"result_sha256", r.ResultSHA256}, {"result_retained_sha256", r.RetainedSHA256}, {"error", r.Error}, {"release", r.DataRelease}} {
		if m.v != "" {
			ms = append(ms, strMember(m.k, m.v))
		}
	}
	if r.ResultRetained {
		ms = append(ms, boolMember("result_retained", true))
	}
	if r.ResultRemarshalled {
		ms = append(ms, boolMember("result_remarshalled", true))
	}
	if r.ResultSHA256 != "" || r.ResultBytes != 0 {
		ms = append(ms, numMember("result_bytes", float64(r.ResultBytes)))
	}
	if r.ResultRaw {
		ms = append(ms, boolMember("result_canonical", false))
	}
	if r.ErrorCode != 0 {
		ms = append(ms, numMember("error_code", float64(r.ErrorCode)))
	}
	return ms
}

// ParseCall reads a call entry, of either form (see [CallEntry]).
func ParseCall(e *Entry) (*CallEntry, error) {
	if e.Kind != KindCall {
		return nil, fmt.Errorf("entry is a %s entry, not a call", e.Kind)
	}
	rd := fieldReader{f: e.Fields}
	c := &CallEntry{
		Time:            e.Time,
		Actor:           e.Actor,
		Auth:            e.Auth,
		Server:          rd.str("server"),
		Tool:            rd.str("tool"),
		ToolSHA256:      rd.str("tool_sha256"),
		ArgsSHA256:      rd.str("args_sha256"),
		ProtocolVersion: rd.str("protocol_version"),
		Continues:       uint64(rd.int("continues")),

		InputResponsesSHA256: rd.str("input_responses_sha256"),
	}
	if v, ok := e.Fields["args"]; ok {
		b, err := appendCanonical(nil, v, 1)
		if err != nil {
			rd.fail("args", err.Error())
		}
		c.Args = b
	}
	if v, ok := e.Fields["client"]; ok {
		m, ok := v.(map[string]any)
		if !ok {
			rd.fail("client", "not an object")
		} else {
			cr := fieldReader{f: m}
			c.Client = &CallClient{Name: cr.str("name"), Version: cr.str("version")}
			if cr.err != nil {
				rd.fail("client", cr.err.Error())
			}
		}
	}
	if hasAny(e.Fields, "is_error", "duration_ns", "result_sha256") {
		// One entry per call, outcome included (logs before call.result).
		c.Outcome = &CallResultEntry{Time: e.Time, Actor: e.Actor}
		c.Outcome.readOutcome(&rd)
		if st := rd.str("started"); st != "" {
			if t, err := time.Parse(TimeFormat, st); err == nil {
				c.Outcome.Time = t.Add(c.Outcome.Duration)
			}
		}
	}
	if rd.err != nil {
		return nil, fmt.Errorf("call entry: %w", rd.err)
	}
	return c, nil
}

func hasAny(f map[string]any, keys ...string) bool {
	for _, k := range keys {
		if _, ok := f[k]; ok {
			return true
		}
	}
	return false
}

// ParseCallResult reads a call.result entry.
func ParseCallResult(e *Entry) (*CallResultEntry, error) {
	if e.Kind != KindCallResult {
		return nil, fmt.Errorf("entry is a %s entry, not a call.result", e.Kind)
	}
	rd := fieldReader{f: e.Fields}
	r := &CallResultEntry{Time: e.Time, Actor: e.Actor, Auth: e.Auth}
	if _, ok := e.Fields["call"]; !ok {
		rd.fail("call", "missing")
	}
	r.Call = uint64(rd.int("call"))
	r.readOutcome(&rd)
	if rd.err != nil {
		return nil, fmt.Errorf("call.result entry: %w", rd.err)
	}
	return r, nil
}

func (r *CallResultEntry) readOutcome(rd *fieldReader) {
	r.ResultSHA256 = rd.str("result_sha256")
	r.ResultBytes = rd.int("result_bytes")
	r.ResultRaw, r.ResultRemarshalled = rd.resultForm()
	// Only true was ever written, and a false would say nothing an absent
	// member does not while letting one outcome be spelled two ways.
	r.ResultRetained = rd.marker("result_retained", true)
	r.RetainedSHA256 = rd.str("result_retained_sha256")
	r.IsError = rd.boolean("is_error")
	r.Error = rd.str("error")
	r.ErrorCode = rd.int("error_code")
	r.DataRelease = rd.str("release")
	r.Duration = time.Duration(rd.int("duration_ns"))
}

// RetainedBlob names the blob holding the kept result, or "" if none was
// kept.
func (r *CallResultEntry) RetainedBlob() string {
	switch {
	case !r.ResultRetained:
		return ""
	case r.RetainedSHA256 != "":
		return r.RetainedSHA256
	}
	return r.ResultSHA256
}

// fieldReader reads an entry's fields by type, keeping the first error.
// Absent fields read as zero values.
type fieldReader struct {
	f   map[string]any
	err error
}

func (r *fieldReader) fail(k, why string) {
	if r.err == nil {
		r.err = fmt.Errorf("field %q: %s", k, why)
	}
}

func (r *fieldReader) str(k string) string {
	v, ok := r.f[k]
	if !ok {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		r.fail(k, "not a string")
	}
	return s
}

func (r *fieldReader) boolean(k string) bool {
	v, ok := r.f[k]
	if !ok {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		r.fail(k, "not a boolean")
	}
	return b
}

// resultForm reads how an entry's result_sha256 was taken, the markers
// call.result and read entries share: result_canonical (only ever false)
// and result_remarshalled (only ever true). Either other value is refused,
// as provlog never writes it: an entry saying "result_canonical": true
// would otherwise read as one that says nothing, and two entries with one
// hash could claim different forms.
func (r *fieldReader) resultForm() (raw, remarshalled bool) {
	return r.marker("result_canonical", false), r.marker("result_remarshalled", true)
}

// marker reads member k, which is either absent or holds want, and says
// whether it is present.
func (r *fieldReader) marker(k string, want bool) bool {
	v, ok := r.f[k]
	if !ok {
		return false
	}
	if v != want {
		r.fail(k, fmt.Sprintf("present but not %t", want))
	}
	return true
}

func (r *fieldReader) int(k string) int64 {
	v, ok := r.f[k]
	if !ok {
		return 0
	}
	n, ok := v.(json.Number)
	if !ok {
		r.fail(k, "not a number")
		return 0
	}
	i, err := n.Int64()
	if err != nil || i < 0 && k != "error_code" {
		r.fail(k, "not a non-negative integer")
		return 0
	}
	return i
}

// Kinds of what the agent read and which tools it was offered (DESIGN §2).
const (
	KindTools        = "tools"
	KindResourceRead = "resource.read"
	KindPromptGet    = "prompt.get"
)

// A ToolsEntry is a tools entry: a downstream server's tool list as the
// proxy read it, written when it is first read and whenever it changes.
// A call's tool_sha256 names one of its definitions.
//
// A list too large for one entry is written as several, its parts (see
// [ToolsEntry.MarshalParts]): each names part Part of Parts (wire: "part",
// "parts", from 1; absent when the list is whole) and holds some of the
// tools, and the list is all of them, in the order of the parts.
type ToolsEntry struct {
	Time   time.Time
	Actor  string // "provlog": the proxy read it
	Server string
	Tools  []ToolSum
	// Part and Parts: which part of a list written in several entries
	// this one is; both zero for a whole list.
	Part, Parts int64
}

// A ToolSum names a tool and the hex SHA-256 of the JCS form of its
// definition exactly as the server listed it.
type ToolSum struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
}

// Marshal returns the tools entry's bytes.
func (t *ToolsEntry) Marshal() ([]byte, error) {
	tools := make([]any, len(t.Tools))
	for i, s := range t.Tools {
		tools[i] = map[string]any{"name": s.Name, "sha256": s.SHA256}
	}
	f := map[string]any{"server": t.Server, "tools": tools}
	if t.Parts != 0 {
		f["part"], f["parts"] = t.Part, t.Parts
	}
	return (&Entry{Kind: KindTools, Time: t.Time, Actor: t.Actor, Fields: f}).Marshal()
}

// MarshalParts returns the tools entry's bytes as one entry (Part and
// Parts are ignored), or, when the list is too large for one
// ([MaxEntrySize]: some 700 tools), as the fewest parts that hold it,
// each an entry within the limit, in order. It fails only if one tool
// alone cannot fit in an entry (a name of tens of kilobytes).
func (t *ToolsEntry) MarshalParts() ([][]byte, error) {
	whole := *t
	whole.Part, whole.Parts = 0, 0
	b, err := whole.Marshal()
	if !errors.Is(err, ErrEntryTooLarge) {
		if err != nil {
			return nil, err
		}
		return [][]byte{b}, nil
	}
	// The envelope of a part, with the widest part numbers, and the
	// member each tool adds to it (encoding/json's escaping of a name is
	// never shorter than JCS's).
	probe := whole
	probe.Tools, probe.Part, probe.Parts = nil, int64(len(t.Tools)), int64(len(t.Tools))
	env, err := probe.Marshal()
	if err != nil {
		return nil, err
	}
	room := MaxEntrySize - len(env)
	var chunks [][]ToolSum
	used := room
	for i, s := range t.Tools {
		name, _ := json.Marshal(s.Name)
		sum, _ := json.Marshal(s.SHA256)
		n := len(`{"name":,"sha256":},`) + len(name) + len(sum)
		if n > room {
			return nil, fmt.Errorf("tools entry: tool %d (%.64q...) alone is over the entry limit of %d bytes: %w", i, s.Name, MaxEntrySize, ErrEntryTooLarge)
		}
		if used+n > room {
			chunks, used = append(chunks, nil), 0
		}
		chunks[len(chunks)-1] = append(chunks[len(chunks)-1], s)
		used += n
	}
	out := make([][]byte, len(chunks))
	for i, c := range chunks {
		part := whole
		part.Tools, part.Part, part.Parts = c, int64(i+1), int64(len(chunks))
		if out[i], err = part.Marshal(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ParseTools reads a tools entry.
func ParseTools(e *Entry) (*ToolsEntry, error) {
	if e.Kind != KindTools {
		return nil, fmt.Errorf("entry is a %s entry, not tools", e.Kind)
	}
	rd := fieldReader{f: e.Fields}
	t := &ToolsEntry{Time: e.Time, Actor: e.Actor, Server: rd.str("server"), Part: rd.int("part"), Parts: rd.int("parts")}
	_, part := e.Fields["part"]
	if _, parts := e.Fields["parts"]; part || parts {
		if t.Part < 1 || t.Part > t.Parts {
			rd.fail("part", fmt.Sprintf("part %d of %d: not from 1 to parts", t.Part, t.Parts))
		}
	}
	list, ok := e.Fields["tools"].([]any)
	if !ok {
		rd.fail("tools", "not an array")
	}
	for _, x := range list {
		m, ok := x.(map[string]any)
		if !ok {
			rd.fail("tools", "an element is not an object")
			break
		}
		tr := fieldReader{f: m}
		t.Tools = append(t.Tools, ToolSum{Name: tr.str("name"), SHA256: tr.str("sha256")})
		if tr.err != nil {
			rd.fail("tools", tr.err.Error())
		}
	}
	if rd.err != nil {
		return nil, fmt.Errorf("tools entry: %w", rd.err)
	}
	return t, nil
}

// A ReadEntry is a resource.read or prompt.get entry: what the agent read
// through the proxy — a resource (URI) or a prompt (Prompt, with its
// redacted Args) — and the hash of the result as the server sent it.
type ReadEntry struct {
	Kind   string // KindResourceRead or KindPromptGet
	Time   time.Time
	Actor  string
	Auth   *Auth // how Actor was authenticated, if by an identity provider
	Server string
	URI    string        // resource.read
	Prompt string        // prompt.get
	Args   CanonicalJSON // prompt.get: the arguments, redacted
	// ArgsSHA256 (prompt.get) is the hex SHA-256 of Args when they were
	// too large for the entry and went to a blob, as a call's do (wire:
	// "args_sha256"); Args is then nil.
	ArgsSHA256 string
	// ResultSHA256, ResultBytes, ResultRaw and ResultRemarshalled say
	// what they say in a [CallResultEntry] (wire: "result_sha256",
	// "result_bytes", "result_canonical": false, "result_remarshalled":
	// true), so that a verifier holding the result knows which form of
	// it to hash.
	ResultSHA256       string
	ResultBytes        int64
	ResultRaw          bool
	ResultRemarshalled bool
	// A later leg of a read bridged for a client of an older revision
	// (MCP 2026-07-28's input_required rounds) names the entry of the leg
	// before it, whose result asked for the input this leg carries, and
	// the hash of that input (wire: "continues", "input_responses_sha256";
	// never the answers themselves). Zero and "" on a first leg.
	Continues            uint64
	InputResponsesSHA256 string
}

// Marshal returns the entry's bytes.
func (r *ReadEntry) Marshal() ([]byte, error) {
	f := map[string]any{"server": r.Server, "result_sha256": r.ResultSHA256, "result_bytes": r.ResultBytes}
	if r.ResultRaw {
		f["result_canonical"] = false
	}
	if r.ResultRemarshalled {
		f["result_remarshalled"] = true
	}
	if r.Continues != 0 {
		f["continues"] = r.Continues
	}
	if r.InputResponsesSHA256 != "" {
		f["input_responses_sha256"] = r.InputResponsesSHA256
	}
	switch r.Kind {
	case KindResourceRead:
		f["uri"] = r.URI
	case KindPromptGet:
		f["prompt"] = r.Prompt
		if r.Args != nil {
			f["args"] = r.Args
		}
		if r.ArgsSHA256 != "" {
			f["args_sha256"] = r.ArgsSHA256
		}
	default:
		return nil, fmt.Errorf("read entry: kind %q is neither %s nor %s", r.Kind, KindResourceRead, KindPromptGet)
	}
	return (&Entry{Kind: r.Kind, Time: r.Time, Actor: r.Actor, Auth: r.Auth, Fields: f}).Marshal()
}

// ParseRead reads a resource.read or prompt.get entry.
func ParseRead(e *Entry) (*ReadEntry, error) {
	if e.Kind != KindResourceRead && e.Kind != KindPromptGet {
		return nil, fmt.Errorf("entry is a %s entry, not %s or %s", e.Kind, KindResourceRead, KindPromptGet)
	}
	rd := fieldReader{f: e.Fields}
	r := &ReadEntry{Kind: e.Kind, Time: e.Time, Actor: e.Actor, Auth: e.Auth, Server: rd.str("server"), URI: rd.str("uri"), Prompt: rd.str("prompt"),
		ResultSHA256: rd.str("result_sha256"), ResultBytes: rd.int("result_bytes"),
		Continues: uint64(rd.int("continues")), InputResponsesSHA256: rd.str("input_responses_sha256"), ArgsSHA256: rd.str("args_sha256")}
	r.ResultRaw, r.ResultRemarshalled = rd.resultForm()
	if v, ok := e.Fields["args"]; ok {
		b, err := appendCanonical(nil, v, 1)
		if err != nil {
			rd.fail("args", err.Error())
		}
		r.Args = b
	}
	if rd.err != nil {
		return nil, fmt.Errorf("%s entry: %w", e.Kind, rd.err)
	}
	return r, nil
}
