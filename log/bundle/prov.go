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
	"strconv"
	"strings"
	"time"

	"github.com/provlog/provlog/log"
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
	dir    string
	origin string
	files  map[string]*os.File
	bufs   map[string]*bufio.Writer
	count  map[string]int
	seen   map[string]bool // agents and releases already written
	prev   string          // the previous entry's activity
	err    error
}

func newProvWriter(origin string) (*provWriter, error) {
	dir, err := os.MkdirTemp("", "provlog-prov-")
	if err != nil {
		return nil, fmt.Errorf("making a scratch dir for the PROV document: %w", err)
	}
	w := &provWriter{dir: dir, origin: origin, files: map[string]*os.File{}, bufs: map[string]*bufio.Writer{}, count: map[string]int{}, seen: map[string]bool{}}
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

// local escapes s for the local part of a qualified name: letters,
// digits, '.', '_' and '-' stay, everything else is %XX.
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

func (w *provWriter) actorAgent(actor string) string {
	return w.agent("log:actor/"+local(actor), map[string]any{"prov:type": qn("prov:Agent"), "prov:label": actor, "provlog:actor": actor})
}

// add maps entry i to PROV records.
func (w *provWriter) add(i uint64, b []byte, e *log.Entry) {
	idx := strconv.FormatUint(i, 10)
	act := "log:entry/" + idx
	lh := log.LeafHash(b)
	attrs := map[string]any{
		"prov:type":        qn("provlog:" + local(e.Kind)),
		"prov:startTime":   e.Time.UTC().Format(provFmt),
		"provlog:index":    i,
		"provlog:kind":     e.Kind,
		"provlog:time":     e.Time.UTC().Format(log.TimeFormat),
		"provlog:leafHash": hex.EncodeToString(lh),
	}
	f := e.Fields
	str := func(k string) string { s, _ := f[k].(string); return s }
	nrel := 0
	relate := func(group string, a map[string]any) { nrel++; w.rel(group, i, nrel, a) }
	actor := w.actorAgent(e.Actor)
	relate("wasAssociatedWith", map[string]any{"prov:activity": act, "prov:agent": actor, "prov:role": qn("provlog:actor")})
	if w.prev != "" {
		relate("wasInformedBy", map[string]any{"prov:informed": act, "prov:informant": w.prev})
	}
	w.prev = act
	task := "log:task/" + local(str("task_id"))
	switch {
	case e.Kind == log.KindCall:
		server := str("server")
		attrs["provlog:server"] = server
		attrs["provlog:tool"] = str("tool")
		if st, err := time.Parse(log.TimeFormat, str("started")); err == nil {
			attrs["prov:startTime"] = st.Format(provFmt)
			if d, ok := f["duration_ns"].(json.Number); ok {
				if n, err := d.Int64(); err == nil {
					attrs["prov:endTime"] = st.Add(time.Duration(n)).Format(provFmt)
				}
			}
		}
		if v, ok := f["is_error"].(bool); ok {
			attrs["provlog:isError"] = v
		}
		if s := str("error"); s != "" {
			attrs["provlog:error"] = s
		}
		sa := w.agent("log:server/"+local(server), map[string]any{"prov:type": qn("prov:SoftwareAgent"), "prov:label": server, "provlog:role": "downstream MCP server"})
		relate("wasAssociatedWith", map[string]any{"prov:activity": act, "prov:agent": sa, "prov:role": qn("provlog:downstream")})
		pa := w.agent("log:provlog", map[string]any{"prov:type": qn("prov:SoftwareAgent"), "prov:label": "provlog", "provlog:role": "recorder"})
		relate("wasAssociatedWith", map[string]any{"prov:activity": act, "prov:agent": pa, "prov:role": qn("provlog:recorder")})
		if c, ok := f["client"].(map[string]any); ok {
			name, _ := c["name"].(string)
			ver, _ := c["version"].(string)
			ca := w.agent("log:client/"+local(name)+"/"+local(ver), map[string]any{"prov:type": qn("prov:SoftwareAgent"), "prov:label": name, "provlog:version": ver})
			relate("wasAssociatedWith", map[string]any{"prov:activity": act, "prov:agent": ca, "prov:role": qn("provlog:client")})
		}
		// Arguments: the entry's own (already redacted) or their hash.
		argID := act + "/args"
		aa := map[string]any{"prov:type": qn("provlog:Arguments")}
		if args, ok := f["args"]; ok {
			j, _ := marshal(args)
			if c, err := log.Canonicalize(j); err == nil {
				j = c
			}
			sum := sha256.Sum256(j)
			aa["provlog:sha256"] = hex.EncodeToString(sum[:])
			aa["prov:value"] = string(j)
		} else {
			aa["provlog:sha256"] = str("args_sha256")
		}
		w.rec("entity", argID, aa)
		relate("used", map[string]any{"prov:activity": act, "prov:entity": argID, "prov:role": qn("provlog:arguments")})
		if rel := str("release"); rel != "" {
			rid := "log:release/" + local(server) + "/" + local(rel)
			if !w.seen[rid] {
				w.seen[rid] = true
				w.rec("entity", rid, map[string]any{"prov:type": qn("provlog:DataRelease"), "prov:label": server + " " + rel, "provlog:server": server, "provlog:release": rel})
			}
			relate("used", map[string]any{"prov:activity": act, "prov:entity": rid, "prov:role": qn("provlog:release")})
		}
		if h := str("result_sha256"); h != "" {
			raw, _ := hex.DecodeString(h)
			ra := map[string]any{
				"prov:type":      qn("provlog:Result"),
				"provlog:sha256": h,
				"prov:location":  "ni:///sha-256;" + base64.RawURLEncoding.EncodeToString(raw),
			}
			if n, ok := f["result_bytes"].(json.Number); ok {
				ra["provlog:bytes"], _ = n.Int64()
			}
			if v, ok := f["result_retained"].(bool); ok {
				ra["provlog:retained"] = v
			}
			rid := act + "/result"
			w.rec("entity", rid, ra)
			g := map[string]any{"prov:entity": rid, "prov:activity": act}
			if t, ok := attrs["prov:endTime"]; ok {
				g["prov:time"] = t
			}
			relate("wasGeneratedBy", g)
		}
	case e.Kind == "task.create":
		ta := map[string]any{"prov:type": qn("provlog:Task"), "provlog:taskId": str("task_id"), "prov:label": str("title")}
		if s := str("offer_to"); s != "" {
			ta["provlog:offerTo"] = s
		}
		w.rec("entity", task, ta)
		relate("wasGeneratedBy", map[string]any{"prov:entity": task, "prov:activity": act})
		relate("wasAttributedTo", map[string]any{"prov:entity": task, "prov:agent": actor})
	case e.Kind == "task.accept" || e.Kind == "task.release" || e.Kind == "task.cancel":
		attrs["provlog:taskId"] = str("task_id")
		relate("used", map[string]any{"prov:activity": act, "prov:entity": task})
	case e.Kind == "task.handoff":
		attrs["provlog:taskId"] = str("task_id")
		snap := act + "/snapshot"
		sj, _ := marshal(f["snapshot"])
		w.rec("entity", snap, map[string]any{"prov:type": []any{qn("prov:Revision"), qn("provlog:TaskSnapshot")}, "provlog:taskId": str("task_id"), "prov:value": string(sj)})
		relate("used", map[string]any{"prov:activity": act, "prov:entity": task})
		relate("wasGeneratedBy", map[string]any{"prov:entity": snap, "prov:activity": act})
		relate("wasDerivedFrom", map[string]any{"prov:generatedEntity": snap, "prov:usedEntity": task, "prov:activity": act, "prov:type": qn("prov:Revision")})
		to := w.actorAgent(str("to"))
		relate("actedOnBehalfOf", map[string]any{"prov:delegate": to, "prov:responsible": actor, "prov:activity": act})
	case e.Kind == "task.claim":
		attrs["provlog:taskId"] = str("task_id")
		claim := act + "/claim"
		p := str("provenance")
		ca := map[string]any{
			"prov:type":          []any{qn("provlog:Claim"), qn("provlog:" + local(strings.ToUpper(p[:min(1, len(p))])+p[min(1, len(p)):]) + "Claim")},
			"provlog:provenance": p,
			"prov:value":         str("summary"),
			"provlog:taskId":     str("task_id"),
		}
		if s := str("source"); s != "" {
			ca["provlog:source"] = s
		}
		ev, _ := f["evidence"].([]any)
		var evs []string
		for _, x := range ev {
			if n, ok := x.(json.Number); ok {
				evs = append(evs, n.String())
			}
		}
		if len(evs) > 0 {
			ca["provlog:evidence"] = strings.Join(evs, " ")
		}
		w.rec("entity", claim, ca)
		relate("used", map[string]any{"prov:activity": act, "prov:entity": task})
		relate("wasGeneratedBy", map[string]any{"prov:entity": claim, "prov:activity": act})
		relate("wasAttributedTo", map[string]any{"prov:entity": claim, "prov:agent": actor})
		for _, k := range evs {
			relate("wasInfluencedBy", map[string]any{"prov:influencee": claim, "prov:influencer": "log:entry/" + k, "prov:role": qn("provlog:evidence")})
		}
	}
	w.rec("activity", act, attrs)
}

// finish writes the document to out.
func (w *provWriter) finish(out io.Writer) error {
	if w.err != nil {
		return w.err
	}
	prefix, _ := marshal(map[string]string{"provlog": ns, "log": "urn:provlog:log:" + local(w.origin) + ":"})
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
