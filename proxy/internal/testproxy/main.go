// Command testproxy runs the proxy over stdio with an in-memory log, for
// tests that drive it from another process (the TypeScript SDK client).
// It writes the log's verifier key to -vkey, and appends every entry it
// records, one line each ("<index> <entry>"), to -entries, so the test can verify the
// receipts its client got.
//
//	testproxy -servers '[{"id":"ev","command":["node","…/index.js","stdio"]}]' -vkey F -entries F
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/log/server"
	"github.com/provlog/provlog/proxy"
)

func main() {
	proxy.ReaperMain()
	servers := flag.String("servers", "[]", "downstream servers, as a JSON list of proxy.ServerConfig")
	vkeyFile := flag.String("vkey", "", "write the log's verifier key here")
	entriesFile := flag.String("entries", "", "append every recorded entry here, one per line")
	actor := flag.String("actor", "stdio-actor", "the actor of every call")
	flag.Parse()
	if err := run(*servers, *vkeyFile, *entriesFile, *actor); err != nil {
		fmt.Fprintln(os.Stderr, "testproxy:", err)
		os.Exit(1)
	}
}

func run(servers, vkeyFile, entriesFile, actor string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var cfgs []proxy.ServerConfig
	if err := json.Unmarshal([]byte(servers), &cfgs); err != nil {
		return fmt.Errorf("-servers: %w", err)
	}
	skey, vkey, err := note.GenerateKey(rand.Reader, "provlog.test/testproxy")
	if err != nil {
		return err
	}
	signer, _ := note.NewSigner(skey)
	verifier, _ := note.NewVerifier(vkey)
	if vkeyFile != "" {
		if err := os.WriteFile(vkeyFile, []byte(vkey+"\n"), 0o600); err != nil {
			return err
		}
	}
	seq, err := server.OpenSequencer(ctx, logtest.NewMemory(), signer, verifier, nil)
	if err != nil {
		return err
	}
	defer seq.Close()
	rec := proxy.Recorder(seq)
	if entriesFile != "" {
		f, err := os.OpenFile(entriesFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		rec = &teeRecorder{Recorder: seq, f: f}
	}
	p, err := proxy.New(ctx, proxy.Options{
		Servers:  cfgs,
		Log:      rec,
		Verifier: verifier,
		Actor:    func(context.Context, *mcp.CallToolRequest) (string, error) { return actor, nil },
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	defer p.Close()
	return p.ServeStdio(ctx)
}

// teeRecorder writes each appended entry to a file once it is in the log.
type teeRecorder struct {
	proxy.Recorder
	mu sync.Mutex
	f  *os.File
}

func (t *teeRecorder) Append(ctx context.Context, entry []byte) (*log.Receipt, error) {
	r, err := t.Recorder.Append(ctx, entry)
	if err == nil {
		t.mu.Lock()
		fmt.Fprintf(t.f, "%d %s\n", r.Index, entry)
		t.mu.Unlock()
	}
	return r, err
}
