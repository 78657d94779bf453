package main

// The sidecar's process log: one slog stream on stderr (stdout carries
// MCP in stdio mode), text or JSON, at the config's log_level. The go-sdk
// logs every session's life at INFO ("server connecting", "session
// initialized"), and warns of every notification a session missed
// ("calling notifications/tools/list_changed: ... stream not connected":
// a client need not keep a stream open for them, and each list change
// makes one such line per session); those lines go to DEBUG, tagged
// component=mcp-sdk, so that stderr holds what an operator acts on.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// LogConfig is how the sidecar logs (config log: section).
type LogConfig struct {
	// Level is debug, info (default), warn or error.
	Level string `yaml:"level"`
	// Format is text (default) or json.
	Format string `yaml:"format"`
}

// newLogger returns the sidecar's logger on w.
func newLogger(w io.Writer, c LogConfig) (*slog.Logger, error) {
	var lv slog.Level
	if c.Level != "" {
		if err := lv.UnmarshalText([]byte(c.Level)); err != nil {
			return nil, fmt.Errorf("config: log.level %q: want debug, info, warn or error", c.Level)
		}
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch c.Format {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("config: log.format %q: want text or json", c.Format)
}

// proxyLogger is the logger the proxy gets. The proxy hands it on to the
// go-sdk, whose lines do not start with "proxy: " as the proxy's own do.
func proxyLogger(l *slog.Logger) *slog.Logger {
	return slog.New(&sdkHandler{next: l.Handler()})
}

// sdkHandler demotes the go-sdk's INFO lines, and its warnings of a
// notification not delivered to a session, to DEBUG and tags them.
type sdkHandler struct {
	next slog.Handler
}

func isSDK(r slog.Record) bool { return !strings.HasPrefix(r.Message, "proxy: ") }

func (h *sdkHandler) Enabled(ctx context.Context, l slog.Level) bool {
	// Whether a record is the SDK's is known only in Handle; a record
	// enabled here may still be demoted and dropped there.
	return h.next.Enabled(ctx, l)
}

func (h *sdkHandler) Handle(ctx context.Context, r slog.Record) error {
	if isSDK(r) {
		if r.Level == slog.LevelInfo || r.Level == slog.LevelWarn && strings.HasPrefix(r.Message, "calling notifications/") {
			r.Level = slog.LevelDebug
		}
		if !h.next.Enabled(ctx, r.Level) {
			return nil
		}
		r = r.Clone()
		r.AddAttrs(slog.String("component", "mcp-sdk"))
	}
	return h.next.Handle(ctx, r)
}

func (h *sdkHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &sdkHandler{next: h.next.WithAttrs(as)}
}

func (h *sdkHandler) WithGroup(name string) slog.Handler {
	return &sdkHandler{next: h.next.WithGroup(name)}
}
