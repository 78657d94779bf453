// Package evidence writes and checks one entry's evidence: a directory a
// regulator can hold that proves, offline and without trusting the log's
// operator, that one log entry was in the log by a certain time and that
// the log did not fork (DESIGN §4, provlog evidence and verify-evidence).
//
// # What it proves
//
// The directory centres on one target checkpoint: the smallest signed
// checkpoint covering the entry that is both cosigned under the witness
// policy and anchored (RFC 3161 tokens and a Rekor entry over the SHA-256
// of that exact note). When no checkpoint is both, the best available one
// is used and manifest.json's "missing" says in words what is not there
// (no anchor covers the entry yet; the anchored checkpoint is not cosigned).
// An anchor is the target only if [Verify] accepts it there: its record
// verifies (under the configured trust too), the policy's witnesses'
// cosignatures on its checkpoint verify, and no authority dates the
// checkpoint before an entry it covers (all of them, not only those in
// the directory, as provlog audit checks), and its Rekor checkpoints
// show no fork against those of the records before it (as the audit
// compares them: the directory holds one record); [Write] tells
// [Options.Skipped] of each record it leaves out and why. When the only
// anchors covering the entry are dated before an entry they cover,
// skipped/ holds the smallest of them and that entry, and "missing" says
// no anchor whose times hold covers the entry, naming the authority, the
// entry and both times.
// The entry is proven into the target by an inclusion proof, and the
// receipt the entry got when it was committed (on the checkpoint of its own
// batch) is linked to the target by a consistency proof.
//
// # Layout
//
// Every name below is relative to the directory; all files are written
// once and checked byte for byte.
//
//	manifest.json           what the directory claims and the SHA-256 of
//	                        every other file (see [Manifest])
//	entry.json              the entry's exact bytes (its leaf hash is
//	                        SHA-256(0x00 || these bytes))
//	receipt.tlog-proof      c2sp.org/tlog-proof@v1: the entry's inclusion
//	                        proof to the target checkpoint, which it
//	                        carries with its witness cosignatures
//	receipt.cose            the same proof as an RFC 9942 COSE receipt
//	                        (COSE_Sign1, vds RFC9162_SHA256, EdDSA with the
//	                        log's key, detached root payload)
//	issued.tlog-proof       the receipt the entry was issued when committed,
//	                        on the checkpoint of its own batch
//	consistency             RFC 6962 consistency proof from the issued
//	                        receipt's size to the target's (text: a header
//	                        line, "old N", "new M", one base64 hash a line)
//	checkpoint              the target checkpoint note, exactly the bytes
//	                        the anchors time-stamp (the tlog-proof's
//	                        checkpoint; `openssl ts -verify -data checkpoint`)
//	anchor.json             the anchor record of the target checkpoint, as
//	                        stored in <data>/anchors (anchor.Record)
//	timestamps/<i>.tst      RFC 3161 TimeStampToken (DER) of the record's
//	                        timestamp i (`openssl ts -verify -token_in`)
//	timestamps/<i>.pem      its certificate chain, signer first
//	rekor/<i>.json          the record's Rekor v1 entry i (LogEntryAnon:
//	                        body, SET, inclusion proof, Rekor checkpoint)
//	rekor/<i>.pub           that Rekor's public key (PEM)
//	log.vkey                the log's verifier key (signed-note form)
//	anchor.pub              the log's P-256 anchoring key (PEM)
//	witnesses.txt           the witness policy: "threshold K", then one
//	                        cosignature/v1 verifier key a line
//	trust/tsa-roots.pem     the roots of the tokens' chains, which the
//	                        writer checked are among the roots it trusts
//	trust/rekor-keys.pem    the Rekor keys the entries verified with
//	skipped/anchor.json     when present (and anchor.json is not): the
//	                        smallest anchor record covering the entry,
//	                        left out because an authority dates its
//	                        checkpoint before an entry it covers
//	skipped/entry.json      that entry (the one with the latest time the
//	skipped/entry.tlog-proof checkpoint covers) and its inclusion proof
//	                        in the skipped record's checkpoint
//	context/<n>.json        other entries that give the entry its meaning,
//	context/<n>.tlog-proof  each with its inclusion proof to the target:
//	                        always the genesis entry (0, which names
//	                        log.vkey and anchor.pub); for a task entry the
//	                        task's history (create, accept, claims,
//	                        handoffs) and the entries its claims cite,
//	                        a cited call with its call.result (required
//	                        for an observed claim, which the rules admit
//	                        only once that result is in the log)
//
// Files of parts that do not exist are absent (no anchor.json, timestamps/
// or rekor/ when no anchor covers the entry; no witnesses.txt without a
// witness policy); the manifest says so.
//
// # Verification
//
// [Verify] needs only the directory and the log's verifier key, which the
// caller must get from a source it trusts: everything else in the
// directory is checked against it, and manifest.json must be exactly what
// the other files give, so one changed byte in any file fails with an
// error naming that file. (A change that leaves a file passing its own
// checks, such as an anchor record's informative "created" time, shows
// only as a SHA-256 that differs from the manifest's; then both files are
// named.) An anchor's time is what the report says the entry was in the
// log by, so no TSA or Rekor time may be earlier, by more than
// anchor.MaxClockSkew, than the time of an entry the directory proves in
// the anchored checkpoint (the entry itself or a context entry): such an
// anchor fails, naming its time and the entry's. A skipped/ record must
// verify under its own roots and keys and be dated before
// skipped/entry.json by more than that; "missing" must then say so.
// [Verify] trusts the witnesses, TSAs and Rekor as the directory names them, which whoever wrote it chose; [VerifyPinned] takes witness
// keys and threshold, TSA roots and Rekor keys from the caller instead
// (see [Pins]), and the report says which trust was pinned. Each part also stays checkable with its
// own ecosystem's tools: the tokens with `openssl ts -verify`, the
// receipt with any c2sp.org/tlog-proof verifier, receipt.cose with a COSE
// library, the Rekor entries with Sigstore's.
package evidence
