package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// FuzzDecodeTool: a tool definition is what a downstream server lists;
// decodeTool never panics, and a schema it keeps is valid JSON, the
// server's bytes as sent.
func FuzzDecodeTool(f *testing.F) {
	f.Add([]byte(`{"name":"echo","inputSchema":{"type":"object","properties":{"message":{"type":"string"}}}}`))
	f.Add([]byte(`{"name":"t","inputSchema":null,"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`))
	f.Add([]byte(`{"name":"t","inputSchema":{"a":1e999}}`))
	f.Add([]byte(`{"name":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		tool, err := decodeTool(raw)
		if err != nil {
			return
		}
		for _, s := range []any{tool.InputSchema, tool.OutputSchema} {
			if s == nil {
				continue
			}
			b, ok := s.(json.RawMessage)
			if !ok {
				t.Fatalf("a schema kept as %T, not as the server's bytes", s)
			}
			if !json.Valid(b) || !bytes.Contains(raw, b) {
				t.Fatalf("schema %q is not the server's bytes in %q", b, raw)
			}
		}
	})
}

// TestDecodeToolLinear: tool definitions whose input schema has 1000,
// 2000, 4000 and 8000 properties: each doubling at most doubles
// decodeTool's allocations and bytes allocated (counts, not time).
func TestDecodeToolLinear(t *testing.T) {
	var prevA, prevB float64
	for _, n := range []int{1000, 2000, 4000, 8000} {
		var b strings.Builder
		b.WriteString(`{"name":"t","description":"` + strings.Repeat(`\u00e9`, n) + `","inputSchema":{"type":"object","properties":{`)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"p%d":{"type":"string","enum":[%q]}`, i, strings.Repeat("v", i%50))
		}
		b.WriteString("}}}")
		raw := []byte(b.String())
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		a0, b0 := m.Mallocs, m.TotalAlloc
		const runs = 5
		for range runs {
			if _, err := decodeTool(raw); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&m)
		allocs, bytes := float64(m.Mallocs-a0)/runs, float64(m.TotalAlloc-b0)/runs
		if prevA > 0 && (allocs > 2*prevA+8 || bytes > 2.2*prevB+1024) {
			t.Errorf("%d properties: %.0f allocations, %.0f bytes; half as many: %.0f, %.0f: want at most double", n, allocs, bytes, prevA, prevB)
		}
		prevA, prevB = allocs, bytes
	}
}
