// Package witness holds what provlog's witness and its clients share:
// the c2sp.org/tlog-witness@v1.0.0 add-checkpoint request ([AddCheckpointRequest],
// [ParseAddCheckpoint]) and its errors ([Error]), the interface both the
// witness and an HTTP client implement ([AddCheckpointer]), merging
// cosignatures into a checkpoint note ([AddCosignatures]), the store of
// the latest checkpoint per log ([Store]) and fork evidence ([Evidence]).
//
// Cosignatures themselves (c2sp.org/tlog-cosignature, Ed25519
// cosignature/v1) and the k-of-n witness policy are in package log, so
// that a verifier needs nothing else.
//
// # Packages below
//
// witness/server is the witness: the add-checkpoint HTTP endpoint.
// witness/client is what a log runs: it submits checkpoints with
// consistency proofs to witnesses and collects cosignatures until a policy
// is met. witness/pull checks a c2sp.org/tlog-tiles log from the outside
// (provlog-witness check) and writes [Evidence] when it finds a fork.
// witness/witnesstest holds real in-memory provlog logs for tests,
// including the misbehaving twin (a second sequencer with the same key).
package witness
