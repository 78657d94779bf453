package proxy

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"iter"
	"net/url"
	"slices"
	"strings"
	"sync"

	"golang.org/x/text/unicode/norm"

	"github.com/provlog/provlog/log"
)

// Redacted replaces the value of every redacted argument field.
const Redacted = "[redacted]"

// minSecretLen is the shortest redacted value that is scrubbed out of a
// text where it appears. A shorter one would match too much ordinary text
// to be cut out of it, so a text that holds it is withheld whole.
const minSecretLen = 4

// Withheld replaces a text (an error message, a string of a kept result,
// a line of a server's stderr) that holds a redacted value shorter than
// minSecretLen.
const Withheld = "[withheld: it may hold a redacted value too short to scrub out]"

// redactedName returns whether a member or parameter name is one of
// fields (in any case, if fold).
func redactedName(fields []string, fold bool) func(string) bool {
	set := make(map[string]bool, len(fields))
	for _, f := range fields {
		if fold {
			f = foldName(f)
		}
		set[f] = true
	}
	return func(k string) bool {
		if fold {
			k = foldName(k)
		}
		return set[k]
	}
}

// foldName is s with each character made the least of those equal to
// it in another case, so that two names are equal folded exactly when
// strings.EqualFold says they are. Lower case is not enough: "ſecret"
// (long s) and "secret" are one name to EqualFold and to encoding/json,
// as a server decodes its arguments, but not in lower case.
func foldName(s string) string { return strings.Map(foldRune, s) }

// redactURI returns uri with the value of every query parameter named in
// fields (in any case, if fold) replaced by Redacted, and the values it
// replaced (as written and unescaped), to scrub out of texts as an
// argument's: a resource URI such as file:///x?token=SECRET is recorded
// in its resource.read entry, and the server's redact list names the
// secret's field. The rest of uri is kept byte for byte (no parsing that
// would normalise it); the fragment is not a query and is kept.
func redactURI(uri string, fields []string, fold bool) (string, []string) {
	q := strings.IndexByte(uri, '?')
	if q < 0 || len(fields) == 0 {
		return uri, nil
	}
	query, frag, hasFrag := strings.Cut(uri[q+1:], "#")
	redacted := redactedName(fields, fold)
	var secrets []string
	params := strings.Split(query, "&")
	for i, kv := range params {
		k, v, ok := strings.Cut(kv, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			name = k
		}
		if !ok || !redacted(name) {
			continue
		}
		secrets = append(secrets, v)
		if u, err := url.QueryUnescape(v); err == nil && u != v {
			secrets = append(secrets, u)
		}
		secrets = append(secrets, normalForms(v)[1:]...) // as in arguments (appendSecrets)
		params[i] = k + "=" + Redacted
	}
	if secrets == nil {
		return uri, nil
	}
	out := uri[:q+1] + strings.Join(params, "&")
	if hasFrag {
		out += "#" + frag
	}
	return out, secrets
}

// redactArgs parses a call's arguments and replaces the value of every
// member named in fields (in any case, if fold), at any depth (objects
// inside arrays included), and of every such query parameter of a string
// (a URL), with Redacted. Absent or null arguments become an empty object. Numbers
// are kept as written (json.Number). It also returns the redacted values'
// texts (strings as they are, other values as JSON), so that they can be
// scrubbed from error texts a downstream may echo them in.
func redactArgs(raw json.RawMessage, fields []string, fold bool) (any, []string, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return map[string]any{}, nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, nil, fmt.Errorf("arguments are not JSON: %w", err)
	}
	if dec.More() {
		return nil, nil, fmt.Errorf("arguments hold more than one JSON value")
	}
	if len(fields) == 0 {
		return v, nil, nil
	}
	redacted := redactedName(fields, fold)
	var secrets []string
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if redacted(k) {
					secrets = appendSecrets(secrets, x)
					v[k] = Redacted
				} else {
					v[k] = walk(x)
				}
			}
		case []any:
			for i, x := range v {
				v[i] = walk(x)
			}
		case string:
			// A URL an argument holds (a fetch tool's) has the
			// values of its query parameters the list names
			// redacted, as a resource URI has (redactURI).
			if shown, in := redactURI(v, fields, fold); in != nil {
				for _, x := range in {
					secrets = appendSecrets(secrets, x)
				}
				return shown
			}
			// So does a JSON text one holds (a request's body), written
			// again if it had any.
			if inner, ok := jsonText(v); ok {
				n := len(secrets)
				if inner = walk(inner); len(secrets) > n {
					var buf bytes.Buffer
					enc := json.NewEncoder(&buf)
					enc.SetEscapeHTML(false)
					if enc.Encode(inner) == nil {
						return strings.TrimSuffix(buf.String(), "\n")
					}
					return Redacted
				}
			}
		}
		return v
	}
	return walk(v), secrets, nil
}

// jsonText returns the object or array s is the JSON text of, if it is
// one.
func jsonText(s string) (any, bool) {
	t := strings.TrimSpace(s)
	if t == "" || t[0] != '{' && t[0] != '[' {
		return nil, false
	}
	dec := json.NewDecoder(strings.NewReader(t))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return nil, false
	}
	return v, true
}

// appendSecrets adds the texts a redacted value could show up as: a
// string in each of Unicode's normalization forms too (a server that
// normalizes what it is sent, or a file system that does, echoes it in
// another form than the client wrote), each as the encodings below write
// it.
func appendSecrets(secrets []string, v any) []string {
	switch v := v.(type) {
	case string:
		for _, f := range normalForms(v) {
			secrets = appendStringForms(secrets, f)
		}
	case map[string]any:
		for k, x := range v {
			// The names of an object redacted whole are its too: a
			// server that echoes it writes them. A name shorter than
			// minSecretLen is not: it is the object's shape ("id",
			// "pw"), and taking it would withhold every text holding it.
			if len(k) >= minSecretLen {
				secrets = appendSecrets(secrets, k)
			}
			secrets = appendSecrets(secrets, x)
		}
	case []any:
		for _, x := range v {
			secrets = appendSecrets(secrets, x)
		}
	case nil, bool:
	default:
		secrets = append(secrets, fmt.Sprint(v)) // a number, never empty
	}
	return secrets
}

// unicodeForms are Unicode's normalization forms.
var unicodeForms = []norm.Form{norm.NFC, norm.NFD, norm.NFKC, norm.NFKD}

// normalForms returns s and each other text its normalization forms make
// of it (none for a text of ASCII alone).
func normalForms(s string) []string {
	out := []string{s}
	for _, f := range unicodeForms {
		if n := f.String(s); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// appendStringForms adds v and the texts the encodings a server may
// echo it in make of it.
func appendStringForms(secrets []string, v string) []string {
	if v != "" {
		secrets = append(secrets, v)
	}
	esc := v
	if b, err := json.Marshal(v); err == nil {
		esc = string(b[1 : len(b)-1])
	}
	if esc != v {
		secrets = append(secrets, esc) // as escaped inside JSON text
	}
	if lower := asciiEscaped(esc, `\u%04x`); lower != esc {
		// As a JSON text of only ASCII writes it (Python's
		// json.dumps), in either case of hex.
		secrets = append(secrets, lower, asciiEscaped(esc, `\u%04X`))
	}
	if len(v) >= minSecretLen {
		// As hex (a key or a digest's input shown back): either case,
		// as every secret is matched (cutSecrets). A shorter value's
		// hex would be found in hex of anything (a digest) too often.
		secrets = append(secrets, hex.EncodeToString([]byte(v)))
	}
	q, p := url.QueryEscape(v), url.PathEscape(v) // as a URL a server builds holds it
	if q != v {
		secrets = append(secrets, q)
	}
	if p != v && p != q {
		secrets = append(secrets, p)
	}
	return secrets
}

// scrub is scrubText for a text provlog writes that a downstream or a
// client made (an error text, a line of a server's stderr): every secret
// in s replaced with Redacted, or s Withheld or Redacted whole.
func scrub(s string, secrets []string) string {
	if len(secrets) == 0 {
		return s
	}
	return scrubText(s, newCoreSet(base64Cores(secrets)), secrets)
}

// cutSecrets replaces every secret in s, in any case (foldCase), with
// Redacted, or returns Withheld if s holds a secret too short to cut out
// (secrets are never empty).
func cutSecrets(s string, secrets []string) string {
	fs, offs := foldCase(s)
	fx := folded(secrets)
	for k, x := range secrets {
		if len(x) < minSecretLen && indexFolded(fs, fx[k]) >= 0 {
			return Withheld
		}
	}
	// Every byte a secret covers is cut, a run of them as one Redacted:
	// cut one after another, a secret overlapping one cut before it was
	// no longer whole, and its other part stayed.
	var cut [][2]int
	for k, x := range secrets {
		if len(x) < minSecretLen {
			continue
		}
		x = fx[k]
		for i := 0; ; {
			j := indexFolded(fs[i:], x)
			if j < 0 {
				break
			}
			if offs == nil {
				cut = append(cut, [2]int{i + j, i + j + len(x)})
			} else {
				cut = append(cut, [2]int{offs[i+j], offs[i+j+len(x)]})
			}
			i += j + len(x)
		}
	}
	if len(cut) == 0 {
		return s
	}
	slices.SortFunc(cut, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
	var sb strings.Builder
	at := 0 // s[:at] is written or cut
	for k := 0; k < len(cut); {
		from, to := cut[k][0], cut[k][1]
		for k++; k < len(cut) && cut[k][0] < to; k++ {
			to = max(to, cut[k][1])
		}
		sb.WriteString(s[at:from])
		sb.WriteString(Redacted)
		at = to
	}
	sb.WriteString(s[at:])
	return sb.String()
}

// scrubJSON returns the canonical JSON text canon with every string and
// member name that holds a secret scrubbed (as scrub does) and every
// number whose text holds one, and every string that is or holds base64
// of bytes holding one (an image a server made of it, a requestState, an
// attachment in MIME's lines), replaced by Redacted, in canonical form
// again (compact with members sorted if canon is not in that form and
// holds a number that form writes as another, log.ExactNumbers), and
// whether that changed anything. Text that does not parse is returned as
// it is, with the secrets replaced bytewise.
func scrubJSON(canon []byte, secrets []string) ([]byte, bool) {
	if len(secrets) == 0 {
		return canon, false
	}
	cores := newCoreSet(base64Cores(secrets)) // once for each string of canon
	if !mayHoldSecret(canon, cores, secrets) {
		return canon, false
	}
	dec := json.NewDecoder(bytes.NewReader(canon))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return []byte(scrubText(string(canon), cores, secrets)), true
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			return scrubText(x, cores, secrets)
		case json.Number:
			for _, s := range secrets {
				if strings.Contains(string(x), s) {
					return Redacted
				}
			}
		case map[string]any:
			return scrubMembers(x, func(k string) string { return scrubText(k, cores, secrets) }, walk)
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(walk(v)); err != nil {
		return []byte(scrubText(string(canon), cores, secrets)), true
	}
	if log.ExactNumbers(buf.Bytes()) != nil {
		// A result hashed as received for its numbers (log.ResultSum)
		// is kept scrubbed with every digit; one in JCS form already
		// holds only numbers JCS writes as they are.
		if again, err := log.Canonicalize(canon); err != nil || !bytes.Equal(again, canon) {
			out := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
			return out, !bytes.Equal(out, canon)
		}
	}
	out, err := log.Canonicalize(buf.Bytes())
	if err != nil {
		return []byte(scrubText(string(canon), cores, secrets)), true
	}
	return out, !bytes.Equal(out, canon) // mayHoldSecret may have looked wider than the walk found
}

// scrubText is the one scanner of a text for secrets (cores: theirs,
// base64Cores): s with every secret cut out (cutSecrets), or Redacted
// whole if it is or holds base64 of bytes holding one (decodesToSecret),
// whether it holds the secret itself too or not, or if it holds one
// written with JSON's escapes (escapedViews: \u0053 for S in a JSON text
// a server quotes). It is linear in s.
func scrubText(s string, cores *coreSet, secrets []string) string {
	if decodesToSecret(s, cores, secrets) {
		return Redacted
	}
	out := cutSecrets(s, secrets)
	for _, v := range escapedViews(out) {
		if c := cutSecrets(v, secrets); c == Withheld {
			return Withheld
		} else if c != v || decodesToSecret(v, cores, secrets) {
			return Redacted
		}
	}
	return out
}

// scrubMembers returns the members of m under their names as name makes
// them, their values as walk makes them. Names that name makes equal to
// another (two that held a secret, or one that held it and one written
// "[redacted]") get a count after it, " (2)" and on, in the order of the
// names as they came: no member is lost, and what is kept does not
// depend on the order of a map. A name taken is tried at most twice (as
// a name with a count and as one of its own), so this is linear in m.
func scrubMembers(m map[string]any, name func(string) string, walk func(any) any) map[string]any {
	out := make(map[string]any, len(m))
	var renamed [][2]string // from, to
	for k, v := range m {
		if to := name(k); to != k {
			renamed = append(renamed, [2]string{k, to})
		} else {
			out[k] = walk(v)
		}
	}
	slices.SortFunc(renamed, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	next := map[string]int{} // the count to try next after each name
	for _, r := range renamed {
		to := r[1]
		for n := next[r[1]]; ; n++ {
			if n > 0 {
				to = fmt.Sprintf("%s (%d)", r[1], n+1)
			}
			if _, taken := out[to]; !taken {
				next[r[1]] = n + 1
				break
			}
		}
		out[to] = walk(m[r[0]])
	}
	return out
}

// mayHoldSecret reports whether the canonical JSON text canon may hold a
// secret or base64 of one (scrubJSON): whether it holds a secret or a
// core (read case-blind, coreFilter), or, with its line breaks
// unwrapped, a core. Unwrapping reads
// every backslash before an r or n (and, after a break, a t) as an
// escape, and one may be a string's own before base64 starting with that
// letter, so there a core is looked for without its first character.
func mayHoldSecret(canon []byte, cores *coreSet, secrets []string) bool {
	if holdsCore(cores.filter(), canon) {
		return true
	}
	// A secret in any case (foldCase); one with a backslash or a quote
	// (one as a client or a server escaped it) is escaped again in
	// canon's strings.
	fc, _ := foldCase(string(canon))
	if slices.ContainsFunc(secrets, func(s string) bool {
		f, _ := foldCase(s)
		if indexFolded(fc, f) >= 0 {
			return true
		}
		if !strings.ContainsAny(s, `\"`) {
			return false
		}
		f, _ = foldCase(jsonQuoted.Replace(s))
		return indexFolded(fc, f) >= 0
	}) {
		return true
	}
	for _, v := range escapedViews(string(canon)) { // a secret JSON-escaped
		fv, _ := foldCase(v)
		if holdsCore(cores.filter(), v) || slices.ContainsFunc(folded(secrets), func(f string) bool { return indexFolded(fv, f) >= 0 }) {
			return true
		}
	}
	if !bytes.Contains(canon, []byte(`\n`)) && !bytes.Contains(canon, []byte(`\r`)) {
		return false // no line break in any string
	}
	u := unwrap(string(canon), true)
	return holdsCore(cores.unwrappedFilter(), u)
}

// base64Alphabets are the encodings a result carries bytes in (an image's
// or a blob's data: standard; a URL's or a token's: URL-safe).
var base64Alphabets = []*base64.Encoding{base64.StdEncoding, base64.URLEncoding}

// base64Cores returns, for each secret of at least minSecretLen bytes, in
// each of its encodedCases, in each alphabet of base64Alphabets and at
// each of the three offsets it can start at in encoded bytes, the base64
// characters all of whose six bits are its own: a string holding none of
// them cannot encode a secret. (Whole groups of four would leave a secret
// of four bytes at offset one without a core: no group of it is all its
// own.)
func base64Cores(secrets []string) []string {
	var cores []string
	for _, s := range encodedCases(secrets) {
		for _, enc := range base64Alphabets {
			for k := range 3 {
				e := enc.EncodeToString([]byte(strings.Repeat("\x00", k) + s))
				// s's bits are 8k to 8(k+len(s)); character i holds 6i to 6i+6.
				cores = append(cores, e[(8*k+5)/6:8*(k+len(s))/6])
			}
		}
	}
	return cores
}

// decodesToSecret reports whether s holds base64 (in an alphabet of
// base64Alphabets, padded or not, whole or as a run of the alphabet's
// characters inside it: "st." + base64 of a secret, a server's
// requestState; broken into lines or not) of bytes that hold a secret of
// at least minSecretLen bytes. s is read with its line breaks unwrapped,
// once as it is and once as a JSON text inside it would break its lines
// (a backslash before an r or n may be either). Each is linear in s.
func decodesToSecret(s string, cores *coreSet, secrets []string) bool {
	lines := unwrap(s, false)
	if base64OfSecret(lines, cores, secrets) {
		return true
	}
	if escaped := unwrap(s, true); len(escaped) != len(lines) {
		return base64OfSecret(escaped, cores, secrets)
	}
	return false
}

// base64OfSecret is decodesToSecret for s without line breaks. Each run
// of an alphabet's characters that holds one of cores, read case-blind
// (coreFilter: with any of the value's ASCII letters' cases changed), is
// decoded from its first four characters and matched case-folded.
func base64OfSecret(s string, cores *coreSet, secrets []string) bool {
	f := cores.filter()
	if !holdsCore(f, s) {
		return false
	}
	for _, enc := range base64Alphabets {
		raw := enc.WithPadding(base64.NoPadding)
		for run := range base64Runs(s, enc) {
			if !holdsCore(f, run) {
				continue
			}
			// The run's first four characters are the offsets a group
			// can start at.
			for i := range min(4, len(run)) {
				b, _ := raw.DecodeString(run[i:]) // what decodes before an error is enough
				fb, _ := foldCase(string(b))
				for _, x := range secrets {
					if fx, _ := foldCase(x); len(x) >= minSecretLen && indexFolded(fb, fx) >= 0 {
						return true
					}
				}
			}
		}
	}
	return false
}

// base64Runs yields the runs of s of enc's characters.
func base64Runs(s string, enc *base64.Encoding) iter.Seq[string] {
	return func(yield func(string) bool) {
		start := -1
		for i := 0; i <= len(s); i++ {
			in := i < len(s) && inBase64Run(s[i], enc)
			switch {
			case in && start < 0:
				start = i
			case !in && start >= 0:
				if !yield(s[start:i]) {
					return
				}
				start = -1
			}
		}
	}
}

// inBase64Run reports whether c is one of enc's characters (of
// base64Alphabets).
func inBase64Run(c byte, enc *base64.Encoding) bool {
	switch {
	case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		return true
	case enc == base64.URLEncoding:
		return c == '-' || c == '_'
	}
	return c == '+' || c == '/'
}

// unwrap returns s without its line breaks, so that base64 broken into
// lines (MIME's and PEM's, 76 characters a line) reads as one run: CR
// and LF, and, if escaped, a backslash or several (JSON inside JSON)
// before an r or n, as a JSON text inside s breaks its lines. The spaces
// and tabs (if escaped, a backslash or several before a t too) after a
// break go with it: PEM inside YAML and an indented JSON text indent the
// lines after the first. It returns s itself if there are none.
func unwrap(s string, escaped bool) string {
	var b strings.Builder
	kept := 0 // s[kept:i] is still to be copied
	for i := 0; i < len(s); {
		end, ok := lineBreak(s, i, escaped)
		switch {
		case ok:
		case end > i:
			i = end // backslashes of their own
			continue
		default:
			i++
			continue
		}
		for next := end; next < len(s); end = next {
			if s[next] == ' ' || s[next] == '\t' {
				next++
			} else if next, ok = lineBreak(s, next, escaped); !ok {
				if next > end && next < len(s) && s[next] == 't' {
					next++ // an escaped tab
				} else {
					break
				}
			}
		}
		b.WriteString(s[kept:i])
		kept, i = end, end
	}
	if kept == 0 {
		return s
	}
	b.WriteString(s[kept:])
	return b.String()
}

// lineBreak reports whether a line break (of unwrap) starts at s[i], and
// where it ends; if not, where the backslashes starting there end
// (escaped) or i.
func lineBreak(s string, i int, escaped bool) (int, bool) {
	switch {
	case s[i] == '\r' || s[i] == '\n':
		return i + 1, true
	case s[i] != '\\' || !escaped:
		return i, false
	}
	end := i + 1
	for end < len(s) && s[end] == '\\' {
		end++
	}
	if end < len(s) && (s[end] == 'r' || s[end] == 'n') {
		return end + 1, true
	}
	return end, false
}

// callSecrets are the redacted values of one call, all its legs': what
// its client sent (arguments, inputResponses) and answered the server's
// requests with. A later leg (bridge.go's, park.go's, a 2026-07-28
// client's own retry) shares the set of the leg it continues, so that
// what the server echoes of an earlier leg's answer in a later leg's
// error or result is scrubbed too. A nil set is empty.
type callSecrets struct {
	mu   sync.Mutex
	list []string
}

// add adds secrets not in s yet.
func (s *callSecrets) add(secrets []string) {
	if s == nil || len(secrets) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range secrets {
		if !slices.Contains(s.list, x) {
			s.list = append(s.list, x)
		}
	}
}

// all returns the secrets added so far.
func (s *callSecrets) all() []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.list[:len(s.list):len(s.list)]
}
