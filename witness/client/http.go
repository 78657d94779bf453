package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/witness"
)

// maxResponseSize bounds a witness's answer: cosignature lines, or a size,
// or an error message.
const maxResponseSize = 64 << 10

// HTTP calls a witness's add-checkpoint over HTTP, according to
// c2sp.org/tlog-witness@v1.0.0. It is a [witness.AddCheckpointer].
type HTTP struct {
	url   string
	hc    *http.Client
	creds []string // the credentials the URL gives a request, cut out of a refusal's text quoted in an error
}

var _ witness.AddCheckpointer = (*HTTP)(nil)

// NewHTTP returns a client for the witness whose submission prefix is
// prefix (it posts to the prefix's add-checkpoint, after its path and
// before its query). hc nil means
// http.DefaultClient; callers should bound each call with a context
// deadline.
func NewHTTP(prefix string, hc *http.Client) (*HTTP, error) {
	if !strings.HasPrefix(prefix, "http://") && !strings.HasPrefix(prefix, "https://") {
		return nil, fmt.Errorf("witness URL %q is not http:// or https://", log.RedactURL(prefix))
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	u, err := log.JoinURL(prefix, "add-checkpoint")
	if err != nil {
		return nil, fmt.Errorf("witness URL: %w", err)
	}
	return &HTTP{url: u, hc: hc, creds: append(log.URLCredentials(prefix), log.URLCredentials(u)...)}, nil
}

// AddCheckpoint posts req and returns the witness's signature lines. A
// refusal is a [*witness.Error] with the HTTP status, and for 409 the
// witness's size from the text/x.tlog.size body.
func (h *HTTP) AddCheckpoint(ctx context.Context, req *witness.AddCheckpointRequest) ([]byte, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, strings.NewReader(req.String()))
	if err != nil {
		return nil, err
	}
	r.Header.Set("Content-Type", "text/plain; charset=utf-8")
	resp, err := h.hc.Do(r)
	if err != nil {
		// The error repeats the URL, which reaches the status, health
		// and the log: redacted, as every URL that leaves the process is.
		return nil, fmt.Errorf("add-checkpoint: %w", log.RedactURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseSize+1))
	if err != nil {
		return nil, fmt.Errorf("add-checkpoint: reading the response: %w", err)
	}
	if len(body) > maxResponseSize {
		return nil, fmt.Errorf("add-checkpoint: response is over %d bytes", maxResponseSize)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return body, nil
	case http.StatusConflict:
		s, ok := strings.CutSuffix(string(body), "\n")
		size, err := strconv.ParseUint(s, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("add-checkpoint: 409 response body %q is not a size (content type %q)", log.CutCredentials(string(body), h.creds), resp.Header.Get("Content-Type"))
		}
		return nil, &witness.Error{Status: resp.StatusCode, Size: size}
	}
	msg, _, _ := bytes.Cut(bytes.TrimSpace([]byte(log.CutCredentials(string(body), h.creds))), []byte("\n"))
	if len(msg) > 200 {
		msg = msg[:200]
	}
	if resp.StatusCode < 400 {
		return nil, errors.New("add-checkpoint: unexpected response " + resp.Status)
	}
	return nil, &witness.Error{Status: resp.StatusCode, Msg: strings.ToValidUTF8(string(msg), "?")}
}
