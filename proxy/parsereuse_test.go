package proxy

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/provlog/provlog/log"
)

// TestParsesKeepNoWalkBuffer: what parseFast and parseWire return is
// their own (or the body's, for parseFast), never the walk's buffers,
// which log.WalkObjectIn reuses from walk to walk: messages read one
// after another, and at once, each keep their own canonical forms, and a
// server's message keeps nothing of the data it was read from.
func TestParsesKeepNoWalkBuffer(t *testing.T) {
	// Arguments and results sent canonical and not, of sizes that make
	// the walks reuse and grow their buffers.
	args := func(i int) string {
		if i%2 == 0 {
			return fmt.Sprintf(`{"a":%d,"m":%q}`, i, strings.Repeat(string(rune('a'+i%26)), i*37%700))
		}
		return fmt.Sprintf(`{ "m" : %q, "a" : %d.0 }`, strings.Repeat(string(rune('a'+i%26)), i*53%900), i)
	}
	result := func(i int) string {
		if i%3 == 0 {
			return fmt.Sprintf(`{"content":[{"text":%q,"type":"text"}],"isError":%v}`, strings.Repeat("r", i*41%800), i%4 == 0)
		}
		return fmt.Sprintf(`{"content":[{"type":"text","text":%q}],"isError":%v}`, strings.Repeat("s", i*29%1000), i%4 == 0)
	}
	check := func(t *testing.T, i int) (func(), error) {
		body := []byte(`{"jsonrpc":"2.0","id":` + fmt.Sprint(i) + `,"method":"tools/call","params":{"name":"s__t","arguments":` + args(i) + `}}`)
		fr, ok := parseFast(body)
		if !ok {
			return nil, fmt.Errorf("request %d not taken: %s", i, body)
		}
		data := []byte(`{"jsonrpc":"2.0","id":"provlog-` + fmt.Sprint(i) + `","result":` + result(i) + `}`)
		m, err := parseWire(data)
		if err != nil {
			return nil, fmt.Errorf("answer %d: %v", i, err)
		}
		for j := range data {
			data[j] = 'x' // the message keeps nothing of its data
		}
		// Checked later, after other walks reused the buffers.
		return func() {
			wantArgs, _ := log.Canonicalize([]byte(args(i)))
			wantResult, _ := log.Canonicalize([]byte(result(i)))
			switch {
			case string(fr.args) != args(i) || !bytes.Equal(fr.argsCanon, wantArgs):
				t.Errorf("request %d: args %s canonical %s, want %s and %s", i, fr.args, fr.argsCanon, args(i), wantArgs)
			case string(m.ID) != `"provlog-`+fmt.Sprint(i)+`"` || string(m.Result) != result(i) || !bytes.Equal(m.resultCanon, wantResult) || m.isError != (i%4 == 0):
				t.Errorf("answer %d: id %s result %s canonical %s isError %v, want %s and %s", i, m.ID, m.Result, m.resultCanon, m.isError, result(i), wantResult)
			}
		}, nil
	}
	var mu sync.Mutex
	var later []func()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < 400; i += 4 {
				f, err := check(t, i)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				later = append(later, f)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, f := range later {
		f()
	}
}
