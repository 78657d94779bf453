// Package bench holds provlog's side-by-side benchmark against Tessera
// (cmd/logbench) and the tlog-tiles interoperability test.
package bench
