package proxy

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServerRequestsBounded: of a stdio server's requests of the client
// (sampling, elicitation, ping), at most maxServerRequests await their
// answers; one beyond them is answered at once with an error, and never
// reaches the client. go-sdk took every one, each held in its queue or
// waiting for the client: a server's 400,000 sampling requests during one
// call grew the sidecar's heap to 430 MB, 1 KB and more a request. The
// raw server's flood tool sends rawFloodAsks sampling requests and a
// ping, and says how many were refused once the ping is answered; the
// client answers none of them before the call ends.
func TestServerRequestsBounded(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{rawServerConfig(t, "raw")}, nil)
	cl := newClientLog()
	var asked atomic.Int64
	cl.sample = func(ctx context.Context, _ *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		asked.Add(1)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	cs := connectMemory(t, p, cl)
	waitRouted(t, p, "raw__flood")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "raw__flood"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := textOf(res), fmt.Sprintf("refused %d", rawFloodAsks-maxServerRequests); got != want {
		t.Errorf("the server was told %q of its %d sampling requests, want %q", got, rawFloodAsks, want)
	}
	if n := asked.Load(); n > maxServerRequests {
		t.Errorf("the client was asked %d times, want at most %d", n, maxServerRequests)
	}
}
