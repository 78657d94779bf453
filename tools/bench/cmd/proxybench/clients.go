package main

// MCP clients: over streamable HTTP with a bearer token, or a command
// over stdio.

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearer adds the provlog bearer token to every request. The direct
// sessions use it too (the everything-server ignores it), so both paths
// run the same client code.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (t *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.base.RoundTrip(r)
}

// clientTransport is shared by every HTTP session of the run: the default
// transport, with enough idle connections per host for -clients sessions
// (http.DefaultTransport keeps 2, which would make most of the 32
// sessions' calls open a new TCP connection).
var clientTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 1024
	return t
}()

// target is one session and the tool name to call on it.
type target struct {
	cs          *mcp.ClientSession
	tool        string
	args        map[string]any
	wantReceipt bool
}

func connectHTTP(ctx context.Context, endpoint, token, protocol string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "proxybench", Version: "1"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: &http.Client{Transport: &bearer{token, clientTransport}},
		MaxRetries: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
}

func connectCommand(ctx context.Context, cmd *exec.Cmd, protocol string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "proxybench", Version: "1"}, nil)
	return c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
}

// call makes one tools/call and checks its result.
func (t target) call(ctx context.Context) error {
	res, err := t.cs.CallTool(ctx, &mcp.CallToolParams{Name: t.tool, Arguments: t.args})
	if err != nil {
		return fmt.Errorf("%s: %w", t.tool, err)
	}
	if res.IsError {
		return fmt.Errorf("%s: tool error: %s", t.tool, text(res))
	}
	if t.wantReceipt {
		if r, _ := res.Meta[receiptKey].(string); r == "" {
			return fmt.Errorf("%s: result has no receipt in _meta[%q]", t.tool, receiptKey)
		}
	}
	return nil
}

func text(res *mcp.CallToolResult) string {
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String()
}

// checkTool fails unless the session lists the tool.
func checkTool(ctx context.Context, cs *mcp.ClientSession, name string) error {
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("listing tools: %w", err)
		}
		if tool.Name == name {
			return nil
		}
	}
	return fmt.Errorf("the server lists no tool %q", name)
}
