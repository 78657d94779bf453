package proxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// lockedBuf is a log sink tests read back.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRedactionHolds calls npm server-everything's echo with a redacted
// message and full retention, over the SDK path and the HTTP fast path: the
// client gets the echo as the server sent it, and the redacted value is
// nowhere on disk or in the proxy's log — not in the entries, not in the
// retained result blobs (kept scrubbed, under their own hash), not in the
// proxy's log lines (debug level, where a stdio server's stderr goes).
// Matching is case-insensitive when configured.
func TestRedactionHolds(t *testing.T) {
	l := newTestLog(t)
	var logs lockedBuf
	cfg := ServerConfig{ID: "ev", Command: everythingJS(t, "stdio"), Redact: []string{"message", "api_key"}, RedactIgnoreCase: true, Retain: RetainFull}
	p := startProxy(t, l, []ServerConfig{cfg}, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	ctx := context.Background()
	mem := connectMemory(t, p, nil)
	web := fastSession(t, p, connectHTTP(t, serveHTTP(t, p), "2025-11-25", nil))

	secrets := []string{"SECRET-sdk-path-1", "SECRET-fast-path-2", "KEY-in-any-case-3"}
	for i, cs := range []*mcp.ClientSession{mem, web} {
		before := l.size(t)
		args := map[string]any{"message": secrets[i], "API_Key": secrets[2]}
		var res *mcp.CallToolResult
		var err error
		want := uint64(0)
		if cs == web {
			want = 1
		}
		fastBefore := p.fastCalls.Load()
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev__echo", Arguments: args})
		if got := p.fastCalls.Load() - fastBefore; got != want {
			t.Errorf("%d calls took the fast path, want %d", got, want)
		}
		if err != nil || res.IsError {
			t.Fatalf("echo: %v %s", err, mustJSON(res))
		}
		if !strings.Contains(textOf(res), secrets[i]) {
			t.Errorf("the client did not get the echo as the server sent it: %s", textOf(res))
		}
		e, b := l.callAt(t, before)
		if got := mustJSON(e.Fields["args"]); got != `{"API_Key":"[redacted]","message":"[redacted]"}` {
			t.Errorf("recorded args %s", got)
		}
		res2, _ := log.ParseCallResult(mustParse(t, l.entry(t, before+1)))
		blob := res2.RetainedBlob()
		if blob == "" || blob == res2.ResultSHA256 {
			t.Fatalf("retained blob %q, result %q: want a scrubbed copy under its own hash", blob, res2.ResultSHA256)
		}
		kept, err := l.blobs.Get(blob)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(kept, []byte("Echo: [redacted]")) {
			t.Errorf("retained result %s", kept)
		}
		if bytes.Contains(b, []byte("SECRET")) {
			t.Errorf("a redacted value reached the log: %s", b)
		}
	}

	// A value too short to cut out of a text withholds the texts that
	// hold it: the echo's string is kept as Withheld. It holds a character
	// that no session id, hash or base64 text has: "Q7" turned up in a
	// random session id in the debug log about one run in ten.
	before := l.size(t)
	res, err := web.CallTool(ctx, &mcp.CallToolParams{Name: "ev__echo", Arguments: map[string]any{"message": "~7"}})
	if err != nil || res.IsError || !strings.Contains(textOf(res), "Echo: ~7") {
		t.Fatalf("echo of a short value: %v %s", err, mustJSON(res))
	}
	res2, _ := log.ParseCallResult(mustParse(t, l.entry(t, before+1)))
	if kept, err := l.blobs.Get(res2.RetainedBlob()); err != nil || !bytes.Contains(kept, []byte(Withheld)) {
		t.Errorf("retained result of a short redacted value: %v %s", err, kept)
	}
	secrets = append(secrets, "~7")

	// Nothing on disk or in the proxy's log holds a redacted value.
	for _, s := range secrets {
		if strings.Contains(logs.String(), s) {
			t.Errorf("the proxy's log holds %q", s)
		}
	}
	filepath.WalkDir(l.blobDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := os.ReadFile(path)
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("blob %s holds %q", path, s)
			}
		}
		return nil
	})
	for i := uint64(0); i < l.size(t); i++ {
		for _, s := range secrets {
			if bytes.Contains(l.entry(t, i), []byte(s)) {
				t.Errorf("entry %d holds %q", i, s)
			}
		}
	}
}

func mustParse(t *testing.T, b []byte) *log.Entry {
	t.Helper()
	e, err := log.ParseEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// mimeWrap is b in base64 (enc) broken into lines of 76 characters, as
// MIME and PEM break it, by brk.
func mimeWrap(enc *base64.Encoding, b []byte, brk string) string {
	s := enc.EncodeToString(b)
	var lines []string
	for len(s) > 76 {
		lines, s = append(lines, s[:76]), s[76:]
	}
	return strings.Join(append(lines, s), brk)
}

// TestScrubJSONWrappedBase64: a kept result's string that holds base64 of
// bytes holding a redacted value, broken into lines (a line break inside
// the value's characters), is kept as [redacted]: in a string of the
// result ("\n" or "\r\n", escaped in its JSON text) and in a JSON text
// inside one (where the break is the two characters `\n`, or `\\n` in a
// JSON text inside that), its lines indented or not. It was kept as it
// came. Wrapped base64 of other bytes is kept as it is, and scrubJSON
// says it changed nothing.
func TestScrubJSONWrappedBase64(t *testing.T) {
	const secret = "sk-Wrapped/91+q7Zx"
	held := append(bytes.Repeat([]byte{0xfb}, 50), secret+" and more"...) // its characters span the first break
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	for _, tc := range []struct {
		name, value string
		redacted    bool
	}{
		{"LF", mimeWrap(base64.StdEncoding, held, "\n"), true},
		{"CRLF", mimeWrap(base64.StdEncoding, held, "\r\n"), true},
		{"URL-safe CR", mimeWrap(base64.URLEncoding, held, "\r"), true},
		{"inside a text", "attached:\r\n" + mimeWrap(base64.StdEncoding, held, "\r\n") + "\r\n--end", true},
		{"JSON in a text", `{"blob":` + quote(mimeWrap(base64.StdEncoding, held, "\n")) + `}`, true},
		{"JSON in a text, CRLF", `{"blob":` + quote(mimeWrap(base64.URLEncoding, held, "\r\n")) + `}`, true},
		{"JSON in JSON in a text", `{"doc":` + quote(`{"blob":`+quote(mimeWrap(base64.StdEncoding, held, "\n"))+`}`) + `}`, true},
		{"a backslash before it", `C:\` + mimeWrap(base64.StdEncoding, held, "\r\n"), true},
		// Indented lines: PEM inside YAML, an indented JSON text.
		{"indented by spaces", "key: |\n  -----BEGIN DATA-----\n  " + mimeWrap(base64.StdEncoding, held, "\n  ") + "\n  -----END DATA-----", true},
		{"indented by tabs, CRLF", "\t" + mimeWrap(base64.URLEncoding, held, "\r\n\t\t"), true},
		{"indented JSON in a text", "{\n    \"blob\": " + quote(mimeWrap(base64.StdEncoding, held, "\n    ")) + "\n}", true},
		{"JSON in a text, escaped tabs", `{"blob":` + quote(mimeWrap(base64.StdEncoding, held, "\n\t")) + `}`, true},
		{"indented JSON in JSON in a text", `{"doc":` + quote("{\n  \"blob\": "+quote(mimeWrap(base64.StdEncoding, held, "\r\n\t  "))+"\n}") + `}`, true},
		{"other bytes, indented", mimeWrap(base64.StdEncoding, bytes.Repeat([]byte{0xfb}, 200), "\n  "), false},
		{"other bytes", mimeWrap(base64.StdEncoding, bytes.Repeat([]byte{0xfb}, 200), "\r\n"), false},
		{"other bytes in JSON", `{"blob":` + quote(mimeWrap(base64.StdEncoding, bytes.Repeat([]byte{0xfb}, 200), "\n")) + `}`, false},
		// Looked for because of the line break, the characters are not
		// base64 of it: the result is kept as it came, not as a copy.
		{"its characters but the first", "line\n" + base64.StdEncoding.EncodeToString([]byte(secret))[1:], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			canon, err := log.Canonicalize([]byte(`{"content":[{"text":` + quote(tc.value) + `,"type":"text"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			got, changed := scrubJSON(canon, appendSecrets(nil, secret))
			want := string(canon)
			if tc.redacted {
				want = `{"content":[{"text":"` + Redacted + `","type":"text"}]}`
			}
			if string(got) != want || changed != tc.redacted {
				t.Errorf("scrubJSON(%s) = %s, %v; want %s, %v", canon, got, changed, want, tc.redacted)
			}
		})
	}
}

// TestScrubJSONMemberNames: a member name of a kept result that is or
// holds a redacted value, or base64 of bytes holding one (plain or
// broken into indented lines), is kept as [redacted] (base64 was kept as
// it came). Names that become equal are told apart by a count, in the
// order they came, so no member is lost (one of them was, at random) and
// the same result is always kept as the same text.
func TestScrubJSONMemberNames(t *testing.T) {
	const secret = "sk-Member/42+Qz"
	held := append(bytes.Repeat([]byte{0xfb}, 50), secret+" and more"...)
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	for _, tc := range []struct{ name, result, want string }{
		{"the value", `{"` + secret + `":1}`, `{"[redacted]":1}`},
		{"holding it", `{"a ` + secret + ` b":1}`, `{"a [redacted] b":1}`},
		{"base64", `{"` + base64.StdEncoding.EncodeToString([]byte(secret)) + `":1}`, `{"[redacted]":1}`},
		{"base64url inside", `{"st.` + base64.RawURLEncoding.EncodeToString([]byte("x"+secret)) + `":1}`, `{"[redacted]":1}`},
		{"wrapped, indented", `{"x":[{` + quote(mimeWrap(base64.StdEncoding, held, "\n  ")) + `:"v"}]}`, `{"x":[{"[redacted]":"v"}]}`},
		{"in a JSON text in a name", `{` + quote(`{"`+base64.StdEncoding.EncodeToString([]byte(secret))+`":1}`) + `:1}`, `{"[redacted]":1}`},
		{"names made equal", `{"[redacted]":0,"` + base64.StdEncoding.EncodeToString([]byte(secret)) + `":2,"` + secret + `":1,"[redacted] (2)":3}`,
			`{"[redacted]":0,"[redacted] (2)":3,"[redacted] (3)":2,"[redacted] (4)":1}`},
		{"other names", `{"c2stTWVtYmVy":1,"sk-Member":2}`, `{"c2stTWVtYmVy":1,"sk-Member":2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			canon, err := log.Canonicalize([]byte(tc.result))
			if err != nil {
				t.Fatal(err)
			}
			want, _ := log.Canonicalize([]byte(tc.want))
			for range 10 { // map order must not matter
				got, changed := scrubJSON(canon, appendSecrets(nil, secret))
				if string(got) != string(want) || changed != (tc.want != tc.result) {
					t.Fatalf("scrubJSON(%s) = %s, %v; want %s", canon, got, changed, want)
				}
			}
		})
	}
}

// TestScrubErrorTexts: an error text a downstream sends and a line of its
// stderr that hold base64 of bytes holding a redacted value (plain,
// URL-safe in a URL, broken into lines, indented, in a JSON text), with
// or without the value itself, are Redacted whole, as a kept result's
// string is; they were checked for the value alone, and its base64 was
// written as it came. Other texts are scrubbed as before.
func TestScrubErrorTexts(t *testing.T) {
	const secret = "sk-Errtext/77+Lq"
	held := append(bytes.Repeat([]byte{0xfb}, 50), secret+" and more"...)
	b64 := base64.StdEncoding.EncodeToString([]byte(secret))
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	secrets := appendSecrets(nil, secret)
	for _, tc := range []struct{ name, text, want string }{
		{"base64", "refused token " + b64, Redacted},
		{"with the value too", "refused " + secret + " (" + b64 + ")", Redacted},
		{"URL-safe in a URL", "cannot fetch https://x.test/t/" + base64.RawURLEncoding.EncodeToString([]byte(secret)) + "/y", Redacted},
		{"wrapped", "bad key:\n" + mimeWrap(base64.StdEncoding, held, "\r\n"), Redacted},
		{"indented", "bad key:\n  " + mimeWrap(base64.StdEncoding, held, "\n  "), Redacted},
		{"in a JSON text", `invalid params {"key":` + quote(mimeWrap(base64.URLEncoding, held, "\n\t")) + `}`, Redacted},
		{"the value", "refused " + secret, "refused " + Redacted},
		{"other base64", "refused " + mimeWrap(base64.StdEncoding, bytes.Repeat([]byte{0xfb}, 200), "\n  "), "refused " + mimeWrap(base64.StdEncoding, bytes.Repeat([]byte{0xfb}, 200), "\n  ")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := scrub(tc.text, secrets); got != tc.want {
				t.Errorf("scrub(%q) = %q, want %q", tc.text, got, tc.want)
			}
			var r recentSecrets // a server's stderr
			r.remember([]string{"other-secret"})
			r.scrub("warm the cores up")
			r.remember(secrets)
			if got := r.scrub(tc.text); got != tc.want {
				t.Errorf("recentSecrets.scrub(%q) = %q, want %q", tc.text, got, tc.want)
			}
		})
	}
}

// TestScrubBase64EveryOffset: base64 of bytes holding a redacted value of
// the shortest length scrubbed and a little longer, at each offset it can
// start at in a group of three bytes, in both alphabets, is found in a
// text and in a kept result's string. A value of four bytes one byte into
// a group was not: no group of four characters is all its own.
func TestScrubBase64EveryOffset(t *testing.T) {
	for _, secret := range []string{"unte", "Qz9/x", "sk-Offset"} {
		for k := range 3 {
			for _, enc := range base64Alphabets {
				b := enc.EncodeToString([]byte(strings.Repeat("h", k) + secret + "r22"))
				secrets := appendSecrets(nil, secret)
				if got := scrub("key "+b, secrets); got != Redacted {
					t.Errorf("%q at offset %d: scrub(%q) = %q", secret, k, "key "+b, got)
				}
				canon, _ := log.Canonicalize([]byte(`{"t":"` + b + `"}`))
				if got, _ := scrubJSON(canon, secrets); string(got) != `{"t":"[redacted]"}` {
					t.Errorf("%q at offset %d: scrubJSON(%s) = %s", secret, k, canon, got)
				}
			}
		}
	}
}

// TestStderrWrappedBase64: a stdio server's stderr lines that carry base64
// of bytes holding a redacted value broken over them (a PEM, indented or
// not) are each logged as [redacted]: they are scrubbed as one text, held
// until a line that does not go on with them comes, or a while without
// lines. Each was scrubbed alone, and held part of the value's base64.
// Wrapped base64 of other bytes and other lines are logged as they came,
// in order.
func TestStderrWrappedBase64(t *testing.T) {
	const secret = "sk-Stderr/31+Wq"
	// Its characters span the first break; no padding ends the last line.
	held := append(bytes.Repeat([]byte{0xfb}, 50), secret+" and more!"...)
	wrapped := strings.Split(mimeWrap(base64.StdEncoding, held, "\n"), "\n")
	other := strings.Split(mimeWrap(base64.StdEncoding, bytes.Repeat([]byte{0xfb}, 120), "\n"), "\n")
	for _, tc := range []struct {
		name, indent string
		last         bool // the wrapped lines are the last: the wait logs them
	}{{"PEM", "", false}, {"indented", "    ", false}, {"indented by tabs, last", "\t", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var logs lockedBuf
			d := &downstream{p: &Proxy{logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, cfg: ServerConfig{ID: "s"}}
			d.secrets.remember(appendSecrets(nil, secret))
			l := &lineLogger{d: d}
			var text string
			var want []string
			add := func(line, logged string) {
				text += line + "\n"
				want = append(want, logged)
			}
			blocks := [][]string{wrapped, other}
			if tc.last {
				blocks = [][]string{other, wrapped}
			}
			for i, b := range blocks {
				add("[key]", "[key]") // no base64 character starts it: it ends a run
				for _, w := range b {
					logged := tc.indent + w
					if i == 0 != tc.last {
						logged = Redacted
					}
					add(tc.indent+w, logged)
				}
			}
			if !tc.last {
				add("done", "done")
			}
			for i := 0; i < len(text); i += 7 { // as a pipe cuts it
				l.Write([]byte(text[i:min(i+7, len(text))]))
			}
			var got []string
			for range 400 { // held lines wait for a line after them
				got = got[:0]
				for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
					var rec struct{ Line string }
					if json.Unmarshal([]byte(line), &rec) == nil {
						got = append(got, rec.Line)
					}
				}
				if len(got) >= len(want) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if !slices.Equal(got, want) {
				t.Errorf("logged\n%q\nwant\n%q", got, want)
			}
		})
	}
}

// TestStderrNotHeldWithoutSecrets: a server with no redacted value to
// find (no redaction configured, or none of its calls held one) has each
// stderr line logged by the Write that ends it, even one ending in a run
// of base64 (a key printed in PEM): such lines were held for a line after
// them, or half a second, for nothing.
func TestStderrNotHeldWithoutSecrets(t *testing.T) {
	var logs lockedBuf
	d := &downstream{p: &Proxy{logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, cfg: ServerConfig{ID: "s"}}
	l := &lineLogger{d: d}
	line := strings.Repeat("QUJD", 19) // a PEM line's 76 characters
	l.Write([]byte(line + "\n"))
	if !strings.Contains(logs.String(), line) {
		t.Errorf("a stderr line was not logged when written: %q", logs.String())
	}
}

// TestListErrorScrubbed: a server that echoes a call's redacted argument
// (itself and in base64) in the error it answers a later tools/list with
// does not get it into the proxy's warning: the warning's error text is
// scrubbed of the server's recent redacted values, as its stderr is. It
// was logged as the server sent it.
func TestListErrorScrubbed(t *testing.T) {
	const secret = "sk-Listed/64+Ve"
	srv := mcp.NewServer(&mcp.Implementation{Name: "echoes", Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	var got atomic.Value // the token the call was sent
	srv.AddTool(&mcp.Tool{Name: "use", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct{ Token string }
		json.Unmarshal(req.Params.Arguments, &args)
		got.Store(args.Token)
		return &mcp.CallToolResult{}, nil
	})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			tok, _ := got.Load().(string)
			if method != "tools/list" || tok == "" {
				return next(ctx, method, req)
			}
			return nil, fmt.Errorf("no list while %s (%s) is in use", tok, base64.StdEncoding.EncodeToString([]byte(tok)))
		}
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	var buf proctest.Buffer
	p := startProxy(t, newTestLog(t), []ServerConfig{{ID: "e", URL: down.URL, Redact: []string{"token"}}}, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&buf, nil)) })
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "e__use", Arguments: map[string]any{"token": secret}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(freshFor) // the read on connecting serves no longer
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	eventuallyTrue(t, "the read failed", func() bool { return len(linesWith(&buf, "listing tools failed")) > 0 })
	for _, line := range linesWith(&buf, "listing tools failed") {
		if strings.Contains(line, secret) || strings.Contains(line, base64.StdEncoding.EncodeToString([]byte(secret))) {
			t.Errorf("the warning holds the redacted value: %s", line)
		}
	}
}

// TestScrubOverlappingSecrets: two redacted values that overlap in a text
// are cut out together, whichever is named first. Cut one after the
// other, the one cut second was no longer whole, and the part of it the
// first did not cover stayed: on disk in a kept result, in the log.
func TestScrubOverlappingSecrets(t *testing.T) {
	a, b := "sk-Alpha-0123456789", "0123456789-Omega-xyz"
	for _, secrets := range [][]string{{a, b}, {b, a}} {
		if got, want := scrub("key sk-Alpha-0123456789-Omega-xyz here, and 0123456789-Omega-xyz", secrets), "key [redacted] here, and [redacted]"; got != want {
			t.Errorf("scrub with %q: %q, want %q", secrets, got, want)
		}
		if got, _ := scrubJSON([]byte(`{"t":"sk-Alpha-0123456789-Omega-xyz"}`), secrets); string(got) != `{"t":"[redacted]"}` {
			t.Errorf("scrubJSON with %q: %s", secrets, got)
		}
	}
}
