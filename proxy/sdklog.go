package proxy

import (
	"context"
	"log/slog"
)

// sdkLogHandler is the handler of the logger go-sdk's front server is
// given: the proxy's, with the resource URIs go-sdk logs (at each
// subscription, unsubscription and update sent) shown as the proxy's own
// lines show them (loggedURI). A front URI's query may hold a value its
// server's redact list names, and go-sdk logs it as the client wrote it.
type sdkLogHandler struct {
	slog.Handler
	p *Proxy
}

func (h sdkLogHandler) Handle(ctx context.Context, r slog.Record) error {
	hasURI := false
	r.Attrs(func(a slog.Attr) bool {
		hasURI = a.Key == "uri"
		return !hasURI
	})
	if !hasURI {
		return h.Handler.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "uri" {
			a.Value = slog.StringValue(h.p.shownFrontURI(a.Value.String()))
		}
		out.AddAttrs(a)
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h sdkLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return sdkLogHandler{h.Handler.WithAttrs(as), h.p}
}

func (h sdkLogHandler) WithGroup(name string) slog.Handler {
	return sdkLogHandler{h.Handler.WithGroup(name), h.p}
}

// shownFrontURI is a front resource URI as a log line may show it: with
// the values of the query parameters its server redacts replaced, or,
// for a URI no server owns, those every server redacts.
func (p *Proxy) shownFrontURI(uri string) string {
	if d, _, ok := p.router.resource(uri); ok {
		shown, _ := redactURI(uri, d.cfg.Redact, d.cfg.RedactIgnoreCase)
		return d.secrets.scrub(shown)
	}
	var fields []string
	fold := false
	for _, c := range p.ServerConfigs() {
		fields = append(fields, c.Redact...)
		fold = fold || c.RedactIgnoreCase
	}
	shown, _ := redactURI(uri, fields, fold)
	return shown
}
