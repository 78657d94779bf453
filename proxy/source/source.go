// Package source learns which data release a downstream server serves,
// so that a call entry can say "UniProt 2025_01" and a replay can tell a
// changed result from a changed source.
//
// # Resolvers
//
// A [Config] (the per-server `source:` key of provlog's config) names one
// of five generic resolvers:
//
//	http-json    GET (or POST Body to) URL, take the value at Path
//	http-header  GET URL, take the response header Header
//	field        take the value at Path in the call's own result
//	static       Value, as written
//	exec         run Command; its first line of output is the release
//
// Path is dotted ("einforesult.dbinfo.0.dbbuild"; numbers index arrays,
// "" is the whole body, which need not be JSON) or a template of dotted
// paths ("{data.meta.dataVersion.year}.{data.meta.dataVersion.month}").
// Match, if set, is a regular expression applied to the value; its first
// group (or the whole match) is the release.
//
// # Presets
//
// [Presets] are configurations of the generic resolvers for common
// life-science sources; Options fill their placeholders ({db},
// {ontology}) and "base" is the URL their paths go under, its query kept
// (for mirrors, gateways that want a key, and tests).
//
// # Failure
//
// A resolver never fails a call: an error or a timeout gives no release
// and a log line. Answers are cached for TTL (default 10 minutes).
package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/provlog/provlog/log"
)

// Resolver types.
const (
	TypeHTTPJSON   = "http-json"
	TypeHTTPHeader = "http-header"
	TypeField      = "field"
	TypeStatic     = "static"
	TypeExec       = "exec"
)

// Defaults.
const (
	DefaultTimeout = 5 * time.Second
	DefaultTTL     = 10 * time.Minute
	maxBody        = 1 << 20
	maxRelease     = 200
)

// Config is one server's `source:`.
type Config struct {
	// Preset names an entry of [Presets]; the fields below override it.
	Preset  string            `yaml:"preset" json:"preset,omitempty"`
	Type    string            `yaml:"type" json:"type,omitempty"`
	URL     string            `yaml:"url" json:"url,omitempty"`
	Method  string            `yaml:"method" json:"method,omitempty"`
	Body    string            `yaml:"body" json:"body,omitempty"`
	Headers map[string]string `yaml:"headers" json:"headers,omitempty"`
	Path    string            `yaml:"path" json:"path,omitempty"`
	Header  string            `yaml:"header" json:"header,omitempty"`
	Value   string            `yaml:"value" json:"value,omitempty"`
	Command []string          `yaml:"command" json:"command,omitempty"`
	Match   string            `yaml:"match" json:"match,omitempty"`
	// Options fill {name} placeholders in URL and Body; "base" is the
	// URL the URL's path and query go under (log.JoinURL).
	Options map[string]string `yaml:"options" json:"options,omitempty"`
	Timeout time.Duration     `yaml:"timeout" json:"timeout,omitempty"`
	TTL     time.Duration     `yaml:"ttl" json:"ttl,omitempty"`
	// Help describes a preset.
	Help string `yaml:"-" json:"help,omitempty"`
}

// Presets are the built-in sources, as configurations of the generic
// resolvers. Each follows the source's documented API.
var Presets = map[string]Config{
	"eutils": {Type: TypeHTTPJSON, URL: "https://eutils.ncbi.nlm.nih.gov/entrez/eutils/einfo.fcgi?db={db}&retmode=json", Path: "einforesult.dbinfo.0.dbbuild",
		Options: map[string]string{"db": "pubmed"}, Help: "NCBI E-utilities einfo dbbuild of database {db}"},
	"geo": {Type: TypeHTTPJSON, URL: "https://eutils.ncbi.nlm.nih.gov/entrez/eutils/einfo.fcgi?db=gds&retmode=json", Path: "einforesult.dbinfo.0.dbbuild",
		Help: "NCBI GEO DataSets (einfo db=gds) dbbuild"},
	"opentargets": {Type: TypeHTTPJSON, URL: "https://api.platform.opentargets.org/api/v4/graphql", Method: "POST",
		Headers: map[string]string{"Content-Type": "application/json"},
		Body:    `{"query":"{ meta { dataVersion { year month } } }"}`,
		Path:    "{data.meta.dataVersion.year}.{data.meta.dataVersion.month}", Help: "Open Targets Platform GraphQL meta.dataVersion"},
	"clinicaltrials": {Type: TypeHTTPJSON, URL: "https://clinicaltrials.gov/api/v2/version", Path: "dataTimestamp", Help: "ClinicalTrials.gov API v2 /version dataTimestamp"},
	"uniprot": {Type: TypeHTTPHeader, URL: "https://rest.uniprot.org/uniprotkb/search?query=accession:P04637&size=1&fields=accession", Header: "X-UniProt-Release",
		Help: "UniProt REST X-UniProt-Release header"},
	"ensembl": {Type: TypeHTTPJSON, URL: "https://rest.ensembl.org/info/data?content-type=application/json", Path: "releases.0", Help: "Ensembl REST /info/data"},
	"chembl":  {Type: TypeHTTPJSON, URL: "https://www.ebi.ac.uk/chembl/api/data/status.json", Path: "chembl_db_version", Help: "ChEMBL web services status"},
	"string":  {Type: TypeHTTPJSON, URL: "https://string-db.org/api/json/version", Path: "0.string_version", Help: "STRING API /json/version"},
	"reactome": {Type: TypeHTTPJSON, URL: "https://reactome.org/ContentService/data/database/version", Path: "",
		Help: "Reactome ContentService database version"},
	"hgnc": {Type: TypeHTTPJSON, URL: "https://rest.genenames.org/info", Headers: map[string]string{"Accept": "application/json"}, Path: "lastModified",
		Help: "HGNC REST /info lastModified"},
	"ols": {Type: TypeHTTPJSON, URL: "https://www.ebi.ac.uk/ols4/api/ontologies/{ontology}", Path: "config.version",
		Options: map[string]string{"ontology": "efo"}, Help: "EBI OLS ontology {ontology} config.version"},
	"kegg": {Type: TypeHTTPJSON, URL: "https://rest.kegg.jp/info/{db}", Path: "", Match: `Release (\S+)`,
		Options: map[string]string{"db": "kegg"}, Help: "KEGG REST /info/{db} release line"},
}

// Names returns the preset names, sorted.
func Names() []string {
	var n []string
	for k := range Presets {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// A Resolver resolves one server's release.
type Resolver struct {
	cfg    Config
	match  *regexp.Regexp
	client *http.Client
	logger *slog.Logger

	mu      sync.Mutex
	cached  string
	expires time.Time
}

// New checks cfg (after applying its preset) and returns its resolver.
// client nil means http.DefaultClient; logger nil discards.
func New(cfg Config, client *http.Client, logger *slog.Logger) (*Resolver, error) {
	c, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	r := &Resolver{cfg: c, client: client, logger: logger}
	if r.client == nil {
		r.client = http.DefaultClient
	}
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	if c.Match != "" {
		if r.match, err = regexp.Compile(c.Match); err != nil {
			return nil, fmt.Errorf("source: match: %w", err)
		}
	}
	return r, nil
}

// resolve applies the preset and options and checks the result.
func (cfg Config) resolve() (Config, error) {
	c := cfg
	if cfg.Preset != "" {
		var err error
		if c, err = cfg.withPreset(); err != nil {
			return c, err
		}
	}
	for k, v := range c.Options {
		if k == "base" {
			continue
		}
		c.URL = strings.ReplaceAll(c.URL, "{"+k+"}", url.QueryEscape(v))
		c.Body = strings.ReplaceAll(c.Body, "{"+k+"}", v)
	}
	if b := c.Options["base"]; b != "" && c.URL != "" {
		// The URL's path and query go under base, whose own query (a
		// key a mirror wants) is kept.
		u, err := url.Parse(c.URL)
		if err != nil {
			return c, fmt.Errorf("source: url %q does not parse", log.RedactURL(c.URL))
		}
		ref := u.EscapedPath()
		if u.RawQuery != "" {
			ref += "?" + u.RawQuery
		}
		if c.URL, err = log.JoinURL(b, ref); err != nil {
			return c, fmt.Errorf("source: base: %w", err)
		}
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.TTL <= 0 {
		c.TTL = DefaultTTL
	}
	return c, c.check()
}

// withPreset returns cfg's preset with cfg's options added to the
// preset's and cfg's other fields, where set, in place of the preset's.
func (cfg Config) withPreset() (Config, error) {
	p, ok := Presets[cfg.Preset]
	if !ok {
		return cfg, fmt.Errorf("source: unknown preset %q (known: %s)", cfg.Preset, strings.Join(Names(), ", "))
	}
	c := p
	opts := map[string]string{}
	for k, v := range p.Options {
		opts[k] = v
	}
	for k, v := range cfg.Options {
		opts[k] = v
	}
	c.Options = opts
	over := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	over(&c.Type, cfg.Type)
	over(&c.URL, cfg.URL)
	over(&c.Path, cfg.Path)
	over(&c.Header, cfg.Header)
	over(&c.Match, cfg.Match)
	if cfg.Timeout > 0 {
		c.Timeout = cfg.Timeout
	}
	if cfg.TTL > 0 {
		c.TTL = cfg.TTL
	}
	return c, nil
}

// check checks a resolved configuration for what its type needs.
func (cfg Config) check() error {
	switch cfg.Type {
	case TypeHTTPJSON, TypeHTTPHeader:
		if u, err := url.Parse(cfg.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return fmt.Errorf("source: %s needs an http(s) url, not %q", cfg.Type, log.RedactURL(cfg.URL))
		}
		if _, opt, ok := strings.Cut(cfg.URL, "{"); ok {
			opt, _, _ = strings.Cut(opt, "}")
			return fmt.Errorf("source: url %q has an unfilled option {%s}", log.RedactURL(cfg.URL), truncate(opt))
		}
		if cfg.Type == TypeHTTPHeader && cfg.Header == "" {
			return errors.New("source: http-header needs header")
		}
	case TypeField:
		if cfg.Path == "" {
			return errors.New("source: field needs path (a dotted path in the tool result)")
		}
	case TypeStatic:
		if cfg.Value == "" {
			return errors.New("source: static needs value")
		}
	case TypeExec:
		if len(cfg.Command) == 0 || cfg.Command[0] == "" {
			return errors.New("source: exec needs command")
		}
	default:
		return fmt.Errorf("source: type %q: want preset or one of http-json, http-header, field, static, exec", cfg.Type)
	}
	return nil
}

// Config returns the resolved configuration.
func (r *Resolver) Config() Config { return r.cfg }

// Resolve returns the release, or "" when it cannot be learned (the
// reason is logged). result is the call's result, for type field.
func (r *Resolver) Resolve(ctx context.Context, result json.RawMessage) string {
	rel, err := r.Try(ctx, result)
	if err != nil {
		r.logger.Warn("release: no release", "type", r.cfg.Type, "url", log.RedactURL(r.cfg.URL), "error", err)
		return ""
	}
	return rel
}

// Try is Resolve with the error.
func (r *Resolver) Try(ctx context.Context, result json.RawMessage) (string, error) {
	if r.cfg.Type == TypeField {
		v, err := extract(result, r.cfg.Path)
		if err != nil {
			return "", err
		}
		return r.finish(v)
	}
	r.mu.Lock()
	if r.cached != "" && time.Now().Before(r.expires) {
		defer r.mu.Unlock()
		return r.cached, nil
	}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	var v string
	var err error
	switch r.cfg.Type {
	case TypeStatic:
		v = r.cfg.Value
	case TypeExec:
		var out []byte
		out, err = exec.CommandContext(ctx, r.cfg.Command[0], r.cfg.Command[1:]...).Output()
		if err == nil {
			v, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
		}
	default:
		v, err = r.fetch(ctx)
	}
	if err != nil {
		return "", err
	}
	rel, err := r.finish(v)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	r.cached, r.expires = rel, time.Now().Add(r.cfg.TTL)
	r.mu.Unlock()
	return rel, nil
}

func (r *Resolver) finish(v string) (string, error) {
	v = strings.TrimSpace(v)
	if r.match != nil {
		m := r.match.FindStringSubmatch(v)
		if m == nil {
			return "", fmt.Errorf("%q does not match %s", truncate(v), r.cfg.Match)
		}
		v = m[0]
		if len(m) > 1 {
			v = m[1]
		}
	}
	if v == "" {
		return "", errors.New("empty release")
	}
	return truncate(v), nil
}

func truncate(s string) string {
	if len(s) > maxRelease {
		return s[:maxRelease]
	}
	return s
}

func (r *Resolver) fetch(ctx context.Context) (string, error) {
	method := r.cfg.Method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if r.cfg.Body != "" {
		body = strings.NewReader(r.cfg.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.cfg.URL, body)
	if err != nil {
		return "", err
	}
	for k, v := range r.cfg.Headers {
		req.Header.Set(k, v)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return "", log.RedactURLError(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return "", err
	}
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("%s answered %s", log.RedactURL(r.cfg.URL), resp.Status)
	}
	if r.cfg.Type == TypeHTTPHeader {
		h := resp.Header.Get(r.cfg.Header)
		if h == "" {
			return "", fmt.Errorf("%s sent no %s header", log.RedactURL(r.cfg.URL), r.cfg.Header)
		}
		return h, nil
	}
	if r.cfg.Path == "" && !json.Valid(b) {
		return string(b), nil
	}
	return extract(b, r.cfg.Path)
}

var tmplPart = regexp.MustCompile(`\{([^{}]*)\}`)

// extract takes the value at a dotted path (or a template of them) in doc.
func extract(doc []byte, path string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("not JSON: %w", err)
	}
	if strings.Contains(path, "{") {
		var firstErr error
		out := tmplPart.ReplaceAllStringFunc(path, func(m string) string {
			s, err := at(v, m[1:len(m)-1])
			if err != nil && firstErr == nil {
				firstErr = err
			}
			return s
		})
		return out, firstErr
	}
	return at(v, path)
}

func at(v any, path string) (string, error) {
	if path != "" {
		for _, k := range strings.Split(path, ".") {
			switch x := v.(type) {
			case map[string]any:
				var ok bool
				if v, ok = x[k]; !ok {
					return "", fmt.Errorf("no %q at %s", k, path)
				}
			case []any:
				i, err := strconv.Atoi(k)
				if err != nil || i < 0 || i >= len(x) {
					return "", fmt.Errorf("no index %q at %s", k, path)
				}
				v = x[i]
			default:
				return "", fmt.Errorf("nothing at %s", path)
			}
		}
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		return strconv.FormatBool(x), nil
	case nil:
		return "", fmt.Errorf("null at %q", path)
	default:
		b, _ := json.Marshal(x)
		return string(b), nil
	}
}
