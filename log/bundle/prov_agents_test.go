package bundle_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/log/bundle"
)

// TestProvOwnActors: in a bundle's PROV document the actors provlog
// writes entries as are software agents with the role each plays, and
// its genesis actor is the agent that records calls, not a second one.
// Clients' actors stay plain agents, and so do the "local" of a purge by
// an older provlog's operator and a reserved id a client used before the
// reservation, even one provlog now writes as (provlog.operator), whose
// entries of a kind provlog does not write are a client's. python3-prov
// reads the same types.
func TestProvOwnActors(t *testing.T) {
	f := newFixture(t, 1, false) // the genesis, and a call and tasks by bob
	now := time.Now()
	add := func(b []byte, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		r, err := f.seq.Append(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		return "log:entry/" + strconv.FormatUint(r.Index, 10)
	}
	tools := add((&log.ToolsEntry{Time: now, Actor: log.GenesisActor, Server: "uniprot",
		Tools: []log.ToolSum{{Name: "get_entry", SHA256: sha256hex([]byte("get_entry"))}}}).Marshal())
	purge := func(actor string) string {
		return add((&blobs.PurgeEntry{Time: now, Actor: actor, Reason: "retention: 30d",
			Criteria: blobs.PurgeCriteria{Before: now}, Blobs: []string{sha256hex([]byte(actor))}}).Marshal())
	}
	retention, oldPurge := purge(log.RetentionActor), purge("local")
	oldClient := add((&log.Entry{Kind: "task.create", Time: now, Actor: "provlog.example:alice",
		Fields: map[string]any{"task_id": "t_2", "title": "from before the reservation"}}).Marshal())
	oldOperator := add((&log.Entry{Kind: "task.create", Time: now, Actor: log.OperatorActor,
		Fields: map[string]any{"task_id": "t_3", "title": "a client named so before the reservation"}}).Marshal())
	operator := purge(log.OperatorActor)

	dir := f.export(t, 0, 0)
	rep, err := bundle.Verify(context.Background(), dir, anchor.VerifyBundled)
	if err != nil || rep.Manifest.ProvMapping != bundle.ProvMapping {
		t.Fatalf("verify: %+v, %v; want mapping %d", rep, err, bundle.ProvMapping)
	}
	doc := readProv(t, dir)
	const recorder = "log:provlog"
	// id: "type role actor", role and actor as their attributes say.
	want := map[string]string{
		recorder:                            "prov:SoftwareAgent recorder provlog",
		"log:provlog/retention":             "prov:SoftwareAgent retention provlog.retention",
		"log:provlog/operator":              "prov:SoftwareAgent operator provlog.operator",
		"log:actor/provlog.operator":        "prov:Agent - provlog.operator",
		"log:actor/bob":                     "prov:Agent - bob",
		"log:actor/local":                   "prov:Agent - local",
		"log:actor/provlog.example%3Aalice": "prov:Agent - provlog.example:alice",
	}
	for id, w := range want {
		a := doc["agent"][id]
		typ, _ := a["prov:type"].(map[string]any)
		role, actor := a["provlog:role"], a["provlog:actor"]
		if role == nil {
			role = "-"
		}
		if got := fmt.Sprint(typ["$"], " ", role, " ", actor); got != w {
			t.Errorf("agent %s: %q, want %q", id, got, w)
		}
	}
	if a, ok := doc["agent"]["log:actor/provlog"]; ok {
		t.Errorf("provlog is a second agent beside %s: %v", recorder, a)
	}

	// Who each entry's actor is, and who recorded bob's call.
	var bobCall string
	for id, a := range doc["activity"] {
		if a["provlog:kind"] == log.KindCall && a["provlog:authSubject"] == nil {
			bobCall = id
		}
	}
	actors, roles := map[string]string{}, map[string][]string{}
	for _, r := range doc["wasAssociatedWith"] {
		act, agent := r["prov:activity"].(string), r["prov:agent"].(string)
		role, _ := r["prov:role"].(map[string]any)
		if role["$"] == "provlog:actor" {
			actors[act] = agent
		}
		if act == bobCall {
			roles[agent] = append(roles[agent], fmt.Sprint(role["$"]))
		}
	}
	for act, w := range map[string]string{"log:entry/0": recorder, tools: recorder, retention: "log:provlog/retention", operator: "log:provlog/operator", oldOperator: "log:actor/provlog.operator",
		oldPurge: "log:actor/local", oldClient: "log:actor/provlog.example%3Aalice", bobCall: "log:actor/bob"} {
		if actors[act] != w {
			t.Errorf("%s's actor is %q, want %q", act, actors[act], w)
		}
	}
	if got := fmt.Sprint(roles[recorder]); got != "[provlog:recorder]" {
		t.Errorf("bob's call %s is associated with %s as %s, want as provlog:recorder", bobCall, recorder, got)
	}
	checkAgentsDeclared(t, doc)

	t.Run("python3-prov", func(t *testing.T) {
		conv := needPythonProv(t)
		doc := filepath.Join(dir, bundle.ProvFile)
		provRoundTrip(t, conv, doc)
		out := pythonProv(t, `
for a in d.get_records(prov.model.ProvAgent):
    if a.identifier.localpart in ("provlog", "provlog/retention", "actor/bob"):
        print(a.identifier, *sorted(str(x) for x in a.get_asserted_types()), *a.get_attribute("provlog:role"))
`, doc)
		if got, w := sortLines(string(out)), "log:actor/bob prov:Agent\nlog:provlog prov:SoftwareAgent recorder\nlog:provlog/retention prov:SoftwareAgent retention\n"; got != w {
			t.Errorf("python3-prov read the agents as\n%s\nwant\n%s", got, w)
		}
	})
}

// checkAgentsDeclared fails t for a relation naming an agent the
// document does not declare.
func checkAgentsDeclared(t *testing.T, doc map[string]map[string]map[string]any) {
	t.Helper()
	for g, keys := range map[string][]string{"wasAssociatedWith": {"prov:agent"}, "wasAttributedTo": {"prov:agent"},
		"actedOnBehalfOf": {"prov:delegate", "prov:responsible"}} {
		for id, r := range doc[g] {
			for _, k := range keys {
				if a, _ := r[k].(string); doc["agent"][a] == nil {
					t.Errorf("%s %s: %s %q is no agent of the document", g, id, k, a)
				}
			}
		}
	}
}

func sortLines(s string) string {
	lines := strings.SplitAfter(s, "\n")
	slices.Sort(lines)
	return strings.Join(lines, "")
}
