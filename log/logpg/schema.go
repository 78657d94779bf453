package logpg

// Schema and fencing. This file is the only place that knows the tables.
//
// All tables live in the connection's schema (search_path; put
// search_path=S in the DSN to keep a log in schema S), and every name
// starts with provlog_, so a log can share a database with other data.
// Hashes are 32 bytes (RFC 6962 with SHA-256); indices and sizes are
// bigint (a log never reaches 2^63 entries).
//
//	provlog_state(id, version, size, compact, checkpoint)
//	    one row (id = true), made with the tables at size 0. size is the
//	    committed tree size, compact the compact range over [0, size) (one
//	    hash per set bit of size, left to right, concatenated), checkpoint
//	    the signed note for that size. The row is the serialization point:
//	    every commit holds its lock (SELECT … FOR UPDATE) from reading the
//	    size it builds on to COMMIT.
//	provlog_entries(idx, entry)
//	    the entry bytes exactly as appended.
//	provlog_nodes(level, idx, hash)
//	    every perfect node of the tree, leaf hashes at level 0; the node
//	    (L, I) covers leaves [I<<L, (I+1)<<L).
//	provlog_leaf_hashes
//	    a hash index on provlog_nodes(hash) for level 0: lookups by leaf
//	    hash (equality only; an index of 4-byte hash codes is a third of
//	    a B-tree over 32-byte keys).
//	provlog_checkpoints(size, note)
//	    every signed checkpoint, by the size it ends at.
//	provlog_keys(key, last)
//	    the index of the last entry committed under each fence key (see
//	    log.Fence): task ids, for the task engine, call:<index> for
//	    each call an observed claim cites, and purge: for purge
//	    entries (an entry may have several keys; each is a row, checked and written in the same statements
//	    as one, so a database of older sidecars needs no change). A
//	    sidecar that predates call keys neither checks nor writes them.
//	provlog_blobs(name, data)
//	    the log's payload blobs (package log/blobs) by hex SHA-256, so that
//	    every sidecar reads what any of them stored, and a purge through one
//	    deletes for all. Not part of the tree: a blob is deleted, never
//	    changed.
//	provlog_lock_at(size, compact, checkpoint, keys, afters)
//	    a function (PL/pgSQL) that locks the state row and raises an error
//	    unless the row still holds exactly this state (SQLSTATE PV001) and
//	    no entry under keys[i] was committed at or after afters[i]
//	    (PV002): the check of a commit in one round trip, run by the
//	    server under the lock.
//
// Keys never go into the database: every sidecar signs with the log key in
// its own data dir.
//
// # Fencing
//
// There is no elected writer and no lease: any handle may commit at any
// time, and PostgreSQL serializes them. A commit is one round trip or two
// on one connection.
//
// In one round trip, the caller builds the batch on the state this handle
// knows (the sequencer signs the checkpoint there), assuming no fence
// tripped, and then one pipeline (pgx batch, one Sync) sends: BEGIN; SET
// LOCAL synchronous_commit = off; provlog_lock_at, which locks the state
// row and checks that it still holds, byte for byte, the state the batch
// was built on and that none of the batch's fences tripped; the writes of
// round trip 2 below; COMMIT; the flush. If the check fails, the server
// skips the rest of the pipeline (the transaction is aborted: nothing is
// written), and the handle rolls back and commits in two round trips,
// which catch it up. The lock is held only while the server locks,
// checks, writes and commits, not across a round trip to the client and
// the build. A handle tries it only when appends come one at a time,
// back to back, and it knows of no other writer's commit past its state
// (Store.mayOneTrip says exactly when): under load, two round trips
// gather more appends a commit; two sidecars taking turns would mostly
// find the state moved; and a connection idle for a while may have died
// unseen, which a first round trip finds before COMMIT is sent.
//
// In two round trips:
//
//  1. BEGIN; SET LOCAL synchronous_commit = off; lock the state row;
//     read the leaf hashes committed since this handle's last state and
//     the fence keys' last indices.
//  2. INSERT the entries, nodes and checkpoint; UPDATE the state row and
//     the keys; NOTIFY provlog_log; COMMIT; then, in a transaction of its
//     own, the flush (below).
//
// Between them the caller builds the batch on the state it was given, so
// no commit is ever built on a stale size: whoever held the lock before
// has committed or rolled back. The handle checks what it finds against
// what it knew: the leaf hashes appended since must extend its compact
// range to exactly the stored one, else the store is corrupt and the
// handle refuses to commit. A commit in one round trip builds on a state
// the handle checked so, and commits only if the state row still holds
// it; if not, the commit in two round trips that follows checks the row.
// A checkpoint once handed out therefore stays a prefix of every later
// state, whichever handle signs it.
//
// [Store.Commit] is the same path with a batch built beforehand: if
// another writer committed since the caller read the state, the batch no
// longer starts at the stored size and is refused, writing nothing. A
// writer that lost its turn cannot commit; it learns the new state from
// [Store.State] and builds again.
//
// # Durability
//
// The lock is held only while the commit is built and written, not while
// its WAL is flushed: the commit's transaction commits asynchronously,
// which releases the lock as soon as its commit record is in the WAL, so
// the next writer builds on it while it is being flushed. Until then it
// is visible but not durable, so nothing is acknowledged, answered or
// handed out on it before a flush covers it: the flush is a transaction
// that writes one WAL record (pg_logical_emit_message, which touches no
// table), so that its commit waits for the WAL up to its own commit
// record, as synchronous_commit is configured, and the WAL is flushed in
// order; when the WAL is already flushed as far as it is written, the
// flush writes nothing and waits for nothing (a read of a quiet log costs
// no WAL flush). A commit runs it right after COMMIT in the same round
// trip and returns only when it is done; a commit that writes nothing, a read of
// the newest state (Latest, the LISTEN refresh), Open and the read-back
// of an unknown outcome run it after reading what they will trust. A read
// of the newest state that finds the size the handle already holds
// flushes nothing (sqlFlushUnlessAt): every state a handle holds was
// covered by a flush before it was adopted, and sizes only grow, so the
// state read is that one; otherwise its flush would wait for whatever
// other databases of the cluster wrote meanwhile (the WAL is the
// cluster's), which made a get_task_status on a busy cluster cost a WAL
// fsync (session 9: 2.8–3.4 ms p50 against 0.7–1.5).
// Commits from many writers flush together (PostgreSQL's WAL group
// commit). If PostgreSQL stops before a flush, it loses that commit and
// every commit built on it, none of them acknowledged; the log it
// restarts with is a prefix, and no handle ever adopted the lost states.
//
// # Unknown outcomes
//
// If the connection fails after COMMIT may have reached the server, the
// outcome is unknown. The handle does not guess: on a new connection it
// first ends the old connection's backend if it still runs, and waits
// until it is gone (a backend that has not yet read the commit's
// pipeline, which a proxy or the network may still deliver, would
// otherwise begin, lock, write and commit after the read-back found
// nothing; a commit in one round trip sends BEGIN in that pipeline, so
// there is no lock held to wait for); then it takes the state row's lock
// (which waits out the old transaction, still holding it until it commits
// or aborts; connections set idle_in_transaction_session_timeout so a
// half-dead session cannot hold it for ever) and reads the checkpoint at
// the batch's size. The batch
// committed if and only if that is the batch's own checkpoint, byte for
// byte (no checkpoint there: not committed, even if the log has grown
// past it, as another writer's batch may span it). If the database cannot
// be reached within Options.ResolveTimeout the handle refuses further
// commits. A failure before COMMIT was sent (round trip 1 of two) wrote
// nothing and is reported as log.ErrUnavailable: the next commit may
// succeed. If it was the connection that failed (a pooled connection
// whose backend was terminated, or that a restart cut, while it was
// idle), the commit first takes another connection and tries again, a
// bounded number of times (Store.CommitShared). A commit in one round
// trip sends COMMIT with everything else, so any failure of its
// connection leaves the outcome unknown, unless pgx wrote no byte of the
// pipeline (pgconn.SafeToRetry), which is tried again so too; but a
// statement the server refused while the session goes on is a known
// outcome (nothing committed), and in either way of committing a refusal
// that may pass (a timeout, a deadlock, a read-only database: a hot
// standby until it is promoted) is log.ErrUnavailable too, the read-only
// one naming log.ErrReadOnly (unavailable, in commit.go).
//
// # Reads
//
// Every read after Open (Latest and the LISTEN refresh, entries, nodes,
// checkpoints, leaf indexes, fence keys, blobs) goes through Store.read.
// A read whose pooled connection turns out dead (closed under it while
// its context is live, as after a terminated backend or a restart) takes
// another and runs again, bounded as a commit is; a read that handed rows
// to its caller first is not run again. An error the server answered
// with goes up at once. A read that reaches no server reports
// log.ErrUnavailable, as a commit does: nothing was read or written.

const schemaVersion = 1

// schemaLock is the advisory lock key under which a store creates its
// tables, so that sidecars starting together do not race on CREATE TABLE.
const schemaLock = 0x70726f766c6f67 // "provlog"

const notifyChannel = "provlog_log"

var schemaDDL = []string{
	`CREATE TABLE IF NOT EXISTS provlog_state (
		id boolean PRIMARY KEY CHECK (id),
		version integer NOT NULL,
		size bigint NOT NULL CHECK (size >= 0),
		compact bytea NOT NULL,
		checkpoint bytea NOT NULL
	)`,
	keyed("provlog_entries", "idx bigint", "entry bytea"),
	`CREATE TABLE IF NOT EXISTS provlog_nodes (
		level smallint NOT NULL,
		idx bigint NOT NULL,
		hash bytea NOT NULL,
		PRIMARY KEY (level, idx)
	)`,
	`CREATE INDEX IF NOT EXISTS provlog_leaf_hashes ON provlog_nodes USING hash (hash) WHERE level = 0`,
	keyed("provlog_checkpoints", "size bigint", "note bytea"),
	keyed("provlog_keys", "key text", "last bigint"),
	keyed("provlog_blobs", "name text", "data bytea"),
	`INSERT INTO provlog_state (id, version, size, compact, checkpoint)
		VALUES (true, 1, 0, '', '') ON CONFLICT (id) DO NOTHING`,
	`CREATE OR REPLACE FUNCTION provlog_lock_at(want bigint, want_compact bytea, want_checkpoint bytea, keys text[], afters bigint[]) RETURNS void
	LANGUAGE plpgsql AS $$
	DECLARE
		st record;
	BEGIN
		SELECT size, compact, checkpoint INTO st FROM provlog_state WHERE id FOR UPDATE;
		IF (st.size, st.compact, st.checkpoint) IS DISTINCT FROM (want, want_compact, want_checkpoint) THEN
			RAISE EXCEPTION 'provlog: the log has size %, not the state of size % the batch was built on (another writer committed first)', st.size, want
				USING ERRCODE = '` + codeMoved + `';
		END IF;
		IF EXISTS (SELECT 1 FROM provlog_keys k JOIN unnest(keys, afters) AS f(fkey, fafter)
				ON k.key = f.fkey WHERE k.last >= f.fafter) THEN
			RAISE EXCEPTION 'provlog: an entry under a fence key was committed at or after its fence'
				USING ERRCODE = '` + codeFenced + `';
		END IF;
	END
	$$`,
}

// The SQLSTATEs provlog_lock_at raises: the log moved past the size the
// batch was built on; a fence tripped.
const (
	codeMoved  = "PV001"
	codeFenced = "PV002"
)

// keyed is the DDL of a table of two columns ("name type"), the first its
// primary key, the second not null.
func keyed(table, key, value string) string {
	return "CREATE TABLE IF NOT EXISTS " + table + " (" + key + " PRIMARY KEY, " + value + " NOT NULL)"
}

// schemaTables are the tables schemaDDL creates; a read-only Open wants
// them all.
var schemaTables = []string{"provlog_state", "provlog_entries", "provlog_nodes", "provlog_checkpoints", "provlog_keys", "provlog_blobs"}

const (
	// sqlMissingTables names the tables of $1 not found on the
	// search_path, and says what the search_path is.
	sqlMissingTables = `SELECT coalesce(array_agg(t ORDER BY t) FILTER (WHERE to_regclass(t) IS NULL), '{}'), current_setting('search_path')
		FROM unnest($1::text[]) AS t`
	// sqlAsyncCommit makes a commit's transaction release the state
	// row's lock without waiting for the WAL flush; sqlFlush, run in a
	// transaction of its own after it, waits for the flush (see
	// Durability above).
	sqlAsyncCommit = `SET LOCAL synchronous_commit = off`
	// sqlFlush makes every transaction whose commit it saw or followed
	// durable. If the WAL is flushed as far as it has been written when it
	// runs (every commit before it is durable: a reader of a quiet log),
	// it does nothing and costs no flush; else it writes a WAL record in
	// the current transaction, so that its commit waits for the flush as
	// synchronous_commit says (sqlSyncCommit). On a standby (a read-only
	// handle may be opened on one) it does nothing: a standby replays only
	// WAL that its primary has flushed.
	sqlFlush = `SELECT CASE WHEN pg_is_in_recovery() THEN NULL
		WHEN pg_current_wal_flush_lsn() >= pg_current_wal_insert_lsn() THEN NULL
		ELSE pg_logical_emit_message(true, 'provlog', 'flush') END, ` + sqlSyncCommit
	// sqlSyncCommit, a column of the flushes, makes their transaction's
	// commit wait for the WAL flush whatever the server, database or role
	// sets: synchronous_commit = off (a common tuning) would have it
	// return at once, the batch acknowledged and then lost by a crash, and
	// the next writer sign another checkpoint of that size. Any other
	// setting (local, on, remote_write, remote_apply) waits for the local
	// flush at least, and is kept.
	sqlSyncCommit = `set_config('synchronous_commit', CASE current_setting('synchronous_commit') WHEN 'off' THEN 'on' ELSE current_setting('synchronous_commit') END, true)`
	// sqlFlushUnlessAt is sqlFlush, except that it does nothing if the
	// state row still has size $1, the size of a state the handle holds
	// (and so has had flushed): a read of the newest state that finds
	// nothing new (see Durability above).
	sqlFlushUnlessAt = `SELECT CASE WHEN (SELECT size FROM provlog_state WHERE id) = $1 THEN NULL
		WHEN pg_is_in_recovery() THEN NULL
		WHEN pg_current_wal_flush_lsn() >= pg_current_wal_insert_lsn() THEN NULL
		ELSE pg_logical_emit_message(true, 'provlog', 'flush') END, ` + sqlSyncCommit
	// sqlEndBackend ends the backend of process id $1 and waits (up to
	// five seconds) until it is gone: no row if there is none (other than
	// the caller's own), else whether it is gone.
	sqlEndBackend = `SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity
		WHERE pid = $1 AND pid <> pg_backend_pid() AND backend_type = 'client backend'`
	sqlLockAt     = `SELECT provlog_lock_at($1, $2, $3, $4::text[], $5::bigint[])`
	sqlLockState  = `SELECT version, size, compact, checkpoint FROM provlog_state WHERE id FOR UPDATE`
	sqlReadState  = `SELECT version, size, compact, checkpoint FROM provlog_state WHERE id`
	sqlReadSize   = `SELECT size FROM provlog_state WHERE id`
	sqlLeavesFrom = `SELECT idx, hash FROM provlog_nodes WHERE level = 0 AND idx >= $1 ORDER BY idx`
	sqlKeys       = `SELECT key, last FROM provlog_keys WHERE key = ANY($1::text[])`

	sqlInsertEntries = `INSERT INTO provlog_entries (idx, entry)
		SELECT * FROM unnest($1::bigint[], $2::bytea[])`
	sqlInsertNodes = `INSERT INTO provlog_nodes (level, idx, hash)
		SELECT * FROM unnest($1::smallint[], $2::bigint[], $3::bytea[])`
	sqlInsertCheckpoint = `INSERT INTO provlog_checkpoints (size, note) VALUES ($1, $2)`
	sqlUpdateState      = `UPDATE provlog_state SET size = $2, compact = $3, checkpoint = $4 WHERE id AND size = $1`
	sqlUpsertKeys       = `INSERT INTO provlog_keys (key, last)
		SELECT * FROM unnest($1::text[], $2::bigint[])
		ON CONFLICT (key) DO UPDATE SET last = excluded.last`
	sqlNotify = `SELECT pg_notify('` + notifyChannel + `', $1::text)`

	sqlBlobRead   = `SELECT data FROM provlog_blobs WHERE name = $1`
	sqlBlobWrite  = `INSERT INTO provlog_blobs (name, data) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`
	sqlBlobDelete = `DELETE FROM provlog_blobs WHERE name = $1`
	sqlBlobHas    = `SELECT EXISTS (SELECT 1 FROM provlog_blobs WHERE name = $1)`

	sqlEntries     = `SELECT idx, entry FROM provlog_entries WHERE idx >= $1 AND idx < $2 ORDER BY idx`
	sqlLevel       = `SELECT idx, hash FROM provlog_nodes WHERE level = $1 AND idx < $2 ORDER BY idx`
	sqlNodes       = `SELECT n.level, n.idx, n.hash FROM provlog_nodes n JOIN unnest($1::smallint[], $2::bigint[]) AS w(level, idx) ON n.level = w.level AND n.idx = w.idx`
	sqlLeafIndex   = `SELECT idx FROM provlog_nodes WHERE level = 0 AND hash = $1 AND idx < $2 ORDER BY idx LIMIT 1`
	sqlCheckpoint  = `SELECT note FROM provlog_checkpoints WHERE size = $1`
	sqlFenceKeys   = `SELECT key, last FROM provlog_keys ORDER BY key`
	sqlCheckpoints = `SELECT size, note FROM provlog_checkpoints WHERE size >= $1 AND size <= $2 ORDER BY size`
	// sqlOpenCheck reads what Open checks against the state of size $1:
	// the last entry and leaf exist, nothing lies past them, and the
	// checkpoint stored for the size (NULL if none).
	sqlOpenCheck = `SELECT
		EXISTS (SELECT 1 FROM provlog_entries WHERE idx = $1 - 1),
		EXISTS (SELECT 1 FROM provlog_nodes WHERE level = 0 AND idx = $1 - 1),
		EXISTS (SELECT 1 FROM provlog_entries WHERE idx >= $1),
		EXISTS (SELECT 1 FROM provlog_nodes WHERE level = 0 AND idx >= $1),
		EXISTS (SELECT 1 FROM provlog_checkpoints WHERE size > $1),
		(SELECT note FROM provlog_checkpoints WHERE size = $1)`
)
