package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// OTelConfig exports traces of the sidecar's tool calls over OTLP/HTTP
// (protobuf): a span per proxied tools/call, named and attributed
// according to the OpenTelemetry MCP semantic conventions, carrying the
// call entry's index and leaf hash (see proxy/trace.go). Without otel: in
// the config no exporter is made and the proxy makes no spans.
//
// The standard OTEL_BSP_* variables tune the batching; the exporter's
// OTEL_EXPORTER_OTLP_* variables apply where this block says nothing.
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
		return "", fmt.Errorf("config: otel: endpoint %q must be an http:// or https:// URL of an OTLP/HTTP receiver (such as http://localhost:4318)", c.Endpoint)
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
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(endpoint)}
	if len(c.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(c.Headers))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
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
	logger.Info("exporting traces over OTLP/HTTP", "endpoint", endpoint)
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			logger.Warn("flushing traces at shutdown", "endpoint", endpoint, "error", err)
		}
	}
	return tp.Tracer("github.com/provlog/provlog/proxy"), stop, nil
}
