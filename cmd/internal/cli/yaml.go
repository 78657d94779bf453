package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// DecodeYAML decodes a config file into v strictly: a key v has no field
// for is refused, and so, with its line and key, is a value meant for a
// [time.Duration] that is not a Go duration of zero or more ("timeout: 60"
// lacks its unit). Every duration in the mains' configs and in the
// library configs they embed is a time.Duration, checked here, where the
// file is read. An empty file is io.EOF, as yaml.v3 says it. A file of
// more than one document is refused. An error names no value the file
// holds (withoutValues).
func DecodeYAML(b []byte, v any) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return err
	}
	w := &durationWalk{seen: map[aliased]bool{}}
	if err := w.check(&doc, reflect.TypeOf(v), ""); err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return withoutValues(err)
	}
	// What follows a "---" would be passed over, and the file would say
	// something other than what is applied.
	var more yaml.Node
	switch err := dec.Decode(&more); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return fmt.Errorf("a second YAML document, which does not parse (%w); a config file is one document", err)
	default:
		return fmt.Errorf("line %d: a second YAML document; a config file is one document (remove the \"---\" and merge what follows it)", more.Line)
	}
	return nil
}

// withoutValues returns a yaml.v3 type error without the value it quotes
// ("cannot unmarshal !!str `hunter2pw` into map[string]string": up to 10
// characters whole, a longer value's first 7): a config's secret written
// where another type belongs (a header's value as the whole headers:) would
// reach stderr and the log of a failed reload. The line, the YAML type and
// the type wanted are kept.
func withoutValues(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	c := &yaml.TypeError{Errors: make([]string, len(te.Errors))}
	for i, m := range te.Errors {
		c.Errors[i] = quotedValue.ReplaceAllString(m, "$1$2")
	}
	return c
}

// quotedValue matches a yaml.v3 type error's message quoting a value; the
// value runs to the last " into " (a Go type's name holds no space).
var quotedValue = regexp.MustCompile(`(?s)^(line \d+: cannot unmarshal !!\S+) .*( into \S+)$`)

var durationType = reflect.TypeFor[time.Duration]()

// A durationWalk walks a YAML document beside the Go type it decodes
// into. It follows an alias into a node only once per type, so that a
// document of aliases of aliases costs no more than its nodes.
type durationWalk struct {
	seen map[aliased]bool
}

type aliased struct {
	n *yaml.Node
	t reflect.Type
}

// check checks every value under n bound for a time.Duration, and that
// no list holds an empty item, n decoding into t; key names where n is,
// for messages.
func (w *durationWalk) check(n *yaml.Node, t reflect.Type, key string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil || w.seen[aliased{n.Alias, t}] {
			return nil
		}
		w.seen[aliased{n.Alias, t}] = true
		n = n.Alias
	}
	switch {
	case n.Kind == yaml.DocumentNode:
		for _, c := range n.Content {
			if err := w.check(c, t, key); err != nil {
				return err
			}
		}
	case t == durationType:
		return checkDuration(n, key)
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if ft, ok := yamlField(t, k); ok {
				if err := w.check(n.Content[i+1], ft, join(key, k)); err != nil {
					return err
				}
			}
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := w.check(n.Content[i+1], t.Elem(), join(key, n.Content[i].Value)); err != nil {
				return err
			}
		}
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && n.Kind == yaml.SequenceNode:
		for i, c := range n.Content {
			if c.Kind == yaml.ScalarNode && c.Tag == "!!null" {
				// yaml.v3 decodes it as the element's zero value, which
				// reads as a server, token or field that is not there.
				return fmt.Errorf("line %d: %s[%d]: an empty item (~ or null); remove it or fill it in", c.Line, key, i)
			}
			if err := w.check(c, t.Elem(), fmt.Sprintf("%s[%d]", key, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkDuration(n *yaml.Node, key string) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil // left unset
	}
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: %s: want a duration such as 30s, 2m or 2ms", n.Line, key)
	}
	d, err := time.ParseDuration(n.Value)
	switch {
	case err != nil && strings.Trim(n.Value, "0123456789.") == "":
		return fmt.Errorf("line %d: %s: %q has no unit: write it as 30s, 2m or 2ms", n.Line, key, n.Value)
	case err != nil:
		return fmt.Errorf("line %d: %s: %q is not a duration such as 30s, 2m or 2ms", n.Line, key, n.Value)
	case d < 0:
		return fmt.Errorf("line %d: %s: duration %q is negative", n.Line, key, n.Value)
	}
	return nil
}

// yamlField returns the type of t's field that YAML key k decodes into,
// as yaml.v3 names fields (the yaml tag, else the lower-cased field name;
// inline structs' fields as t's own).
func yamlField(t reflect.Type, k string) (reflect.Type, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if strings.Contains(","+opts+",", ",inline,") {
			if ft, ok := yamlField(f.Type, k); ok {
				return ft, true
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		if name == k {
			return f.Type, true
		}
	}
	return nil, false
}

func join(key, k string) string {
	if key == "" {
		return k
	}
	return key + "." + k
}
