package proxy

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// rawServerEnv makes the test binary run as a stdio MCP server that
// writes its answers' bytes itself (runRawServer): what go-sdk's server
// never sends.
const rawServerEnv = "PROVLOG_PROXY_RAW_SERVER"

// rawResults are the raw server's tools: each answers its call with the
// JSON-RPC result written here, byte for byte.
var rawResults = map[string]string{
	"ok":   `{"content":[{"type":"text","text":"ok"}]}`,
	"null": `null`,
}

func rawServerConfig(t testing.TB, id string) ServerConfig {
	return ServerConfig{ID: id, Command: fixtureServer(t), Env: map[string]string{rawServerEnv: "1"}}
}

// runRawServer serves MCP over stdio a line at a time.
func runRawServer() {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	answer := func(id json.RawMessage, result string) {
		os.Stdout.WriteString(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + result + "}\n")
	}
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return
		}
		var m struct {
			ID     json.RawMessage
			Method string
			Params struct {
				ProtocolVersion string
				Name            string
			}
		}
		if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 || m.Method == "" {
			continue // a notification, or an answer
		}
		switch m.Method {
		case "initialize":
			pv, _ := json.Marshal(m.Params.ProtocolVersion)
			answer(m.ID, `{"protocolVersion":`+string(pv)+`,"capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}`)
		case "tools/list":
			var tools []string
			for name := range rawResults {
				tools = append(tools, `{"name":"`+name+`","inputSchema":{"type":"object"}}`)
			}
			answer(m.ID, `{"tools":[`+strings.Join(tools, ",")+`]}`)
		case "tools/call":
			answer(m.ID, rawResults[m.Params.Name])
		default:
			answer(m.ID, `{}`)
		}
	}
}
