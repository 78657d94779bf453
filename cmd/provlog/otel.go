package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/provlog/provlog/cmd/internal/otlp"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/proxy"
)

// OTelConfig exports traces of the sidecar's tool calls over OTLP/HTTP
// (protobuf): a span per recorded MCP request (tools/call, the task
// tools, resources/read, prompts/get), named and attributed according to
// the OpenTelemetry MCP semantic conventions, carrying the entry's index
// and leaf hash (see proxy/trace.go), and a span per request to the log
// API (traceLogAPI). Without otel: in the config no exporter is made and
// no spans are made.
//
// The standard OTEL_BSP_* variables tune the batching; the exporter's
// OTEL_EXPORTER_OTLP_* variables (headers, timeout, compression,
// certificates; see cmd/internal/otlp's ApplyEnv) apply where this block
// says nothing. The exporter (cmd/internal/otlp) retries a throttled or
// unavailable receiver as the SDK's OTLP/HTTP exporter does.
type OTelConfig struct {
	// Endpoint is the OTLP/HTTP receiver: its base URL
	// (http://collector:4318, spans go to /v1/traces) or the full URL of
	// its traces path. Required.
	Endpoint string `yaml:"endpoint"`
	// Headers go with every export (an API key, say); they are never
	// logged.
	Headers map[string]string `yaml:"headers"`
	// ServiceName is the service.name of the spans (default "provlog").
	ServiceName string `yaml:"service_name"`
}

// tracesURL is c's endpoint as the URL spans are posted to.
func (c *OTelConfig) tracesURL() (string, error) {
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("config: otel: endpoint %q must be an http:// or https:// URL of an OTLP/HTTP receiver (such as http://localhost:4318)", log.RedactURL(c.Endpoint))
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// check reports what is wrong with an otel: block.
func (c *OTelConfig) check() error {
	if c == nil {
		return nil
	}
	if strings.TrimSpace(c.Endpoint) == "" {
		return errors.New("config: otel: endpoint is required (the OTLP/HTTP receiver, such as http://localhost:4318); remove otel: to export no traces")
	}
	if err := log.CheckHeaders(c.Headers); err != nil {
		return fmt.Errorf("config: otel: headers: %w", err)
	}
	_, err := c.tracesURL()
	return err
}

// startTracing returns the tracer the proxy makes its spans with and a
// function that flushes and stops the exporter; (nil, nil) without otel:.
// The spans' resource names the log (provlog.log.origin), so that a
// trace's index and leaf hash say which log to ask for the entry.
func startTracing(ctx context.Context, c *OTelConfig, origin string, logger *slog.Logger) (trace.Tracer, func(), error) {
	if c == nil {
		return nil, func() {}, nil
	}
	endpoint, err := c.tracesURL()
	if err != nil {
		return nil, nil, err
	}
	oc := otlp.Config{URL: endpoint, Headers: c.Headers, UserAgent: "provlog/" + version}
	if err := oc.ApplyEnv(os.Getenv, os.ReadFile); err != nil {
		return nil, nil, fmt.Errorf("config: otel: %w", err)
	}
	exp, err := otlp.New(oc)
	if err != nil {
		return nil, nil, fmt.Errorf("starting the OTLP exporter: %w", err)
	}
	name := c.ServiceName
	if name == "" {
		name = "provlog"
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", name),
		attribute.String("service.version", version),
		attribute.String("provlog.log.origin", origin),
	)
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	shown := log.RedactURL(endpoint)
	// A failed export goes to the sidecar's log, which quotes it, not to
	// OTel's default handler, which prints the receiver's answer as it
	// came onto stderr, where its newlines make lines of their own.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("exporting traces failed", "endpoint", shown, "error", err)
	}))
	logger.Info("exporting traces over OTLP/HTTP", "endpoint", shown)
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			logger.Warn("flushing traces at shutdown", "endpoint", shown, "error", err)
		}
	}
	return tp.Tracer("github.com/provlog/provlog/proxy"), stop, nil
}

// traceLogAPI makes a SERVER span of each request to the log API (h
// serves the paths under /log/), after the OpenTelemetry HTTP server
// conventions: named "{method} {http.route}", continuing a W3C
// traceparent header, with http.request.method, http.route, url.path,
// http.response.status_code and, for a 5xx, error.type. A read of one
// entry names it (provlog.log.index). Without a tracer h is returned as
// it is.
func traceLogAPI(tracer trace.Tracer, h http.Handler) http.Handler {
	if tracer == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route, index := logRoute(r.URL.Path)
		ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, r.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("http.route", route),
			attribute.String("url.path", proxy.SpanText(r.URL.Path)),
		))
		defer span.End()
		if index != "" {
			if n, err := strconv.ParseInt(index, 10, 64); err == nil {
				span.SetAttributes(attribute.Int64("provlog.log.index", n))
			}
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", sw.status))
		if sw.status >= 500 {
			span.SetAttributes(attribute.String("error.type", strconv.Itoa(sw.status)))
			span.SetStatus(codes.Error, "")
		}
	})
}

// logRoute is the route of a log API path (few values, for span names)
// and, for an entry's path, the entry's index.
func logRoute(path string) (route, index string) {
	rest, _ := strings.CutPrefix(path, "/log/")
	switch {
	case rest == "checkpoint", rest == "proof/inclusion", rest == "proof/consistency", rest == "anchors", rest == "purge":
		return path, ""
	case strings.HasPrefix(rest, "entry/"):
		return "/log/entry/{index}", strings.TrimPrefix(rest, "entry/")
	case strings.HasPrefix(rest, "tile/entries/"):
		return "/log/tile/entries/{index}", ""
	case strings.HasPrefix(rest, "tile/"):
		return "/log/tile/{level}/{index}", ""
	case strings.HasPrefix(rest, "anchors/"):
		return "/log/anchors/{name}", ""
	case strings.HasPrefix(rest, "task/"):
		return "/log/task/{id}", ""
	}
	return "/log/", ""
}

// statusWriter notes the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
