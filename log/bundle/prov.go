package bundle

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
)

// Namespaces of the PROV document. Terms provlog defines live under ns;
// the records of one log under "urn:provlog:log:<origin>:".
const (
	ns      = "https://provlog.dev/ns#"
	provFmt = "2006-01-02T15:04:05.000000Z" // python-prov keeps microseconds
)

// groups are the PROV-JSON record groups the document uses, in the order
// they are written.
var groups = []string{
	"entity", "activity", "agent", "used", "wasGeneratedBy", "wasAssociatedWith",
	"wasAttributedTo", "wasInformedBy", "wasDerivedFrom", "wasInfluencedBy", "actedOnBehalfOf",
}

// provWriter builds a PROV-JSON document from entries in one pass without
// keeping them: each record group goes to its own temporary file, and
// [provWriter.finish] writes the groups one after another. Only the set of
// agents and release entities (a few per server and client) is kept.
type provWriter struct {
	dir     string
	origin  string
	mapping int // the PROV mapping version it writes (ProvMappingNoAuth, ...)
	files   map[string]*os.File
	bufs    map[string]*bufio.Writer
	count   map[string]int
	seen    map[string]bool // agents and releases already written
	prev    string          // the previous entry's activity
	open    map[uint64]bool // call entries whose call.result has not come yet
	err     error
}

func newProvWriter(origin string, mapping int) (*provWriter, error) {
	dir, err := os.MkdirTemp("", "provlog-prov-")
	if err != nil {
		return nil, fmt.Errorf("making a scratch dir for the PROV document: %w", err)
	}
	w := &provWriter{dir: dir, origin: origin, mapping: mapping, files: map[string]*os.File{}, bufs: map[string]*bufio.Writer{}, count: map[string]int{}, seen: map[string]bool{}, open: map[uint64]bool{}}
	for _, g := range groups {
		f, err := os.Create(filepath.Join(dir, g))
		if err != nil {
			w.close()
			return nil, err
		}
		w.files[g] = f
		w.bufs[g] = bufio.NewWriterSize(f, 64<<10)
	}
	return w, nil
}

func (w *provWriter) close() {
	for _, f := range w.files {
		f.Close()
	}
	os.RemoveAll(w.dir)
}

// qn is a qualified name as a PROV-JSON typed literal.
func qn(s string) map[string]string { return map[string]string{"$": s, "type": "prov:QUALIFIED_NAME"} }

// part is s escaped as one part of an id under the writer's mapping
// (local). local gives "_" for both "" and "_"; from
// ProvMappingDistinctIDs a lone "_" is escaped ("%5F"), so that no two
// names share an id; from ProvMappingPNLocal a last "." is ("%2E"), so
// that an id ending in the name is a PROV-N qualified name ("%" itself is
// escaped, so no other name gives "%2E").
func (w *provWriter) part(s string) string {
	if s == "_" && w.mapping >= ProvMappingDistinctIDs {
		return "%5F"
	}
	l := local(s)
	if strings.HasSuffix(l, ".") && w.mapping >= ProvMappingPNLocal {
		l = l[:len(l)-1] + "%2E"
	}
	return l
}

// local escapes s for the local part of a qualified name: letters,
// digits, '.', '_' and '-' stay, everything else is %XX; the empty
// string is "_" (as is "_": see part).
func local(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}

func (w *provWriter) rec(group, id string, attrs map[string]any) {
	if w.err != nil {
		return
	}
	b := w.bufs[group]
	if w.count[group] > 0 {
		b.WriteString(",\n")
	}
	w.count[group]++
	k, _ := json.Marshal(id)
	v, err := marshal(attrs)
	if err != nil {
		w.err = err
		return
	}
	b.Write(k)
	b.WriteByte(':')
	b.Write(v)
}

// rel writes an anonymous relation; its id is made from the entry index
// and a per-group letter so that regeneration gives the same ids.
func (w *provWriter) rel(group string, i uint64, n int, attrs map[string]any) {
	w.rec(group, "_:"+group+"."+strconv.FormatUint(i, 10)+"."+strconv.Itoa(n), attrs)
}

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func (w *provWriter) agent(id string, attrs map[string]any) string {
	if !w.seen[id] {
		w.seen[id] = true
		w.rec("agent", id, attrs)
	}
	return id
}

// actorAgent is the agent actor names as the actor of an entry of kind
// (or, kind "", as a task's new owner). From [ProvMappingOwnActors] on,
// provlog's own entries are by software agents with the role each plays
// ([ownRole]), so that a reader tells provlog acting on its own from the
// parties tokens name: log.GenesisActor's is [provWriter.recorder], the
// agent that records calls, since both are the sidecar; the others are
// log:provlog/<role>, agents of their own, apart from log:actor/<id>.
// An entry is provlog's only if provlog writes that kind as that id:
// before the reservation a client could be named provlog.retention or
// provlog.operator (provlog wrote as the latter only from its
// introduction), and a client's entry by one is a plain agent's. So is
// the "local" of the purge and replay entries of logs from before
// provlog.operator, since clients had that id as well and nothing in an
// entry tells the operator from them.
func (w *provWriter) actorAgent(actor, kind string) string {
	role := ""
	if w.mapping >= ProvMappingOwnActors {
		role = ownRole(actor, kind)
	}
	switch {
	case role == "recorder":
		return w.recorder()
	case role != "":
		return w.agent("log:provlog/"+role, map[string]any{"prov:type": qn("prov:SoftwareAgent"), "prov:label": actor, "provlog:actor": actor, "provlog:role": role})
	}
	return w.agent("log:actor/"+w.part(actor), map[string]any{"prov:type": qn("prov:Agent"), "prov:label": actor, "provlog:actor": actor})
}

// ownRole is the part provlog plays when it writes an entry of kind as
// actor, "" if it writes no such entry as actor. Only exact ids count:
// provlog writes them in lower case, and log.ReservedActor's other
// spellings are reserved so that no client is taken for provlog, not
// because provlog uses them. No client could ever act as
// log.GenesisActor (log.CheckActor), so every entry by it is provlog's.
// A role added here changes the documents of logs that hold the id: it
// needs a new PROV mapping.
func ownRole(actor, kind string) string {
	switch {
	case actor == log.GenesisActor:
		return "recorder"
	case actor == log.RetentionActor && kind == blobs.KindPurge:
		return "retention"
	case actor == log.OperatorActor && (kind == blobs.KindPurge || kind == replayKind):
		return "operator"
	}
	return ""
}

// replayKind is the kind of the entry `provlog replay --data` writes
// (replay.KindReplay; package replay is above this one).
const replayKind = "replay"

// recorder is the sidecar, which records calls and writes genesis,
// tools, anchor and witness.conflict entries as log.GenesisActor. The
// mappings before [ProvMappingOwnActors] made the actor a second agent
// and did not name it here.
func (w *provWriter) recorder() string {
	attrs := map[string]any{"prov:type": qn("prov:SoftwareAgent"), "prov:label": "provlog", "provlog:role": "recorder"}
	if w.mapping >= ProvMappingOwnActors {
		attrs["provlog:actor"] = log.GenesisActor
	}
	return w.agent("log:provlog", attrs)
}

// add maps entry i to PROV records.
func (w *provWriter) add(i uint64, b []byte, e *log.Entry) {
	idx := strconv.FormatUint(i, 10)
	act := "log:entry/" + idx
	lh := log.LeafHash(b)
	attrs := map[string]any{
		"prov:type":        qn("provlog:" + w.part(e.Kind)),
		"prov:startTime":   e.Time.UTC().Format(provFmt),
		"provlog:index":    i,
		"provlog:kind":     e.Kind,
		"provlog:time":     e.Time.UTC().Format(log.TimeFormat),
		"provlog:leafHash": hex.EncodeToString(lh),
	}
	nrel := 0
	relate := func(group string, a map[string]any) { nrel++; w.rel(group, i, nrel, a) }
	actor := w.actorAgent(e.Actor, e.Kind)
	relate("wasAssociatedWith", map[string]any{"prov:activity": act, "prov:agent": actor, "prov:role": qn("provlog:actor")})
	if w.prev != "" {
		relate("wasInformedBy", map[string]any{"prov:informed": act, "prov:informant": w.prev})
	}
	w.prev = act
	if e.Auth != nil && w.mapping >= ProvMappingAuth {
		w.addAuth(act, attrs, e.Auth, actor, relate)
	}
	switch {
	case e.Kind == log.KindCall:
		w.addCall(i, act, attrs, e, relate)
	case e.Kind == log.KindCallResult:
		w.addCallResult(i, act, attrs, e, relate)
	case log.IsTaskKind(e.Kind):
		w.addTask(act, attrs, e, actor, relate)
	}
	w.rec("activity", act, attrs)
}

// addAuth maps an entry's auth member (the OAuth token the request
// bore): its claims as attributes of the activity; the OAuth client the
// token was issued to as a software agent associated with it; and the act
// chain as agents, each acting on behalf of the one nested in it, the
// innermost on behalf of the actor (RFC 8693 §4.1: the outermost act is
// the current actor, nested ones prior actors), the outermost associated
// with the activity. Entries never hold a token, only its SHA-256.
func (w *provWriter) addAuth(act string, attrs map[string]any, a *log.Auth, actor string, relate func(string, map[string]any)) {
	for k, v := range map[string]string{"provlog:authIssuer": a.Issuer, "provlog:authSubject": a.Subject, "provlog:authClientId": a.ClientID,
		"provlog:authJti": a.JTI, "provlog:authScope": a.Scope, "provlog:authVia": a.Via, "provlog:tokenSha256": a.TokenSHA256} {
		if v != "" {
			attrs[k] = v
		}
	}
	if a.ClientID != "" {
		ca := w.agent("log:oauth-client/"+w.part(a.Issuer)+"/"+w.part(a.ClientID), map[string]any{"prov:type": qn("prov:SoftwareAgent"),
			"prov:label": a.ClientID, "provlog:issuer": a.Issuer, "provlog:role": "OAuth client"})
		relate("wasAssociatedWith", map[string]any{"prov:activity": act, "prov:agent": ca, "prov:role": qn("provlog:oauthClient")})
	}
	var chain []*log.Act
	for x := a.Act; x != nil; x = x.Act {
		chain = append(chain, x)
	}
	responsible := actor
	for k := len(chain) - 1; k >= 0; k-- {
		x := chain[k]
		iss := x.Issuer
		if iss == "" {
			iss = a.Issuer
		}
		party := w.agent("log:act/"+w.part(iss)+"/"+w.part(x.Subject), map[string]any{"prov:type": qn("prov:Agent"), "prov:label": x.Subject, "provlog:issuer": iss})
		d := map[string]any{"prov:delegate": party, "prov:responsible": responsible, "prov:activity": act, "prov:type": qn("provlog:Act")}
		if x.ClientID != "" {
			d["provlog:clientId"] = x.ClientID
		}
		relate("actedOnBehalfOf", d)
		responsible = party
	}
	if len(chain) > 0 {
		relate("wasAssociatedWith", map[string]any{"prov:activity": act, "prov:agent": responsible, "prov:role": qn("provlog:actingParty")})
	}
}

// addTask maps a task entry: the task as an entity its create generated,
// and each later entry as an activity using it; a handoff generates a
// snapshot (a revision of the task) and delegates to the recipient, a
// claim generates a claim entity influenced by its evidence.
func (w *provWriter) addTask(act string, attrs map[string]any, e *log.Entry, actor string, relate func(string, map[string]any)) {
	t, err := log.ParseTask(e)
	if err != nil {
		attrs["provlog:unreadable"] = err.Error()
		return
	}
	task := "log:task/" + w.part(t.TaskID)
	switch t.Kind {
	case log.KindTaskCreate:
		ta := map[string]any{"prov:type": qn("provlog:Task"), "provlog:taskId": t.TaskID, "prov:label": t.Title}
		if t.OfferTo != "" {
			ta["provlog:offerTo"] = t.OfferTo
		}
		w.rec("entity", task, ta)
		relate("wasGeneratedBy", map[string]any{"prov:entity": task, "prov:activity": act})
		relate("wasAttributedTo", map[string]any{"prov:entity": task, "prov:agent": actor})
		return
	}
	attrs["provlog:taskId"] = t.TaskID
	relate("used", map[string]any{"prov:activity": act, "prov:entity": task})
	switch t.Kind {
	case log.KindTaskHandoff:
		snap := act + "/snapshot"
		sj, _ := marshal(t.Snapshot)
		w.rec("entity", snap, map[string]any{"prov:type": []any{qn("prov:Revision"), qn("provlog:TaskSnapshot")}, "provlog:taskId": t.TaskID, "prov:value": string(sj)})
		relate("wasGeneratedBy", map[string]any{"prov:entity": snap, "prov:activity": act})
		relate("wasDerivedFrom", map[string]any{"prov:generatedEntity": snap, "prov:usedEntity": task, "prov:activity": act, "prov:type": qn("prov:Revision")})
		to := w.actorAgent(t.To, "")
		relate("actedOnBehalfOf", map[string]any{"prov:delegate": to, "prov:responsible": actor, "prov:activity": act})
	case log.KindTaskClaim:
		claim := act + "/claim"
		p := t.Provenance
		ca := map[string]any{
			"prov:type":          []any{qn("provlog:Claim"), qn("provlog:" + w.part(strings.ToUpper(p[:min(1, len(p))])+p[min(1, len(p)):]) + "Claim")},
			"provlog:provenance": p,
			"prov:value":         t.Summary,
			"provlog:taskId":     t.TaskID,
		}
		if t.Source != "" {
			ca["provlog:source"] = t.Source
		}
		evs := make([]string, len(t.Evidence))
		for k, x := range t.Evidence {
			evs[k] = strconv.FormatUint(x, 10)
		}
		if len(evs) > 0 {
			ca["provlog:evidence"] = strings.Join(evs, " ")
		}
		w.rec("entity", claim, ca)
		relate("wasGeneratedBy", map[string]any{"prov:entity": claim, "prov:activity": act})
		relate("wasAttributedTo", map[string]any{"prov:entity": claim, "prov:agent": actor})
		for _, k := range evs {
			relate("wasInfluencedBy", map[string]any{"prov:influencee": claim, "prov:influencer": "log:entry/" + k, "prov:role": qn("provlog:evidence")})
		}
	}
}

// finish writes the document to out.
func (w *provWriter) finish(out io.Writer) error {
	w.missingOutcomes()
	if w.err != nil {
		return w.err
	}
	prefix, _ := marshal(map[string]string{"provlog": ns, "log": "urn:provlog:log:" + w.part(w.origin) + ":"})
	bw := bufio.NewWriterSize(out, 64<<10)
	bw.WriteString("{\n\"prefix\":")
	bw.Write(prefix)
	for _, g := range groups {
		if err := w.bufs[g].Flush(); err != nil {
			return err
		}
		if w.count[g] == 0 {
			continue
		}
		f := w.files[g]
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		fmt.Fprintf(bw, ",\n%q:{\n", g)
		if _, err := io.Copy(bw, f); err != nil {
			return err
		}
		bw.WriteString("\n}")
	}
	bw.WriteString("\n}\n")
	return bw.Flush()
}

// addCall maps a call entry: the tool call as an activity of the actor,
// the downstream server, provlog and the client, using its arguments. A
// call entry of an old log carries its outcome too.
func (w *provWriter) addCall(i uint64, act string, attrs map[string]any, e *log.Entry, relate func(string, map[string]any)) {
	c, err := log.ParseCall(e)
	if err != nil {
		attrs["provlog:unreadable"] = err.Error()
		return
	}
	attrs["provlog:server"] = c.Server
	attrs["provlog:tool"] = c.Tool
	if c.ToolSHA256 != "" {
		attrs["provlog:toolSha256"] = c.ToolSHA256
	}
	sa := w.agent("log:server/"+w.part(c.Server), map[string]any{"prov:type": qn("prov:SoftwareAgent"), "prov:label": c.Server, "provlog:role": "downstream MCP server"})
	relate("wasAssociatedWith", map[string]any{"prov:activity": act, "prov:agent": sa, "prov:role": qn("provlog:downstream")})
	relate("wasAssociatedWith", map[string]any{"prov:activity": act, "prov:agent": w.recorder(), "prov:role": qn("provlog:recorder")})
	if c.Client != nil {
		ca := w.agent("log:client/"+w.part(c.Client.Name)+"/"+w.part(c.Client.Version), map[string]any{"prov:type": qn("prov:SoftwareAgent"), "prov:label": c.Client.Name, "provlog:version": c.Client.Version})
		relate("wasAssociatedWith", map[string]any{"prov:activity": act, "prov:agent": ca, "prov:role": qn("provlog:client")})
	}
	// Arguments: the entry's own (already redacted) or their hash.
	argID := act + "/args"
	aa := map[string]any{"prov:type": qn("provlog:Arguments")}
	if c.Args != nil {
		sum := sha256.Sum256(c.Args)
		aa["provlog:sha256"] = hex.EncodeToString(sum[:])
		aa["prov:value"] = string(c.Args)
	} else {
		aa["provlog:sha256"] = c.ArgsSHA256
	}
	w.rec("entity", argID, aa)
	relate("used", map[string]any{"prov:activity": act, "prov:entity": argID, "prov:role": qn("provlog:arguments")})
	if c.Outcome == nil {
		w.open[i] = true
		return
	}
	w.addOutcome(act, attrs, c.Server, c.Time, c.Outcome, relate)
}

// addCallResult maps a call.result entry: the recording of an outcome,
// informed by its call, whose activity generated the result.
func (w *provWriter) addCallResult(i uint64, act string, attrs map[string]any, e *log.Entry, relate func(string, map[string]any)) {
	r, err := log.ParseCallResult(e)
	if err != nil {
		attrs["provlog:unreadable"] = err.Error()
		return
	}
	callAct := "log:entry/" + strconv.FormatUint(r.Call, 10)
	attrs["provlog:call"] = r.Call
	relate("wasInformedBy", map[string]any{"prov:informed": act, "prov:informant": callAct, "prov:role": qn("provlog:call")})
	delete(w.open, r.Call)
	start := e.Time.Add(-r.Duration)
	w.addOutcome(callAct, attrs, "", start, r, relate)
}

// addOutcome maps a call's outcome, attributes on attrs (the activity
// recording it) and the result generated by the call's activity callAct.
func (w *provWriter) addOutcome(callAct string, attrs map[string]any, server string, start time.Time, r *log.CallResultEntry, relate func(string, map[string]any)) {
	end := start.Add(r.Duration).Format(provFmt)
	attrs["prov:endTime"] = end
	attrs["provlog:isError"] = r.IsError
	if r.Error != "" {
		attrs["provlog:error"] = r.Error
	}
	if r.DataRelease != "" {
		if server == "" {
			attrs["provlog:release"] = r.DataRelease
		} else {
			rid := "log:release/" + w.part(server) + "/" + w.part(r.DataRelease)
			if !w.seen[rid] {
				w.seen[rid] = true
				w.rec("entity", rid, map[string]any{"prov:type": qn("provlog:DataRelease"), "prov:label": server + " " + r.DataRelease, "provlog:server": server, "provlog:release": r.DataRelease})
			}
			relate("used", map[string]any{"prov:activity": callAct, "prov:entity": rid, "prov:role": qn("provlog:release")})
		}
	}
	if r.ResultSHA256 == "" {
		return
	}
	raw, _ := hex.DecodeString(r.ResultSHA256)
	ra := map[string]any{
		"prov:type":      qn("provlog:Result"),
		"provlog:sha256": r.ResultSHA256,
		"prov:location":  "ni:///sha-256;" + base64.RawURLEncoding.EncodeToString(raw),
		"provlog:bytes":  r.ResultBytes,
	}
	if r.ResultRetained {
		ra["provlog:retained"] = true
	}
	// Which form of the result provlog:sha256 is over, for an auditor
	// who holds the result bytes and only this document. Mapping 3 was
	// not yet released when these came in, so they extend it rather than
	// make a mapping 4; bundles of the earlier mappings never had them.
	if w.mapping >= ProvMappingOwnActors {
		if r.ResultRaw {
			ra["provlog:canonical"] = false
		}
		if r.ResultRemarshalled {
			ra["provlog:remarshalled"] = true
		}
	}
	rid := callAct + "/result"
	w.rec("entity", rid, ra)
	relate("wasGeneratedBy", map[string]any{"prov:entity": rid, "prov:activity": callAct, "prov:time": end})
}

// missingOutcomes marks the calls whose outcome is not among the entries
// mapped: cut off by a crash or a kill, still under way, or recorded after
// the exported range.
func (w *provWriter) missingOutcomes() {
	open := make([]uint64, 0, len(w.open))
	for i := range w.open {
		open = append(open, i)
	}
	slices.Sort(open)
	for _, i := range open {
		act := "log:entry/" + strconv.FormatUint(i, 10)
		w.rec("entity", act+"/no-outcome", map[string]any{
			"prov:type":       qn("provlog:MissingOutcome"),
			"prov:label":      "no call.result for this call in the exported entries (cut off by a crash or kill, still under way, or recorded later)",
			"provlog:call":    i,
			"provlog:outcome": "none",
		})
		w.rel("wasInfluencedBy", i, 0, map[string]any{"prov:influencee": act + "/no-outcome", "prov:influencer": act, "prov:role": qn("provlog:call")})
	}
}
