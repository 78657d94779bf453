package proxy

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCatalogueFollowsLists runs a server that changes its four lists
// while the proxy serves it (one generic sync keeps them all): what comes
// is registered under its front name, what goes is removed and its name
// freed in the router, what changes is registered anew, and the front
// serves each through to the server's own name.
func TestCatalogueFollowsLists(t *testing.T) {
	l := newTestLog(t)
	cfg := fixtureServerConfig(t, "fx")
	cfg.Env[fixtureEnv] = "lists"
	p := startProxy(t, l, []ServerConfig{cfg}, nil)
	cs := connectMemory(t, p, nil)
	ctx := context.Background()

	type lists struct {
		tools, prompts, resources, templates []string
		descA                                string
	}
	read := func() lists {
		var got lists
		for tl, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			got.tools = append(got.tools, tl.Name)
		}
		for pr, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			got.prompts = append(got.prompts, pr.Name)
		}
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			got.resources = append(got.resources, r.URI)
			if r.URI == "fx+fixture:///a" {
				got.descA = r.Description
			}
		}
		for rt, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			got.templates = append(got.templates, rt.URITemplate)
		}
		for _, s := range [][]string{got.tools, got.prompts, got.resources, got.templates} {
			slices.Sort(s)
		}
		return got
	}

	before := read()
	if !slices.Contains(before.tools, "fx__reshape") || slices.Contains(before.tools, "fx__added") ||
		!slices.Equal(before.prompts, []string{"fx__p1"}) ||
		!slices.Equal(before.resources, []string{"fx+fixture:///a", "fx+fixture:///b"}) || before.descA != "first" ||
		!slices.Equal(before.templates, []string{"fx+fixture:///t/{id}"}) {
		t.Fatalf("front lists before: %+v", before)
	}
	if d, name := p.router.prompt("fx__p1"); d == nil || name != "p1" {
		t.Fatalf("router: fx__p1 -> %v %q", d, name)
	}

	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__reshape", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Fatalf("reshape: %v %s", err, mustJSON(res))
	}
	var after lists
	eventuallyTrue(t, "the front lists follow the server's", func() bool {
		after = read()
		return slices.Contains(after.tools, "fx__added") && slices.Equal(after.prompts, []string{"fx__p2"}) &&
			after.descA == "second" && len(after.templates) == 0
	})
	if !slices.Equal(after.resources, before.resources) {
		t.Errorf("resources after: %v, want %v", after.resources, before.resources)
	}

	// The router frees what went and routes what came.
	if d, _ := p.router.prompt("fx__p1"); d != nil {
		t.Error("router still has the removed prompt fx__p1")
	}
	if d := p.router.owner(resourceNames, "fx+fixture:///t/{id}"); d != nil {
		t.Error("router still has the removed template")
	}
	if d, name := p.router.tool("fx__added"); d == nil || name != "added" {
		t.Errorf("router: fx__added -> %v %q", d, name)
	}
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "fx__p2"})
	if err != nil || !strings.Contains(mustJSON(gp), "prompt p2") {
		t.Errorf("prompt fx__p2: %v %s", err, mustJSON(gp))
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fx+fixture:///a"})
	if err != nil || !strings.Contains(mustJSON(rr), "contents of fixture:///a") {
		t.Errorf("resource fx+fixture:///a: %v %s", err, mustJSON(rr))
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__added", Arguments: map[string]any{}})
	if err != nil || textOf(res) != "added" {
		t.Errorf("fx__added: %v %s", err, mustJSON(res))
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "fx__p1"}); err == nil {
		t.Error("the removed prompt fx__p1 still answers")
	}
}
