package replay

import (
	"context"
	"strings"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/proxy"
)

// Tool definitions.
//
// A call entry names the definition of the tool it was made against
// (tool_sha256: the SHA-256 of the JCS form of the tool's item in the
// server's tools/list, exactly as the server listed it; DESIGN §2).
// Replay lists the server's tools as the proxy lists them and hashes them
// with the proxy's own function ([proxy.Conn.Tools]), so that the two
// hashes are equal exactly when the server describes the tool as it did.
//
// A changed definition is reported beside the result's class: the class
// says whether the same call gives the same answer today; the definition
// says whether the server still offers the tool the agent chose to call.
// A description or schema that changed under the same name can make an
// agent act otherwise (a rug pull), so a changed definition is an
// auditor's finding even where the result is unchanged. It is compared
// before the call is re-run, and changes the class in one case: a tool
// whose readOnlyHint alone makes it safe to re-run (no replay: true) is
// not re-run under a changed definition, since that hint is the new
// definition's word, not the one's the call was made against (a tool that
// wrote may now call itself read-only). Such a call is not replayable.

// What a call's tool definition compares as.
const (
	// DefinitionSame: the server lists the tool with the definition the
	// call was made against.
	DefinitionSame = "same"
	// DefinitionChanged: the server lists the tool with another
	// definition than the one the call was made against.
	DefinitionChanged = "changed"
	// DefinitionGone: the server no longer lists the tool at all: the
	// definition the call was made against is no longer offered, as with
	// a changed one.
	DefinitionGone = "gone"
	// DefinitionUnknown: the call entry names no definition (it was
	// recorded before provlog named them), so there is nothing to compare;
	// or it names its tool with a redacted value cut out of the name (the
	// server named the tool after one), so the tool cannot be looked up.
	DefinitionUnknown = "unknown"
)

// Definitions lists what a definition compares as, in report order.
var Definitions = []string{DefinitionSame, DefinitionChanged, DefinitionGone, DefinitionUnknown}

// compareDefinition compares the definition call was made against with
// the one its server lists now, when the server is in the config and can
// be reached (for a call that is not replayable too: listing runs
// nothing), and notes it in o. It returns the error connecting, when
// that is why the definition was not compared.
func (r *runner) compareDefinition(ctx context.Context, o *Outcome, call *log.CallEntry) error {
	o.ToolThen = call.ToolSHA256
	cfg := r.server(call.Server)
	if cfg == nil {
		return nil
	}
	c := r.connect(ctx, cfg, call.ProtocolVersion)
	if c.err != nil {
		return c.err
	}
	tool, ok := c.tools[call.Tool]
	switch {
	case !ok && strings.Contains(call.Tool, proxy.Redacted):
		// Recorded with a redacted value cut out of its name (the
		// server named the tool after one): the name the server lists
		// is not in the log, so the definition cannot be looked up.
		o.Definition = DefinitionUnknown
		return nil
	case !ok:
		o.Definition = DefinitionGone
		return nil
	}
	o.ToolNow = tool.SHA256
	switch {
	case call.ToolSHA256 == "":
		o.Definition = DefinitionUnknown
	case call.ToolSHA256 == tool.SHA256:
		o.Definition = DefinitionSame
	default:
		o.Definition = DefinitionChanged
	}
	return nil
}

// DefinitionChanged reports whether the tool o called is no longer
// offered as it was: changed, or gone.
func (o *Outcome) DefinitionChanged() bool {
	return o.Definition == DefinitionChanged || o.Definition == DefinitionGone
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// A DefinitionChange is a tool whose definition changed since calls were
// made against it, or that is no longer listed (Now empty): the replay
// entry's definition_changes.
type DefinitionChange struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// Calls are the indices of the calls made against Then, as compact
	// ranges ([Ranges]).
	Calls string `json:"calls"`
	Then  string `json:"tool_sha256_then"`
	Now   string `json:"tool_sha256_now"` // "" if the tool is gone
}

// DefinitionChanges returns the changed definitions among the outcomes,
// one per server, tool and pair of definitions, in the order of their
// first call.
func (rep *Report) DefinitionChanges() []DefinitionChange {
	type key struct{ server, tool, then, now string }
	var order []key
	calls := map[key][]uint64{}
	for _, o := range rep.Outcomes {
		if !o.DefinitionChanged() {
			continue
		}
		k := key{o.Server, o.Tool, o.ToolThen, o.ToolNow}
		if _, ok := calls[k]; !ok {
			order = append(order, k)
		}
		calls[k] = append(calls[k], o.Index)
	}
	out := make([]DefinitionChange, 0, len(order))
	for _, k := range order {
		out = append(out, DefinitionChange{Server: k.server, Tool: k.tool, Calls: Ranges(calls[k]), Then: k.then, Now: k.now})
	}
	return out
}
