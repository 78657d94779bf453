package log

// toolDefs holds, for each downstream server, the tool definitions the
// log's tools entries have listed so far (name and hash), so that audit
// can tell a call whose tool_sha256 names a definition no earlier tools
// entry holds: the proxy writes a server's tools entry before any call
// that names one of its definitions, so such a call's definition is not
// in the log (an older provlog's failed tools entry, or a forged hash).
type toolDefs map[string]map[toolDef]bool

type toolDef struct{ name, sha256 string }

// add records the definitions tools entry e lists (a whole list or one
// part of one).
func (d toolDefs) add(e *Entry) error {
	t, err := ParseTools(e)
	if err != nil {
		return err
	}
	s := d[t.Server]
	if s == nil {
		s = map[toolDef]bool{}
		d[t.Server] = s
	}
	for _, x := range t.Tools {
		s[toolDef{x.Name, x.SHA256}] = true
	}
	return nil
}

// listed reports whether call entry e names no definition, or one an
// earlier tools entry of its server listed under its tool's name.
func (d toolDefs) listed(e *Entry) bool {
	sum, _ := e.Fields["tool_sha256"].(string)
	if sum == "" {
		return true
	}
	server, _ := e.Fields["server"].(string)
	tool, _ := e.Fields["tool"].(string)
	return d[server][toolDef{tool, sum}]
}
