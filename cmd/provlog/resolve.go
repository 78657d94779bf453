package main

// `provlog resolve` and `provlog resolvers`: data-source releases
// (package proxy/source) from the command line.

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/proxy/source"
)

// optFlags collects repeated --opt k=v.
type optFlags map[string]string

func (o optFlags) String() string { return fmt.Sprint(map[string]string(o)) }

func (o optFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not k=v", s)
	}
	o[k] = v
	return nil
}

func runResolve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("resolve", stderr)
	opts := optFlags{}
	fs.Var(opts, "opt", "preset option k=v (repeatable): base=URL, db=, ontology=; or a generic field: type=, url=, path=, header=, value=, match=")
	// NAME may come before the flags.
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args, 1); err != nil {
		return err
	}
	if name == "" && fs.NArg() == 1 {
		name = fs.Arg(0)
	}
	if name == "" {
		return usageErr("give a resolver NAME (see provlog resolvers)")
	}
	cfg := source.Config{Preset: name, Options: map[string]string{}}
	if _, ok := source.Presets[name]; !ok {
		cfg = source.Config{Type: name, Options: map[string]string{}}
	}
	fields := map[string]*string{"type": &cfg.Type, "url": &cfg.URL, "path": &cfg.Path,
		"header": &cfg.Header, "value": &cfg.Value, "match": &cfg.Match}
	for k, v := range opts {
		switch f, ok := fields[k]; {
		case ok:
			*f = v
		case k == "command":
			cfg.Command = strings.Fields(v)
		default:
			cfg.Options[k] = v
		}
	}
	r, err := source.New(cfg, nil, nil)
	if err != nil {
		return err
	}
	rel, err := r.Try(ctx, nil)
	if err != nil {
		return fmt.Errorf("no release from %s: %w", log.RedactURL(r.Config().URL), err)
	}
	fmt.Fprintln(stdout, rel)
	return nil
}

func runResolvers(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("resolvers", stderr)
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "generic: http-json (url, path), http-header (url, header), field (path in the tool result), static (value), exec (command)")
	for _, n := range source.Names() {
		p := source.Presets[n]
		var o []string
		for k, v := range p.Options {
			o = append(o, k+"="+v)
		}
		fmt.Fprintf(stdout, "%-15s %-12s %s", n, p.Type, p.Help)
		if len(o) > 0 {
			fmt.Fprintf(stdout, " [default %s]", strings.Join(o, " "))
		}
		fmt.Fprintln(stdout)
	}
	return nil
}
