package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/proxy/source"
)

// Bounds on what a call entry copies from untrusted peers.
const (
	maxErrorText  = 4 << 10
	maxClientText = 256
)

// A call is one tools/call on its way through the proxy: what its two
// entries say (log.Call, log.CallResult).
type call struct {
	server, tool string
	toolSum      string // the tool definition's hash, if known
	actor        string
	start        time.Time
	args         log.CanonicalJSON // redacted
	sent         string            // with redaction: the hash of the tool and arguments as sent (sentSum)
	secrets      *callSecrets      // redacted values (all legs'), scrubbed from error texts
	client       *mcp.Implementation
	protocol     string
	index        uint64 // the call entry's, once written
	entry        []byte // the call entry, once written
	continues    uint64 // the call.result whose input_required this leg answers (0: none)
	inputSum     string // the hash of the inputResponses it carries, if any
	resultIndex  uint64 // the call.result entry's, once written
	newSession   bool   // it went to a 2026-07-28 session

	duration    time.Duration
	result      json.RawMessage // the downstream result as received, if any
	resultCanon []byte          // its canonical form, if the reader made it already
	front       frontPrep       // how result becomes what the client gets (frontPrepare)
	isError     bool
	errText     string
	errCode     int64
	retain      bool
	remarshal   bool   // result is the SDK's re-encoding, not the wire bytes
	dataRelease string // the server's data release (its source's), if known

	expected pending // the log was told this call's result is coming
}

// announce tells the log that c's result entry is on its way, if the log
// can use that. The caller must defer c.withdraw(), so that an
// announcement is never left open (a panic, a path that does not record).
func (p *Proxy) announce(c *call) {
	if e, ok := p.opts.Log.(expecter); ok {
		c.expected = e.Expect()
	}
}

func (c *call) withdraw() {
	if c.expected != nil {
		c.expected.Cancel()
	}
}

// sessionID is ss's id, "" for none.
func sessionID(ss *mcp.ServerSession) string {
	if ss == nil {
		return ""
	}
	return ss.ID()
}

// dataRelease resolves server d's data release for a call that returned
// result. It never fails the call: no source, an error or a timeout
// gives "" (the resolver logs why). Answers are cached per the source's
// TTL, so most calls cost a map lookup.
func (p *Proxy) dataRelease(ctx context.Context, d *downstream, result json.RawMessage) string {
	if d.cfg.Source == nil {
		return ""
	}
	r, ok := p.sources.Load(d)
	if !ok {
		nr, err := source.New(*d.cfg.Source, nil, p.logger.With("server", d.cfg.ID))
		if err != nil {
			p.logger.Warn("proxy: bad source config; no releases recorded", "server", d.cfg.ID, "error", err)
			return ""
		}
		r, _ = p.sources.LoadOrStore(d, nr)
	}
	return r.(*source.Resolver).Resolve(context.WithoutCancel(ctx), result)
}

func (p *Proxy) actor(ctx context.Context, req *mcp.CallToolRequest) (string, error) {
	if p.opts.Actor != nil {
		a, err := p.opts.Actor(ctx, req)
		if err == nil && a == "" {
			err = errors.New("no actor for this request")
		}
		return a, err
	}
	if req.Extra != nil && req.Extra.TokenInfo != nil && req.Extra.TokenInfo.UserID != "" {
		return req.Extra.TokenInfo.UserID, nil
	}
	return "", errors.New("no actor: the request carries no bearer token")
}

// forwardMeta copies the upstream request's _meta for the downstream
// request, without the progress token (replaced), the per-request protocol
// fields of 2026-07-28 (the downstream session has its own) and provlog's
// own keys.
func forwardMeta(m mcp.Meta) mcp.Meta {
	out := mcp.Meta{}
	for k, v := range m {
		if k == "progressToken" || strings.HasPrefix(k, "io.modelcontextprotocol/") || strings.HasPrefix(k, "dev.provlog/") {
			continue
		}
		out[k] = v
	}
	return out
}

// normalizeToken turns a JSON number token back into an integer where it
// is one, so the client gets back the token it sent.
func normalizeToken(t any) any {
	if f, ok := t.(float64); ok && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	return t
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// errLocal is a call failure of the proxy's own telling (the server is
// down, crashed, timed out), as opposed to a JSON-RPC error the server
// sent.
type errLocal struct{ text string }

func (e errLocal) Error() string { return e.text }
