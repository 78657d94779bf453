package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs the scripts in testdata/script against the provlog
// binary (this test binary, run as provlog by testscript.Main in
// TestMain): a newcomer's first hour, end to end, as readable scripts.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			env.Setenv("ADDR", ln.Addr().String())
			return ln.Close()
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfor": cmdWaitFor,
			"mcpcall": cmdMCPCall,
			"envfile": cmdEnvFile,
			"replace": cmdReplace,
		},
	})
}

// waitfor URL: wait until GET URL answers (the sidecar is up).
func cmdWaitFor(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitfor URL")
	}
	for range 400 {
		resp, err := http.Get(args[0])
		if err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	ts.Fatalf("%s did not answer", args[0])
}

// mcpcall [-receipt FILE] [-set VAR=field] URL TOKENFILE TOOL ARGS: call
// an MCP tool over streamable HTTP with the bearer token in TOKENFILE;
// print the structured result, write the result's receipt to FILE, set
// VAR to a field of the result. ARGS is JSON, usually single-quoted for
// its spaces; mcpcall itself expands $VAR in it. With !, the call must be
// a tool error.
func cmdMCPCall(ts *testscript.TestScript, neg bool, args []string) {
	fs := flag.NewFlagSet("mcpcall", flag.ContinueOnError)
	receipt := fs.String("receipt", "", "")
	set := fs.String("set", "", "")
	if err := fs.Parse(args); err != nil || fs.NArg() != 4 {
		ts.Fatalf("usage: mcpcall [-receipt FILE] [-set VAR=field] URL TOKENFILE TOOL ARGS")
	}
	url, tokenFile, tool, rawArgs := fs.Arg(0), fs.Arg(1), fs.Arg(2), fs.Arg(3)
	var callArgs map[string]any
	ts.Check(json.Unmarshal([]byte(os.Expand(rawArgs, ts.Getenv)), &callArgs))
	token := strings.TrimSpace(ts.ReadFile(tokenFile))
	c := mcp.NewClient(&mcp.Implementation{Name: "testscript", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}},
	}, nil)
	ts.Check(err)
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: callArgs})
	ts.Check(err)
	if res.IsError != neg {
		ts.Fatalf("%s: IsError %v: %s", tool, res.IsError, contentText(res))
	}
	if neg {
		ts.Stdout().Write([]byte(contentText(res) + "\n"))
		return
	}
	out, _ := json.Marshal(res.StructuredContent)
	ts.Stdout().Write(append(out, '\n'))
	if *receipt != "" {
		rc, _ := res.Meta["dev.provlog/receipt"].(string)
		if rc == "" {
			ts.Fatalf("%s: the result carries no receipt", tool)
		}
		ts.Check(os.WriteFile(ts.MkAbs(*receipt), []byte(rc), 0o600))
	}
	if *set != "" {
		name, field, ok := strings.Cut(*set, "=")
		var m map[string]any
		json.Unmarshal(out, &m)
		v, isStr := m[field].(string)
		if !ok || !isStr {
			ts.Fatalf("%s: no string field %q in %s", tool, field, out)
		}
		ts.Setenv(name, v)
	}
}

// envfile VAR FILE: set VAR to FILE's contents, trimmed.
func cmdEnvFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: envfile VAR FILE")
	}
	ts.Setenv(args[0], strings.TrimSpace(ts.ReadFile(args[1])))
}

// replace FILE OLD NEW: replace the first OLD in FILE with NEW (to tamper
// with a receipt or a bundle); OLD must be there.
func cmdReplace(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: replace FILE OLD NEW")
	}
	p := ts.MkAbs(args[0])
	b, err := os.ReadFile(p)
	ts.Check(err)
	if !bytes.Contains(b, []byte(args[1])) {
		ts.Fatalf("%s does not contain %q", args[0], args[1])
	}
	ts.Check(os.WriteFile(p, bytes.Replace(b, []byte(args[1]), []byte(args[2]), 1), 0o600))
}
