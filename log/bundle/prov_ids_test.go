package bundle

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
)

// TestProvClientIDsDistinct: two different MCP clients are two PROV
// agents. local (prov.go) writes the empty string as "_", which is also
// what "_" itself gives, so under mappings before ProvMappingDistinctIDs a
// client that says its version is "" and one that says "_" were both the
// agent log:client/agent/_, written once with the first one's version, and
// the second client's calls were attributed to the first (found by the
// uiprobe session). The same held for the act chain's log:act/<iss>/<sub>.
//
// Under an older mapping the ids stay as they were, so that bundles made
// with it verify.
func TestProvClientIDsDistinct(t *testing.T) {
	for _, m := range []int{ProvMappingOwnActors, ProvMapping} {
		a, b := provClientsOf(t, m)
		if (a == b) != (m < ProvMappingDistinctIDs) {
			t.Errorf("mapping %d: clients of version \"\" and \"_\" are the PROV agents %s and %s", m, a, b)
		}
	}
}

// provClientsOf writes, under mapping m, calls of two clients named
// "agent", of versions "" and "_", and returns the PROV agents of each.
func provClientsOf(t *testing.T, m int) (string, string) {
	t.Helper()
	w, err := newProvWriter("o", m)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	at := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	for i, version := range []string{"", "_"} {
		b, err := (&log.CallEntry{Time: at, Actor: "bob", Server: "fs", Tool: "read", Args: log.CanonicalJSON(`{}`),
			Client: &log.CallClient{Name: "agent", Version: version}}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		e, err := log.ParseEntry(b)
		if err != nil {
			t.Fatal(err)
		}
		w.add(uint64(i+1), b, e)
	}
	var doc bytes.Buffer
	if err := w.finish(&doc); err != nil {
		t.Fatal(err)
	}
	var d struct {
		Agent map[string]map[string]any `json:"agent"`
		Assoc map[string]struct {
			Activity string `json:"prov:activity"`
			Agent    string `json:"prov:agent"`
			Role     struct {
				V string `json:"$"`
			} `json:"prov:role"`
		} `json:"wasAssociatedWith"`
	}
	if err := json.Unmarshal(doc.Bytes(), &d); err != nil {
		t.Fatalf("%v\n%s", err, doc.Bytes())
	}
	clientOf := map[string]string{}
	for _, a := range d.Assoc {
		if a.Role.V == "provlog:client" {
			clientOf[a.Activity] = a.Agent
		}
	}
	if len(clientOf) != 2 {
		t.Fatalf("client associations: %v", clientOf)
	}
	return clientOf["log:entry/1"], clientOf["log:entry/2"]
}
