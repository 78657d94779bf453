package replay

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Results as JSON values: decoded, with the ignore list applied, and the
// paths at which two of them differ.

func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// applyIgnore removes what the RFC 6901 pointers name (an array element
// becomes null, so indices do not shift). Pointers that name nothing are
// skipped.
func applyIgnore(v any, ptrs []string) any {
	for _, p := range ptrs {
		if p == "" {
			return nil
		}
		toks := strings.Split(p[1:], "/")
		for i := range toks {
			toks[i] = strings.ReplaceAll(strings.ReplaceAll(toks[i], "~1", "/"), "~0", "~")
		}
		cur := v
		for i, t := range toks {
			last := i == len(toks)-1
			switch x := cur.(type) {
			case map[string]any:
				if last {
					delete(x, t)
				} else {
					cur = x[t]
				}
			case []any:
				n, err := strconv.Atoi(t)
				if err != nil || n < 0 || n >= len(x) {
					cur = nil
					break
				}
				if last {
					x[n] = nil
				} else {
					cur = x[n]
				}
			default:
				cur = nil
			}
			if cur == nil {
				break
			}
		}
	}
	return v
}

func escape(t string) string {
	return strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
}

// diff returns the RFC 6901 pointers at which a and b differ. A member
// name is written only if both hold it, or a holds it and nameA says its
// names may be shown (a is the record, kept scrubbed of redacted values);
// a member only b holds, or only a with nameA false, is named by its
// object: b is a fresh result, whose member names nothing scrubbed, and
// one may be a value the sidecar redacted.
func diff(at string, a, b any, nameA bool) []string {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return []string{at}
		}
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		var out []string
		unnamed := false
		for _, k := range sortedKeys(keys) {
			xv, xok := x[k]
			yv, yok := y[k]
			switch {
			case xok && yok:
				out = append(out, diff(at+"/"+escape(k), xv, yv, nameA)...)
			case xok && nameA:
				out = append(out, at+"/"+escape(k))
			default:
				unnamed = true
			}
		}
		if unnamed {
			out = append(out, at)
		}
		return out
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return []string{at}
		}
		var out []string
		for i := range x {
			out = append(out, diff(at+"/"+strconv.Itoa(i), x[i], y[i], nameA)...)
		}
		return out
	default:
		if !reflect.DeepEqual(a, b) {
			if at == "" {
				return []string{""}
			}
			return []string{at}
		}
		return nil
	}
}

func sortedKeys(m map[string]bool) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func union(a, b []string) []string {
	seen := map[string]bool{}
	for _, s := range a {
		seen[s] = true
	}
	for _, s := range b {
		if !seen[s] {
			a = append(a, s)
			seen[s] = true
		}
	}
	return a
}

func cap20(p []string) []string {
	if len(p) > maxPaths {
		return append(p[:maxPaths:maxPaths], "…")
	}
	return p
}
