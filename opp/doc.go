// Package opp is provlog's task ownership and provenance engine (OPP):
// who owns a task, and how each completion claim was established. Every
// state change is an entry in the log, and the state is nothing but those
// entries replayed, so a task's history can be rebuilt and proven from the
// log alone (DESIGN.md §7).
//
// The package knows nothing of MCP; opp/oppmcp serves an [Engine] as MCP
// tools.
//
// # Entries
//
// Each operation writes one [log.Entry] whose actor is the authenticated
// caller and whose fields hold "task_id" and the operation's own fields:
//
//   - task.create: title, description?, offer_to?
//   - task.accept: (nothing more)
//   - task.claim: provenance, summary, evidence? (log indices), source?
//   - task.handoff: to, note?, snapshot {state, owner, reservation,
//     history_head {index, leaf_hash}, claims [{index, leaf_hash, actor,
//     provenance}]}
//   - task.release: note?
//   - task.cancel: note?
//
// Leaf hashes are lowercase hex of the RFC 6962 leaf hash. Task ids are
// made by the engine ("t_" and 32 random hex digits), never taken from
// callers.
//
// # States
//
// A task is pending_acceptance (no owner; perhaps reserved for one actor),
// accepted (one owner), completed (the owner reported completion; it keeps
// the owner) or cancelled (no owner). completed and cancelled are final:
// nobody can accept, hand off, release or cancel such a task. The owner of
// a completed task may still add claims, so a claim can be made more
// certain later with new evidence; the task stays completed.
//
// # Rules
//
//   - Identity is the authenticated actor, passed by the caller of the
//     engine, never an argument.
//   - create: the task starts with no owner; offer_to only reserves it.
//   - accept: refused if the task is owned (by another actor, or already by
//     the caller), reserved for another actor, completed or cancelled.
//     Accepting clears the reservation.
//   - claim (report_completion): only the owner; provenance exactly one of
//     observed, reviewed, reported; reported needs a source; at most
//     [MaxEvidence] distinct evidence indices, each an existing entry; an
//     observed claim may cite only call entries by the claimant that lie
//     inside one of its ownership intervals of this task (after its accept,
//     before the entry that ended that ownership) and whose call.result is
//     in the log before the claim: the proxy writes it before the client
//     sees the outcome, so a call still running or cut off is one whose
//     outcome the claimant cannot have observed. A claim more certain
//     (reported < reviewed < observed) than the same actor's previous claim
//     on the task must cite an index that actor has not cited on it before;
//     a call.result counts as its call, so citing the result of a call
//     cited before (or the call of a result cited before) is nothing new,
//     and the task's own entries and the actor's own task entries (its
//     earlier claims) are no evidence at all.
//     When written (not when rebuilt, so that older logs keep their
//     state), an observed claim must cite at least one entry; at least
//     one call it cites must have succeeded (a failed call shows the work
//     fail, not done); and it may not cite a call (or its call.result)
//     that an observed claim on another task cites: calls name no task,
//     so one call is observed evidence for one task only.
//     A task holds at most [MaxClaims] claims. Once it holds [MaxEntries]
//     entries, accept, handoff and release are refused when written (not
//     when rebuilt): its owner may still complete it, its creator cancel it.
//   - handoff: only the owner of an accepted task, to another non-empty
//     actor; the entry carries a snapshot; the owner is cleared and the task
//     reserved for the recipient, who must accept it.
//   - release: only the owner of an accepted task; the task returns to
//     pending_acceptance with no owner and no reservation.
//   - cancel: only the creator, of a task neither completed nor cancelled;
//     any owner and reservation are cleared.
//
// A refused operation returns the error of [Refuse], a [*log.ProblemsError]
// whose one problem names the rule and says what to do ([Refusal] reads it),
// and writes nothing.
//
// # Concurrency
//
// Each task has its own lock, held from validation through the durable
// append to the state update, so operations on one task are serialized (of
// many concurrent accepts exactly one wins) while operations on distinct
// tasks run in parallel and share the log's group commits.
//
// # Memory
//
// The log is the truth, and the engine holds only an index into it: each
// task's id, state and the log indices of its entries, about 36 bytes a
// task and 9 an entry. Whole tasks (history, ownership intervals, claims) are kept in a
// cache bounded in bytes ([Options.CacheBytes]) and rebuilt from their
// entries when needed, so memory grows by the index alone, not by what
// tasks hold. The engine also keeps, for the observed rules, the calls
// that have no call.result yet, those whose call.result failed (8 bytes
// each) and, for each call an observed claim cites, the task it backs. [Engine.ListUnaccepted] returns the oldest unaccepted tasks
// up to a limit and how many there are. [Engine.SaveIndex] saves the
// index ([Options.IndexFile]) so that the next Open replays only the
// entries written after it.
//
// # Rebuilding
//
// [Rebuild] replays entries through the same rules the engine enforces. An
// entry that breaks a rule has no effect and is reported as a [Violation],
// which an audit treats as a failure; [Open] does the same at start so a
// bad entry cannot stop the sidecar.
package opp
