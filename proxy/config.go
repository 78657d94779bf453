package proxy

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/proxy/source"
)

// DefaultTimeout bounds one tools/call to a downstream server when its
// config sets no timeout.
const DefaultTimeout = 60 * time.Second

// Retention policies for a downstream server's results (ServerConfig.Retain).
const (
	// RetainHash keeps only the SHA-256 of each result in its call entry.
	RetainHash = "hash"
	// RetainFull also keeps each result, in the form its SHA-256 is of
	// (RFC 8785, or as received: log.ResultSum), as a blob named by it.
	RetainFull = "full"
)

// A ServerConfig describes one downstream MCP server, as it appears under
// "servers:" in provlog's YAML config (DESIGN §4). Exactly one of Command
// (a stdio server the proxy starts and restarts) and URL (a streamable HTTP
// server) is set.
type ServerConfig struct {
	// ID names the server in call entries, in namespaced tool and prompt
	// names (<id>__<name>) and in namespaced resource URIs (<id>+<uri>). It
	// is lowercase letters, digits, '.' and '-', starting with a letter, so
	// that it can head a URI scheme; "provlog" is reserved.
	ID string `yaml:"id"`

	// Command is the program and its arguments (stdio servers).
	Command []string `yaml:"command"`
	// Env is added to the proxy's own environment for Command.
	Env map[string]string `yaml:"env"`
	// Dir is Command's working directory (default: the proxy's).
	Dir string `yaml:"dir"`

	// URL is a streamable HTTP endpoint (http or https).
	URL string `yaml:"url"`
	// Headers are sent with every HTTP request to URL, e.g. Authorization.
	Headers map[string]string `yaml:"headers"`

	// Redact lists argument field names whose values are replaced by
	// "[redacted]" at any depth of a call's arguments before anything is
	// hashed, logged or written (exact, case-sensitive key match). The
	// downstream server still receives the real values. Each is a
	// member's name, not a path: one starting with '/' (a JSON pointer)
	// is refused.
	Redact []string `yaml:"redact"`
	// RedactIgnoreCase makes Redact match field names in any case
	// ("password" also redacts "Password" and "PASSWORD").
	RedactIgnoreCase bool `yaml:"redact_ignore_case"`
	// Retain is RetainHash (the default) or RetainFull.
	Retain string `yaml:"retain"`
	// Prefix replaces "<id>__" in front of tool and prompt names. An empty
	// string keeps the names (and resource URIs) as the server gives them;
	// the proxy then refuses to start if two servers would collide.
	Prefix *string `yaml:"prefix"`
	// Timeout bounds each tools/call (default DefaultTimeout).
	Timeout time.Duration `yaml:"timeout"`
	// Protocol pins the one MCP revision the server is spoken to in,
	// "2025-11-25" or "2026-07-28". Empty (the default): each client's own
	// where the server speaks it (a stdio server gets a second session,
	// in a process of its own, once a 2026-07-28 client calls it); older
	// clients' calls on a 2026-07-28 session are bridged (bridge.go).
	Protocol string `yaml:"protocol"`

	// Source says how to learn which data release the server serves;
	// each call entry records it as "release" (see package source).
	// nil: no release.
	Source *source.Config `yaml:"source"`
	// Replay marks the server's tools safe to re-run for `provlog replay`
	// (besides tools the server annotates read-only).
	Replay bool `yaml:"replay"`
	// ReplayIgnore lists, per tool ("*" for all), RFC 6901 JSON pointers
	// into the result that replay does not compare (volatile fields).
	ReplayIgnore map[string][]string `yaml:"replay_ignore"`
}

var idPattern = regexp.MustCompile(`^[a-z][a-z0-9.-]{0,62}$`)

// toolPrefix returns the prefix of the server's tool and prompt names.
func (c *ServerConfig) toolPrefix() string {
	if c.Prefix != nil {
		return *c.Prefix
	}
	return c.ID + "__"
}

// uriPrefix returns what goes in front of the server's resource URIs: a
// URI scheme prefix "<id>+", so "file:///a" becomes "<id>+file:///a". The
// result is still an absolute URI (RFC 3986 schemes may contain '+'), and
// resource templates stay templates. An empty tool prefix keeps URIs too.
func (c *ServerConfig) uriPrefix() string {
	if c.Prefix != nil && *c.Prefix == "" {
		return ""
	}
	return c.ID + "+"
}

func (c *ServerConfig) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

// check reports what is wrong with one server's config.
func (c *ServerConfig) check() error {
	if !idPattern.MatchString(c.ID) {
		return fmt.Errorf("server id %q: use lowercase letters, digits, '.' and '-', starting with a letter (it heads tool names and URI schemes)", c.ID)
	}
	if c.ID == "provlog" {
		return errors.New(`server id "provlog" is reserved for the proxy's own tools`)
	}
	switch {
	case len(c.Command) > 0 && c.URL != "":
		return fmt.Errorf("server %q: set either command or url, not both", c.ID)
	case len(c.Command) == 0 && c.URL == "":
		return fmt.Errorf("server %q: set command (stdio) or url (streamable HTTP)", c.ID)
	case len(c.Command) > 0:
		if c.Command[0] == "" {
			return fmt.Errorf("server %q: command is empty", c.ID)
		}
		if len(c.Headers) > 0 {
			return fmt.Errorf("server %q: headers apply only to url servers", c.ID)
		}
	default:
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			// Redacted: the error reaches stderr, and a url may carry
			// credentials.
			return fmt.Errorf("server %q: url %q is not an http(s) URL", c.ID, log.RedactURL(c.URL))
		}
		if len(c.Env) > 0 || c.Dir != "" {
			return fmt.Errorf("server %q: env and dir apply only to command servers", c.ID)
		}
		if err := log.CheckHeaders(c.Headers); err != nil {
			return fmt.Errorf("server %q: headers: %w", c.ID, err)
		}
	}
	switch c.Retain {
	case "", RetainHash, RetainFull:
	default:
		return fmt.Errorf("server %q: retain %q: want %q or %q", c.ID, c.Retain, RetainHash, RetainFull)
	}
	switch c.Protocol {
	case "", downstreamProtocolVersion, statelessProtocol:
	default:
		return fmt.Errorf("server %q: protocol %q: want %q or %q (or none: each client's own)", c.ID, c.Protocol, downstreamProtocolVersion, statelessProtocol)
	}
	if c.Source != nil {
		if _, err := source.New(*c.Source, nil, nil); err != nil {
			return fmt.Errorf("server %q: %w", c.ID, err)
		}
	}
	for tool, ps := range c.ReplayIgnore {
		for _, p := range ps {
			if p != "" && !strings.HasPrefix(p, "/") {
				return fmt.Errorf("server %q: replay_ignore %s: %q is not a JSON pointer (RFC 6901: empty or starting with '/')", c.ID, tool, p)
			}
		}
	}
	for _, f := range c.Redact {
		if f == "" {
			return fmt.Errorf("server %q: redact lists an empty field name", c.ID)
		}
		if strings.HasPrefix(f, "/") {
			// A JSON pointer (replay_ignore's form) names no member:
			// the value it was meant for would be written as sent.
			last := f[strings.LastIndexByte(f, '/')+1:]
			last = strings.NewReplacer("~1", "/", "~0", "~").Replace(last)
			return fmt.Errorf("server %q: redact %q is a path; redact names a member, matched at any depth: list %q", c.ID, f, last)
		}
	}
	if p := c.toolPrefix(); p != "" && !toolNamePattern.MatchString(p) {
		return fmt.Errorf("server %q: prefix %q may hold only letters, digits, '_', '-' and '.'", c.ID, p)
	}
	return nil
}

var toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// CheckServers reports what is wrong with a list of downstream servers:
// each one's fields, and ids or tool prefixes used twice. cmd calls it
// while loading the config, before opening anything.
func CheckServers(servers []ServerConfig) error {
	ids := map[string]bool{}
	prefixes := map[string]string{}
	for i := range servers {
		c := &servers[i]
		if err := c.check(); err != nil {
			return fmt.Errorf("%w", err)
		}
		if ids[c.ID] {
			return fmt.Errorf("id %q is used twice", c.ID)
		}
		ids[c.ID] = true
		p := c.toolPrefix()
		if p == "" {
			continue
		}
		if other, ok := prefixes[p]; ok {
			return fmt.Errorf("%q and %q share the prefix %q", other, c.ID, p)
		}
		if strings.HasPrefix(p, ownPrefix) {
			return fmt.Errorf("%q: prefix %q overlaps the proxy's own %q", c.ID, p, ownPrefix)
		}
		prefixes[p] = c.ID
	}
	return nil
}

// redactURL is text (a connection's or a call's error, which quotes the
// request's URL as net/http made it) with c's url redacted
// (log.RedactURL): the credentials a url may carry in its query or
// userinfo never leave the process in an error.
func (c *ServerConfig) redactURL(text string) string {
	if c.URL == "" || !strings.Contains(text, "://") {
		return text
	}
	forms := []string{c.URL}
	if u, err := url.Parse(c.URL); err == nil {
		forms = append(forms, u.String())
		if _, ok := u.User.Password(); ok {
			// net/http's url.Error shows the password as "***".
			forms = append(forms, strings.Replace(u.String(), u.User.String()+"@", u.User.Username()+":***@", 1))
		}
	}
	shown := log.RedactURL(c.URL)
	for _, f := range forms {
		text = strings.ReplaceAll(text, f, shown)
	}
	return text
}

// credentials returns the credentials c gives its server, in the forms a
// server may echo them in (appendSecrets): the values of its headers and
// environment variables whose names name one (credentialName; a header's
// value without its scheme too, log.HeaderCredentials), and its URL's
// (log.URLCredentials). A server that quotes one (a gateway's
// "invalid key ...", a line a server prints as it starts) has it scrubbed
// as a redacted value is. Values too short to cut out are no credential
// and are left out.
func (c *ServerConfig) credentials() []string {
	var vals []string
	for k, v := range c.Headers {
		if credentialName(k) {
			vals = append(vals, log.HeaderCredentials(v)...)
		}
	}
	for k, v := range c.Env {
		if credentialName(k) {
			vals = append(vals, v)
		}
	}
	vals = append(vals, log.URLCredentials(c.URL)...)
	var out []string
	for _, v := range vals {
		if len(v) >= minSecretLen {
			out = appendSecrets(out, v)
		}
	}
	return out
}

// credentialName reports whether a header's or an environment variable's
// name says it holds a credential (Authorization, X-Api-Key, GITHUB_TOKEN,
// DB_PASSWORD, ...).
func credentialName(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"auth", "key", "token", "secret", "pass", "credential", "cookie", "session", "signature"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}
