package proxy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rawServerEnv makes the test binary run as a stdio MCP server that
// writes its answers' bytes itself (runRawServer): what go-sdk's server
// never sends.
const rawServerEnv = "PROVLOG_PROXY_RAW_SERVER"

// rawHeldEnv names a file the raw server writes when it holds a call of
// "later".
const rawHeldEnv = "PROVLOG_PROXY_RAW_HELD"

// rawResults are the raw server's tools: each answers its call with the
// JSON-RPC result written here, byte for byte ("-": a response with no
// result at all).
var rawResults = map[string]string{
	"ok":   `{"content":[{"type":"text","text":"ok"}]}`,
	"null": `null`,
	// What go-sdk's servers write for "<b>", and a content block's own
	// _meta, in a result spaced as no encoder of provlog's would.
	"escaped": `{"content":[{"type":"text","text":"\u003cb\u003e \"q\"","_meta":{"k":1}}], "isError" : false}`,
	// A result with a _meta of its own, for the receipt to join.
	"metaown": `{"content":[{"type":"text","text":"\u003cb\u003e"}], "_meta" : { "k":1 } }`,
	"none":    `-`,
	// A number beyond a double's range, where the client is given it
	// as is (structuredContent) and where it is not (_meta).
	"bignum":     `{"content":[{"type":"text","text":"big"}],"structuredContent":{"n":1e999}}`,
	"bignummeta": `{"_meta":{"n":1e999},"content":[{"type":"text","text":"big"}]}`,
	// Nesting within go-sdk's bound of 1000 levels, past it, and past
	// encoding/json's of 10000.
	"deep999":   `{"content":[],"structuredContent":{"d":` + nested(997) + `}}`,
	"deep1001":  `{"content":[],"structuredContent":{"d":` + nested(1001) + `}}`,
	"deep10001": `{"content":[],"structuredContent":{"d":` + nested(10001) + `}}`,
	// An input request that is null, on which go-sdk's decoding panics.
	"nullask": `{"resultType":"input_required","inputRequests":{"a":null}}`,
	// Answered ok, but only after the server answered the next call.
	"later": `{"content":[{"type":"text","text":"ok"}]}`,
}

// nested is n arrays, each in the one before.
func nested(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// rawReadResults are the raw server's resources (URI "raw://" + name) and
// prompts: each answers its resources/read or prompts/get with the result
// written here, byte for byte ("-": a response with no result at all).
var rawReadResults = map[string]struct{ resource, prompt string }{
	"ok": {`{"contents":[{"uri":"raw://ok","text":"ok"}]}`,
		`{"messages":[{"role":"user","content":{"type":"text","text":"ok"}}]}`},
	"null":  {`null`, `null`},
	"array": {`[1,2]`, `[1,2]`},
	"none":  {`-`, `-`},
	"meta": {`{"_meta":[1],"contents":[{"uri":"raw://meta","text":"x"}]}`,
		`{"_meta":[1],"messages":[{"role":"user","content":{"type":"text","text":"x"}}]}`},
	"metanull": {`{"_meta":null,"contents":[{"uri":"raw://metanull","text":"x"}]}`,
		`{"_meta":null,"messages":[{"role":"user","content":{"type":"text","text":"x"}}]}`},
	"nullitem": {`{"contents":[null,{"uri":"raw://nullitem","text":"x"}]}`,
		`{"messages":[null,{"role":"user","content":{"type":"resource_link","uri":"raw://x","name":"x"}}]}`},
	"empty": {`{}`, `{}`},
	"both": {`{"contents":[{"uri":"raw://both","text":"x"}],"inputRequests":{"ask":` + rawElicit + `}}`,
		`{"messages":[{"role":"user","content":{"type":"text","text":"x"}}],"inputRequests":{"ask":` + rawElicit + `}}`},
	"list": {`{"contents":{"uri":"raw://list","text":"x"}}`,
		`{"messages":{"role":"user","content":{"type":"text","text":"x"}}}`},
	// A number beyond a double's range in a resource's or a text
	// content's _meta, and in the result's, and nesting past go-sdk's
	// bound (1000 levels) in the result's _meta.
	"bignum": {`{"contents":[{"uri":"raw://bignum","text":"x","_meta":{"n":1e999}}]}`,
		`{"messages":[{"role":"user","content":{"type":"text","text":"x","_meta":{"n":1e999}}}]}`},
	"bignummeta": {`{"_meta":{"n":1e999},"contents":[{"uri":"raw://bignummeta","text":"x"}]}`,
		`{"_meta":{"n":1e999},"messages":[{"role":"user","content":{"type":"text","text":"x"}}]}`},
	"deep1001": {`{"_meta":{"d":` + nested(1001) + `},"contents":[{"uri":"raw://deep1001","text":"x"}]}`,
		`{"_meta":{"d":` + nested(1001) + `},"messages":[{"role":"user","content":{"type":"text","text":"x"}}]}`},
	"deep10001": {`{"_meta":{"d":` + nested(10001) + `},"contents":[{"uri":"raw://deep10001","text":"x"}]}`,
		`{"_meta":{"d":` + nested(10001) + `},"messages":[{"role":"user","content":{"type":"text","text":"x"}}]}`},
	// An input request that is null, on which go-sdk's decoding panics.
	"nullask": {`{"resultType":"input_required","inputRequests":{"a":null}}`,
		`{"resultType":"input_required","inputRequests":{"a":null}}`},
	// Members in no sorted order, "<" and "&" written plainly, and a
	// _meta of the result's own, for the receipt to join.
	"asis": {`{"contents":[{"uri":"raw://asis","text":"<b> & </b>","mimeType":"text/html"}],"_meta":{"z":1,"a":2},"zeta":true}`,
		`{"messages":[{"role":"user","content":{"type":"text","text":"a<b"}}],"description":"d","_meta":{"z":1,"a":2}}`},
}

// rawElicit is an input request (SEP-2322) asking the user for nothing.
const rawElicit = `{"method":"elicitation/create","params":{"message":"?","requestedSchema":{"type":"object","properties":{}}}}`

func rawServerConfig(t testing.TB, id string) ServerConfig {
	return ServerConfig{ID: id, Command: fixtureServer(t), Env: map[string]string{rawServerEnv: "1"}}
}

// runRawServer serves MCP over stdio a line at a time.
func runRawServer() {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	answer := func(id json.RawMessage, result string) {
		if result == "-" {
			os.Stdout.WriteString(`{"jsonrpc":"2.0","id":` + string(id) + "}\n")
			return
		}
		os.Stdout.WriteString(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + result + "}\n")
	}
	var later json.RawMessage // the id of a call of "later" not yet answered
	var flood rawFlood
	var churn rawChurn
	var pings rawPings
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return
		}
		if flood.answered(line, answer) || churn.answered(line, answer) || pings.answered(line) {
			continue
		}
		var m struct {
			ID     json.RawMessage
			Method string
			Params struct {
				ProtocolVersion string
				Name            string
				URI             string
			}
		}
		if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 || m.Method == "" {
			continue // a notification, or an answer
		}
		switch m.Method {
		case "initialize":
			answer(m.ID, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"resources":{},"prompts":{}},"serverInfo":{"name":"raw","version":"1"}}`)
		case "tools/list":
			var tools []string
			for name := range rawResults {
				tools = append(tools, `{"name":"`+name+`","inputSchema":{"type":"object"}}`)
			}
			tools = append(tools, `{"name":"flood","inputSchema":{"type":"object"}}`, `{"name":"trickle","inputSchema":{"type":"object"}}`, `{"name":"toobig","inputSchema":{"type":"object"}}`,
				`{"name":"pings","inputSchema":{"type":"object"}}`, `{"name":"pinged","inputSchema":{"type":"object"}}`,
				fmt.Sprintf(`{"name":"churn","description":"v%d","inputSchema":{"type":"object"}}`, churn.version))
			churn.lists++
			answer(m.ID, `{"tools":[`+strings.Join(tools, ",")+`]}`)
		case "tools/call":
			if m.Params.Name == "later" {
				later = m.ID
				if f := os.Getenv(rawHeldEnv); f != "" {
					os.WriteFile(f, []byte("held\n"), 0o600)
				}
				continue
			}
			switch m.Params.Name {
			case "flood":
				flood.start(m.ID)
				continue
			case "churn":
				churn.start(m.ID)
				continue
			case "pings":
				answer(m.ID, rawResults["ok"])
				pings.start()
				continue
			case "pinged":
				answer(m.ID, pings.said())
				continue
			case "trickle":
				trickle(m.ID)
			case "toobig":
				tooBig(m.ID)
			}
			answer(m.ID, rawResults[m.Params.Name])
			if later != nil {
				answer(later, rawResults["later"])
				later = nil
			}
		case "prompts/list":
			var prompts []string
			for name := range rawReadResults {
				prompts = append(prompts, `{"name":"`+name+`"}`)
			}
			answer(m.ID, `{"prompts":[`+strings.Join(prompts, ",")+`]}`)
		case "resources/list":
			var resources []string
			for name := range rawReadResults {
				resources = append(resources, `{"uri":"raw://`+name+`","name":"`+name+`"}`)
			}
			answer(m.ID, `{"resources":[`+strings.Join(resources, ",")+`]}`)
		case "resources/read":
			answer(m.ID, rawReadResults[strings.TrimPrefix(m.Params.URI, "raw://")].resource)
		case "prompts/get":
			answer(m.ID, rawReadResults[m.Params.Name].prompt)
		default:
			answer(m.ID, `{}`)
		}
	}
}

// trickle answers the call id a byte a millisecond, without end: an
// answer that is never whole.
func trickle(id json.RawMessage) {
	os.Stdout.WriteString(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[{"type":"text","text":"`)
	for {
		if _, err := os.Stdout.WriteString("x"); err != nil {
			os.Exit(1)
		}
		time.Sleep(time.Millisecond)
	}
}

// rawFloodAsks is how many sampling requests the raw server's tool
// "flood" sends at once.
const rawFloodAsks = maxServerRequests + 50

// A rawFlood is the raw server's call of "flood": it sends rawFloodAsks
// sampling requests and then, every 100 ms until one is answered, a ping,
// none answered yet, and answers the call, once a ping is answered, with
// the number of its sampling requests answered with an error by then
// ("refused N"). (A ping past the server's budget is answered only once a
// second has passed since the last one refused.)
type rawFlood struct {
	call    json.RawMessage // the call's id, until it is answered
	refused int
	pinged  *atomic.Bool // set once a ping is answered
}

func (f *rawFlood) start(call json.RawMessage) {
	f.call, f.refused, f.pinged = call, 0, new(atomic.Bool)
	var b strings.Builder
	for i := range rawFloodAsks {
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":"flood-%d","method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":1}}`+"\n", i)
	}
	os.Stdout.WriteString(b.String())
	go func(pinged *atomic.Bool) {
		for i := 0; !pinged.Load(); i++ {
			os.Stdout.WriteString(fmt.Sprintf(`{"jsonrpc":"2.0","id":"flood-ping-%d","method":"ping"}`, i) + "\n")
			time.Sleep(100 * time.Millisecond)
		}
	}(f.pinged)
}

// answered takes line if it answers one of the flood's requests.
func (f *rawFlood) answered(line []byte, answer func(json.RawMessage, string)) bool {
	var m struct {
		ID    string
		Error json.RawMessage
	}
	if f.call == nil || json.Unmarshal(line, &m) != nil || !strings.HasPrefix(m.ID, "flood-") {
		return false
	}
	switch {
	case strings.HasPrefix(m.ID, "flood-ping-"):
		f.pinged.Store(true)
		answer(f.call, fmt.Sprintf(`{"content":[{"type":"text","text":"refused %d"}]}`, f.refused))
		f.call = nil
	case m.Error != nil:
		f.refused++
	}
	return true
}

// rawPingsSent is how many pings the raw server's tool "pings" sends.
const rawPingsSent = 20000

// rawPings are the pings the raw server's tool "pings" sends once it
// answered the call (so outside any call), without pause; its tool
// "pinged" says how many were answered, how many with an error, and the
// first error's message ("answered N refused M: message").
type rawPings struct {
	answers, refused int
	why              string
}

func (p *rawPings) start() {
	// A line a write, beside the loop that reads their answers: the
	// proxy's answers would fill the pipe while a write of them all
	// waited for the proxy to read it.
	go func() {
		for i := range rawPingsSent {
			os.Stdout.WriteString(fmt.Sprintf(`{"jsonrpc":"2.0","id":"ping-%d","method":"ping"}`, i) + "\n")
		}
	}()
}

// answered takes line if it answers one of the pings.
func (p *rawPings) answered(line []byte) bool {
	var m struct {
		ID    string
		Error *struct{ Message string }
	}
	if json.Unmarshal(line, &m) != nil || !strings.HasPrefix(m.ID, "ping-") {
		return false
	}
	p.answers++
	if m.Error != nil {
		if p.refused++; p.why == "" {
			p.why = m.Error.Message
		}
	}
	return true
}

func (p *rawPings) said() string {
	text, _ := json.Marshal(fmt.Sprintf("answered %d refused %d: %s", p.answers, p.refused, p.why))
	return `{"content":[{"type":"text","text":` + string(text) + `}]}`
}

// rawChurnRounds is how many times the raw server's tool "churn" changes
// the server's tool list: within the burst of its requests' budget
// (maxServerRequestsBurst, askbudget.go), a ping each.
const rawChurnRounds = 200

// A rawChurn is the raw server's call of "churn": rawChurnRounds times,
// it changes the description of its tool "churn", says its tools changed
// (notifications/tools/list_changed) and pings the proxy, each round once
// the last ping is answered; then it answers the call with the number of
// tool lists it gave meanwhile ("listed N").
type rawChurn struct {
	call    json.RawMessage // the call's id, until it is answered
	version int             // the tool list's
	lists   int             // tools/list requests answered
	from    int             // lists when the call came
	round   int
}

func (c *rawChurn) start(call json.RawMessage) {
	c.call, c.from, c.round = call, c.lists, 0
	c.change()
}

// change changes the list, says so, and pings.
func (c *rawChurn) change() {
	c.version++
	os.Stdout.WriteString(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` + "\n" +
		fmt.Sprintf(`{"jsonrpc":"2.0","id":"churn-%d","method":"ping"}`, c.round) + "\n")
}

// answered takes line if it answers the churn's ping.
func (c *rawChurn) answered(line []byte, answer func(json.RawMessage, string)) bool {
	var m struct{ ID string }
	if c.call == nil || json.Unmarshal(line, &m) != nil || m.ID != fmt.Sprintf("churn-%d", c.round) {
		return false
	}
	if c.round++; c.round < rawChurnRounds {
		c.change()
		return true
	}
	answer(c.call, fmt.Sprintf(`{"content":[{"type":"text","text":"listed %d"}]}`, c.lists-c.from))
	c.call = nil
	return true
}

// tooBig answers the call id with a message longer than maxFrameBytes,
// which ends the server's connection; the server then waits, blocked on
// its stdout, until it is stopped.
func tooBig(id json.RawMessage) {
	os.Stdout.WriteString(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[{"type":"text","text":"`)
	chunk := strings.Repeat("x", 1<<20)
	for range maxFrameBytes>>20 + 1 {
		os.Stdout.WriteString(chunk)
	}
	os.Stdout.WriteString(`"}]}}` + "\n")
}
