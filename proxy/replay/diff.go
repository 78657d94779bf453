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
//
// It names at most maxPaths+1 paths, as many as an outcome shows (cap20),
// and builds a path only where the results differ, from the steps to it:
// built for every value visited, paths cost the square of the nesting
// depth of a result, which a server chooses.
func diff(at string, a, b any, nameA bool) []string {
	d := differ{steps: []string{at}, nameA: nameA}
	d.diff(a, b)
	return d.out
}

// A differ collects the paths at which two values differ.
type differ struct {
	steps []string // the path to the values compared, a step each
	out   []string
	nameA bool
}

func (d *differ) full() bool { return len(d.out) > maxPaths }

func (d *differ) add() { d.out = append(d.out, strings.Join(d.steps, "")) }

func (d *differ) diff(a, b any) {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			d.add()
			return
		}
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		unnamed := false
		for _, k := range sortedKeys(keys) {
			if d.full() {
				return
			}
			xv, xok := x[k]
			yv, yok := y[k]
			switch {
			case xok && yok:
				d.steps = append(d.steps, "/"+escape(k))
				d.diff(xv, yv)
				d.steps = d.steps[:len(d.steps)-1]
			case xok && d.nameA:
				d.steps = append(d.steps, "/"+escape(k))
				d.add()
				d.steps = d.steps[:len(d.steps)-1]
			default:
				unnamed = true
			}
		}
		if unnamed && !d.full() {
			d.add()
		}
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			d.add()
			return
		}
		for i := range x {
			if d.full() {
				return
			}
			d.steps = append(d.steps, "/"+strconv.Itoa(i))
			d.diff(x[i], y[i])
			d.steps = d.steps[:len(d.steps)-1]
		}
	default:
		if !reflect.DeepEqual(a, b) {
			d.add()
		}
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
