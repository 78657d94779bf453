// Package anchor anchors provlog's checkpoints outside the log, so that an
// operator who rewrites history is caught (DESIGN §6): RFC 3161 time-stamp
// authorities and a Sigstore Rekor log vouch for the SHA-256 of a signed
// checkpoint note, and everything needed to check that later, with no
// network, is stored beside the log.
//
// # What is anchored
//
// The digest is the SHA-256 of the exact signed checkpoint note the log
// handed out (note text, blank line, signature lines), as the sequencer
// returns it. Each TSA (anchor/online's TSAClient) time-stamps that
// digest; Rekor (its RekorClient) logs a hashedrekord entry for it, signed
// with the log's
// P-256 anchoring key (<data>/anchor.key, whose public half is in the
// genesis entry). An answer is kept only after it verifies against the
// configured trust: TSA roots, the pinned Rekor key.
//
// # Records
//
// A [Record] holds the checkpoint, its digest, the anchoring key, an
// RFC 6962 consistency proof from the previously anchored checkpoint, the
// TSA tokens with their chains and nonces, and the whole Rekor entries
// with SET, inclusion proof and Rekor checkpoint, plus Rekor's key. A
// [Store] keeps records as canonical JSON files in <data>/anchors, each
// written once, atomically and durably. [Tlog] is a tagged union, so a
// Rekor v2 (rekor-tiles) entry fits later beside the v1 one.
//
// After a record is stored, an `anchor` entry ([log.AnchorEntry], built by [Fields]) goes into
// the log: the anchored size and root, the digest, the record's name and
// SHA-256, each token's and entry's SHA-256, and the id of the sidecar
// that keeps the record ([Store.Sidecar]), so that on a log shared by
// several sidecars an audit of one data dir tells its own records from
// those kept in the others'. The log thus commits to
// its own anchors, and an audit notices any change to a record file, even
// one that leaves it verifying.
//
// # Verification
//
// [Verify] checks one record offline and names every part that fails:
// the checkpoint is signed by the log, the digest is its SHA-256, the
// anchoring key is the log's, the consistency proof holds, every token
// binds this digest under a trusted root, every Rekor entry binds this
// digest and this key under a pinned Rekor key. [AuditAll] verifies every
// stored record, that consecutive records are linked, that each anchored
// root is the log's own at that size, that each anchor entry matches its
// record, and that no authority dates a checkpoint before the time of an
// entry in it (beyond [MaxClockSkew]), in the one pass it reads the log
// with.
//
// # Offline and online
//
// This package, with [rfc3161] and [rekor] below it, is the offline half:
// records, their store, their log entries and their verification, with
// the standard library, merkle and the pkcs7 and timestamp parsers only.
// A verifier imports nothing that speaks to the network. The online half,
// anchor/online, holds the runner (anchor the latest checkpoint every
// interval, retry failed authorities with backoff, report the anchoring
// gap), the TSA and Rekor clients, the handler serving the records at
// /log/anchors and the anchors: configuration.
package anchor
