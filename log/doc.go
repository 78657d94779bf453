// Package log is the pure core of provlog's transparency log: entry
// encoding, RFC 6962 leaf and node hashing, checkpoints, inclusion and
// consistency proofs, tile geometry and tlog-proof receipts.
//
// It does no I/O of its own. Stored tree nodes reach it through
// [NodeReader], and a backend implements [Storage]; the sequencer and the
// HTTP API live in log/server. A regulator's verifier needs only this
// package (plus golang.org/x/mod/sumdb/note for the log's verifier key).
//
// # Entries
//
// An entry is one RFC 8785 (JCS) canonical JSON object of at most
// [MaxEntrySize] bytes with the common fields "v", "kind", "time" and
// "actor" (see [Entry]), and "auth" ([Auth]: the identity provider's claims
// behind the actor) in the entries a request with an OAuth access token
// wrote. Its leaf hash is SHA-256(0x00 || entry bytes).
//
// # Checkpoints
//
// Checkpoints follow c2sp.org/tlog-checkpoint@v1.0.0 and are signed as
// c2sp.org/signed-note@v1.0.0 notes whose key name is the log's origin
// ([Checkpoint], [SignCheckpoint], [OpenCheckpoint]).
//
// # Proofs and receipts
//
// Proofs are built from stored perfect-subtree nodes ([ProveInclusion],
// [ProveConsistency]) and verified with RFC 6962 rules. A receipt
// ([Receipt]) is a c2sp.org/tlog-proof@v1 bundle: an index, an inclusion
// proof and the signed checkpoint it leads to.
//
// # Tiles
//
// Tile geometry follows c2sp.org/tlog-tiles: tiles of height 8 and width
// 256, partial tiles on the right edge, entry bundles of 256 entries
// ([Tile], [ParseTilePath], [TileWidth]).
package log
