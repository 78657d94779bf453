package log_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
)

// TestEntryAuth: the "auth" member's wire form, and what ParseEntry and
// Marshal refuse in it.
func TestEntryAuth(t *testing.T) {
	sum := strings.Repeat("0f", 32)
	a := &log.Auth{Issuer: "https://idp.example/", Subject: "alice", ClientID: "agent-7", JTI: "j1", TokenSHA256: sum, Via: log.AuthViaJWT,
		Act: &log.Act{Subject: "agent-7", Act: &log.Act{Subject: "orchestrator", Issuer: "https://idp.example/"}}}
	b, err := (&log.Entry{Kind: "task.accept", Time: time.Unix(0, 0), Actor: "idp:alice", Auth: a, Fields: map[string]any{"task_id": "t"}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"actor":"idp:alice","auth":{"act":{"act":{"iss":"https://idp.example/","sub":"orchestrator"},"sub":"agent-7"},"client_id":"agent-7","iss":"https://idp.example/","jti":"j1","sub":"alice","token_sha256":"` + sum + `","via":"jwt"},"kind":"task.accept","task_id":"t","time":"1970-01-01T00:00:00.000000000Z","v":1}`
	if string(b) != want {
		t.Fatalf("entry\n got %s\nwant %s", b, want)
	}
	e, err := log.ParseEntry(b)
	if err != nil || e.Auth == nil || e.Auth.Act.Act.Subject != "orchestrator" || e.Fields["auth"] != nil {
		t.Fatalf("parsed %+v, %v", e, err)
	}
	// As JSON elsewhere (task histories): the same members, read back.
	j, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if i := strings.Index(want, `"auth":`); !strings.HasPrefix(want[i+len(`"auth":`):], string(j)) {
		t.Errorf("JSON %s is not the entry's auth member", j)
	}
	var back log.Auth
	if err := json.Unmarshal(j, &back); err != nil || !reflect.DeepEqual(&back, a) {
		t.Errorf("read back %+v, %v; want %+v", &back, err, a)
	}
	if err := json.Unmarshal([]byte(`{"iss":"x","sub":"y","token":"secret"}`), &back); err == nil {
		t.Error("UnmarshalJSON took an unknown member")
	}
	if _, err := (&log.Entry{Kind: "call", Fields: map[string]any{"auth": "x"}}).Marshal(); err == nil {
		t.Error("a kind's field named auth was accepted")
	}
	for name, bad := range map[string]string{
		"unknown member":  strings.Replace(want, `"jti":"j1"`, `"jti":"j1","token":"secret"`, 1),
		"empty member":    strings.Replace(want, `"jti":"j1"`, `"jti":""`, 1),
		"bad hash":        strings.Replace(want, sum, "00", 1),
		"unknown via":     strings.Replace(want, `"via":"jwt"`, `"via":"magic"`, 1),
		"act without sub": strings.Replace(want, `"sub":"orchestrator"`, `"client_id":"o"`, 1),
		"no issuer":       strings.Replace(want, `"iss":"https://idp.example/","jti"`, `"jti"`, 1),
		"not an object":   `{"actor":"a","auth":"x","kind":"call","time":"1970-01-01T00:00:00.000000000Z","v":1}`,
	} {
		if _, err := log.ParseEntry([]byte(bad)); err == nil {
			t.Errorf("%s: accepted %s", name, bad)
		}
	}
	deep := &log.Act{Subject: "a"}
	for range log.MaxActDepth {
		deep = &log.Act{Subject: "a", Act: deep}
	}
	a.Act = deep
	if _, err := (&log.Entry{Kind: "call", Time: time.Unix(0, 0), Auth: a}).Marshal(); err == nil {
		t.Error("an act chain deeper than MaxActDepth was written")
	}
}
