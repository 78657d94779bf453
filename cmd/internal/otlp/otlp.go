// Package otlp exports OpenTelemetry spans over OTLP/HTTP in protobuf: an
// [sdktrace.SpanExporter] that POSTs each batch to a receiver's traces
// path, as the SDK's otlptracehttp exporter (v1.47.0) does — the same
// encoding, headers, per-request timeout, compression and retries of
// throttled or unavailable receivers — without the gRPC code that
// exporter's configuration links in.
//
// A batch is sent as an OTLP TracesData message, which on the wire is an
// ExportTraceServiceRequest (field 1: the repeated ResourceSpans).
package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/provlog/provlog/log"
)

// Defaults, those of the SDK's OTLP/HTTP exporter.
const (
	DefaultTimeout = 10 * time.Second
	// MaxResponse bounds what is read of a receiver's answer.
	MaxResponse = 4 << 20
	// MaxRequest bounds an export request before compression.
	MaxRequest = 64 << 20
)

// DefaultRetry is the SDK exporter's retry policy: exponential backoff
// from 5 s, by 1.5 up to 30 s, each wait randomized by ±50%, for at most a
// minute.
var DefaultRetry = Retry{Initial: 5 * time.Second, Max: 30 * time.Second, MaxElapsed: time.Minute}

// Retry is how a batch is retried when the receiver throttles (429) or is
// unavailable (502, 503, 504, or a temporary network error). A
// Retry-After header lengthens the wait.
type Retry struct {
	Disabled                 bool
	Initial, Max, MaxElapsed time.Duration
}

// Config says where and how spans are exported.
type Config struct {
	// URL is the receiver's traces URL (http://collector:4318/v1/traces).
	URL string
	// Headers go with every request (an API key, say). They are sent and
	// never put in an error.
	Headers map[string]string
	// Gzip compresses the requests.
	Gzip bool
	// Timeout bounds each request; 0 means [DefaultTimeout].
	Timeout time.Duration
	// TLS, if not nil, is the client's TLS configuration for https.
	TLS *tls.Config
	// UserAgent is sent as User-Agent.
	UserAgent string
	// Retry is the retry policy; the zero value means [DefaultRetry].
	Retry Retry
}

// An Exporter sends spans to one OTLP/HTTP receiver.
type Exporter struct {
	cfg      Config
	creds    []string // the credentials cfg sends, cut out of a receiver's answer
	client   *http.Client
	stop     chan struct{}
	stopOnce sync.Once
}

var _ sdktrace.SpanExporter = (*Exporter)(nil)

// New returns an exporter for cfg.
func New(cfg Config) (*Exporter, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("otlp: %q is not an http:// or https:// URL", log.RedactURL(cfg.URL))
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Retry == (Retry{}) {
		cfg.Retry = DefaultRetry
	}
	// net/http's DefaultTransport, as the SDK exporter copies it.
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       cfg.TLS,
	}
	return &Exporter{cfg: cfg, creds: credentials(cfg), client: &http.Client{Transport: tr, Timeout: cfg.Timeout}, stop: make(chan struct{})}, nil
}

// ExportSpans sends spans as one request, retrying as [Config.Retry]
// says within ctx.
func (e *Exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	rs := resourceSpans(spans)
	if len(rs) == 0 {
		return nil
	}
	select {
	case <-e.stop:
		return errors.New("traces export: the exporter is shut down")
	default:
	}
	body, err := proto.Marshal(&tracepb.TracesData{ResourceSpans: rs})
	if err != nil {
		return fmt.Errorf("traces export: encoding: %w", err)
	}
	if len(body) > MaxRequest {
		return fmt.Errorf("traces export: request body too large: exceeded %d bytes", MaxRequest)
	}
	if e.cfg.Gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(body)
		if err := zw.Close(); err != nil {
			return fmt.Errorf("traces export: compressing: %w", err)
		}
		body = b.Bytes()
	}
	if err := e.upload(ctx, body); err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	return nil
}

// Shutdown stops the requests in flight; spans exported after it are
// refused.
func (e *Exporter) Shutdown(ctx context.Context) error {
	e.stopOnce.Do(func() { close(e.stop) })
	e.client.CloseIdleConnections()
	return ctx.Err()
}

// upload sends body until it is accepted, a failure is not worth
// retrying, ctx ends, the exporter is shut down or the retries' time is
// up.
func (e *Exporter) upload(ctx context.Context, body []byte) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
		case <-e.stop:
			cancel()
		}
	}()
	r := e.cfg.Retry
	interval, start := r.Initial, time.Now()
	for {
		err := e.send(ctx, body)
		if err == nil {
			return nil
		}
		re, ok := err.(*retryable)
		if !ok || r.Disabled {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", context.Cause(ctx), err)
		}
		if time.Since(start) > r.MaxElapsed {
			return fmt.Errorf("max retry time elapsed: %w", err)
		}
		delay := max(re.throttle, jitter(interval))
		interval = min(time.Duration(float64(interval)*1.5), r.Max)
		if time.Since(start)+re.throttle > r.MaxElapsed {
			return fmt.Errorf("max retry time would elapse: %w", err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %w", context.Cause(ctx), err)
		case <-t.C:
		}
	}
}

// jitter is d randomized by ±50%.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.5 + rand.Float64()))
}

// A retryable error is a failure worth retrying, after throttle at least.
type retryable struct {
	throttle time.Duration
	err      error
}

func (e *retryable) Error() string { return "retry-able request failure: " + e.err.Error() }
func (e *retryable) Unwrap() error { return e.err }

// send makes one request.
func (e *Exporter) send(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if e.cfg.UserAgent != "" {
		req.Header.Set("User-Agent", e.cfg.UserAgent)
	}
	for k, v := range e.cfg.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if e.cfg.Gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	// The error repeats the URL, which reaches the log: redacted, as
	// every URL that leaves the process is.
	err = log.RedactURLError(err)
	if ue := (*url.Error)(nil); errors.As(err, &ue) && ue.Temporary() {
		return &retryable{err: err}
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse+1))
	if err != nil {
		return err
	}
	if len(b) > MaxResponse {
		return fmt.Errorf("response body too large: exceeded %d bytes", MaxResponse)
	}
	switch code := resp.StatusCode; {
	case code >= 200 && code <= 299:
		if len(b) == 0 || resp.Header.Get("Content-Type") != "application/x-protobuf" {
			return nil
		}
		return partialSuccess(b)
	case code == http.StatusTooManyRequests, code == http.StatusBadGateway, code == http.StatusServiceUnavailable, code == http.StatusGatewayTimeout:
		return &retryable{throttle: retryAfter(resp.Header.Get("Retry-After")), err: fmt.Errorf("%s: body: %s", resp.Status, e.bodyText(b))}
	default:
		return fmt.Errorf("failed to send to %s: %s (body: %s)", log.RedactURL(e.cfg.URL), resp.Status, e.bodyText(b))
	}
}

// credentials returns the credentials cfg sends: every header's value
// (log.HeaderCredentials) and the URL's (log.URLCredentials).
func credentials(cfg Config) []string {
	var creds []string
	for _, v := range cfg.Headers {
		creds = append(creds, log.HeaderCredentials(v)...)
	}
	return append(creds, log.URLCredentials(cfg.URL)...)
}

// bodyText is the start of an error answer, for a message, without the
// credentials the request sent: a receiver may quote them ("no tenant
// for Bearer ...").
func (e *Exporter) bodyText(b []byte) string {
	s := strings.TrimSpace(log.CutCredentials(string(b), e.creds))
	if s == "" {
		return "(empty)"
	}
	if len(s) > 512 {
		s = s[:512] + "…"
	}
	return s
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		if n > int64(1<<63-1)/int64(time.Second) {
			return 1<<63 - 1
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
