// A task's history as a timeline: the server's account of the task's
// steps, each checked to be an entry of the log (verify.js) and, once
// checked, shown in its entry's own words.

import { verifyEntry, toHex } from "./verify.js";
import { get, parseJSON, entryIndex, isObject, kindOf, own, WrongShape } from "./read.js";
import { el, fill, shownValue, said, joined, listed, timeOf, wrong, quoted } from "./shown.js";
import { link } from "./state.js";
import { authOf, authWords } from "./entry.js";
import { linkTree } from "./anchors.js";

// readTask is the answer to /log/task/<id>, a task with its history, or
// throws what was wrong with it. The history is the server's account: it
// must be of the task asked for (each step is then checked to be that
// task's entry).
export async function readTask(id) {
  const path = "/log/task/" + encodeURIComponent(id);
  const task = await get(path, "json");
  if (!isObject(task)) throw new WrongShape("the answer to " + path, task, "an object (a task)");
  if (task.task_id !== id) throw new Error(`the server answered with the history of task ${typeof task.task_id === "string" ? task.task_id : kindOf(task.task_id)}, not ${id}`);
  if (!Array.isArray(task.history)) throw new WrongShape(`the history in the answer to ${path}`, task.history, "an array of steps");
  return task;
}

// eventWords are a step's words: the page's own, with what an agent
// wrote (titles, summaries, notes) quoted as the agent's (quoted).
const eventWords = {
  "task.create": (e) => ["created ", quoted(e.title), e.offer_to ? said`, offered to ${e.offer_to}` : ""],
  "task.accept": () => "accepted the task",
  "task.claim": (e) => [said`claimed completion (${e.provenance}): `, quoted(e.summary)],
  "task.handoff": (e) => [said`handed the task to ${e.to}`, e.note ? [": ", quoted(e.note)] : ""],
  "task.release": (e) => ["released the task", e.note ? [": ", quoted(e.note)] : ""],
  "task.cancel": (e) => ["cancelled the task", e.note ? [": ", quoted(e.note)] : ""],
};

// entryLink links to entry v of a task's history, or shows v if it names
// no entry.
function entryLink(v) {
  const i = entryIndex(v);
  return i === null ? said`entry ${v}` : el("a", { href: link({ entry: String(i) }) }, `entry ${i}`);
}

// showTimeline shows in sec the history of task (read for entry's task
// if not given) and checks each step (checkEvent) against cp, the
// checkpoint the verdict verified (null if it did not); live says
// whether the page still shows that entry, checked after every wait.
export async function showTimeline(sec, index, entry, task, keyText, keyFault, cp, live) {
  if (!task) {
    if (!entry || typeof entry.task_id !== "string") return;
    try {
      task = await readTask(entry.task_id);
    } catch (e) {
      if (!live()) return;
      sec.hidden = false;
      fill(sec, el("h2", {}, "Task history"), el("p", {}, e.message));
      return;
    }
    if (!live()) return;
  }
  sec.hidden = false;
  const checks = [];
  let before = null; // the index of the step before, in the server's order
  const items = task.history.map((e, i) => {
    if (!isObject(e)) return el("li", {}, wrong(new WrongShape(`step ${i + 1} of the history of task ${task.task_id}`, e, "an object")));
    const at = entryIndex(e.index);
    const current = at === index;
    const mark = el("span", { class: "check" }, "(checking…)");
    const li = el("li", current ? { "aria-current": "true", class: "current" } : {}, stepParts(e, i, mark));
    const after = before;
    if (at !== null) before = at;
    if (checks.length >= maxChecked) fill(mark, "not checked here (open it to check)");
    else {
      checks.push(checkEvent(e, task.task_id, keyText, cp, after).then(async (r) => {
        if (!live()) return;
        // The check compares only what names the entry (index, leaf hash,
        // kind, actor, task): a verified step shows its entry's own words,
        // never the server's, which could say anything beside them.
        if (r.ok) fill(li, stepParts({ ...r.entry, index: e.index }, i, mark));
        markEvent(mark, r, keyFault);
        const open = r.ok && r.entry.kind === "task.claim" ? await openCalls(r.entry.evidence, keyText, r.checkpoint) : [];
        if (live()) li.append(...open);
      }));
    }
    return li;
  });
  fill(sec,
    el("h2", {}, "Task history: ", quoted(task.title)),
    el("p", {}, said`Task ${task.task_id}, ${task.state}`, task.owner ? said`, owned by ${task.owner}` : "", `. ${task.history.length} entries, oldest first. The history is the server's account; this page checks that each step is an entry of the log, with the same key as above, in log order, and in the checkpoint verified above or one linked to it.`),
    el("ol", { class: "timeline" }, items),
  );
  await Promise.all(checks);
}

// stepParts is what a timeline step shows of step e (the server's, or
// once verified its entry's), mark being its check.
function stepParts(e, i, mark) {
  const words = (own(eventWords, e.kind) || (() => shownValue(e.kind)))(e);
  return [
    timeOf(e.time),
    " ",
    el("strong", {}, shownValue(e.actor)),
    authOf(e.auth, `the auth of step ${i + 1}`, authWords),
    " ",
    words,
    " ",
    entryLink(e.index),
    " ",
    mark,
    e.evidence === undefined ? null : el("span", {}, " — evidence: ", joined(listed(e.evidence, `the evidence of step ${i + 1}`, "an array of entry indices", entryLink), ", ")),
  ];
}

// maxChecked bounds the timeline steps checked on one page.
const maxChecked = 100;

// checkEvent verifies one step of a task's history: the entry at its
// index verifies like the opened one, has the leaf hash the history names,
// and is that step (kind, actor, task). It comes after the step before it
// (index after, if any), and its proof is against cp, the checkpoint the
// verdict verified, or one linked to it (a consistency proof, for a step
// past cp): a history out of log order, or naming entries not in a tree
// linked to the verdict's, is not the log's. It returns the entry
// too, whose words the step then shows.
async function checkEvent(e, taskID, keyText, cp, after) {
  const i = entryIndex(e.index);
  if (i === null) return { ok: false, reason: "the history names no entry index" };
  if (after !== null && i <= after) return { ok: false, reason: `out of log order: the history lists it after entry ${after}`, keyReason: null };
  if (!keyText) return { ok: false, reason: null, keyReason: "there is no verifier key to check against" };
  // A step in the verdict's tree is proved in it; one past it (appended
  // since, or past a cosigned checkpoint) in the latest, linked to it.
  const past = cp && i >= cp.size;
  try {
    const [receipt, bytes] = await Promise.all([get("/log/proof/inclusion?index=" + i + (cp && !past ? "&size=" + cp.size : "")), get("/log/entry/" + i, "bytes")]);
    const res = await verifyEntry(bytes, receipt, keyText, i);
    if (res.reason) return res;
    // A key that does not fit leaves the step's own checks to say.
    const failed = (reason) => ({ ok: false, reason, keyReason: res.keyReason });
    if (toHex(res.leaf) !== e.leaf_hash) return failed("the history names another leaf hash");
    const got = parseJSON(new TextDecoder().decode(bytes), "shown only in the entry's exact bytes");
    if (!isObject(got) || got.kind !== e.kind || got.actor !== e.actor || got.task_id !== taskID) return failed("the entry is not the step the history shows");
    if (cp && res.checkpoint) {
      const linked = await linkTree(res.checkpoint.size, res.checkpoint.root, cp);
      const where = past ? `entry ${i} is past the checkpoint the verdict verified (size ${cp.size}), and` : "";
      if (!linked.ok) return failed(`${where} its proof is against a checkpoint of size ${res.checkpoint.size}, not linked to the verdict's: ${linked.text}`.trim());
    }
    return { ...res, entry: got };
  } catch (err) {
    return { ok: false, reason: err.message, keyReason: null };
  }
}

// maxEvidence bounds the evidence of one claim checked for an outcome,
// and maxScan the entries after a call read for its call.result.
const maxEvidence = 20;
const maxScan = 512;

// noOutcome is what a claim's evidence without a recorded outcome is, in
// the words of provlog tasks show.
const noOutcome = "(cut off by a crash or kill, refused when the log failed while recording it, or under way)";

// openCalls are the flags beside a verified claim for the calls its
// evidence cites that have no recorded outcome in the log of checkpoint
// cp, from entries this page verified: the cited entry is a call without
// its own outcome (an old log's call holds it), and no verified
// call.result of the same actor names it among the entries after it.
async function openCalls(evidence, keyText, cp) {
  if (!Array.isArray(evidence) || !cp) return [];
  const out = [];
  for (const x of evidence.slice(0, maxEvidence).map(entryIndex)) {
    if (x === null || x >= cp.size) continue;
    const call = await verifiedEntry(x, keyText, cp);
    if (!call || call.kind !== "call" || ["is_error", "duration_ns", "result_sha256"].some((k) => Object.hasOwn(call, k))) continue;
    const r = await findResult(x, call.actor, keyText, cp);
    if (r.found) continue;
    const where = r.read < cp.size - x - 1n ? ` among the ${r.read} entries after it that this page read (the log holds ${cp.size})` : "";
    out.push(el("span", { class: "outcome wrong" }, ` — evidence entry ${x} is a call with no recorded outcome${where} ${noOutcome}`));
  }
  return out;
}

// verifiedEntry is entry i as parsed, once verified in the tree of size
// cp.size against keyText, or null.
async function verifiedEntry(i, keyText, cp) {
  try {
    const [receipt, bytes] = await Promise.all([get(`/log/proof/inclusion?index=${i}&size=${cp.size}`), get("/log/entry/" + i, "bytes")]);
    const res = await verifyEntry(bytes, receipt, keyText, i);
    if (!res.ok || !(await linkTree(res.checkpoint.size, res.checkpoint.root, cp)).ok) return null;
    const got = parseJSON(new TextDecoder().decode(bytes), "shown only in the entry's exact bytes");
    return isObject(got) ? got : null;
  } catch {
    return null;
  }
}

// findResult reads the entries after call x (at most maxScan, in the
// tree of size cp.size) for a call.result of actor naming it, and
// verifies the one it finds: {found, read}. An entry it cannot read is
// not its result; a server that hides the result only has the page flag
// the call.
async function findResult(x, actor, keyText, cp) {
  const end = cp.size < x + 1n + BigInt(maxScan) ? cp.size : x + 1n + BigInt(maxScan);
  let read = 0;
  for (let j = x + 1n; j < end; j += 16n) {
    const batch = [];
    for (let k = j; k < end && k < j + 16n; k++) batch.push(get("/log/entry/" + k, "bytes").then((b) => [k, b], () => [k, null]));
    for (const [k, b] of await Promise.all(batch)) {
      read++;
      let got = null;
      try {
        got = b && parseJSON(new TextDecoder().decode(b), "");
      } catch {
        // No JSON: not a result.
      }
      if (!isObject(got) || got.kind !== "call.result" || entryIndex(got.call) !== x || got.actor !== actor) continue;
      if (await verifiedEntry(k, keyText, cp)) return { found: true, read };
    }
  }
  return { found: false, read };
}

// markEvent shows a step's check: its own reason, and for its key, when
// the opened entry's did not fit either, a pointer to the verdict, which
// says once what was wrong with the key and what to do (each step
// repeated the whole reason). A step whose key fault the verdict did not
// have (its checkpoint is not the opened entry's) says its own.
function markEvent(mark, res, keyFault) {
  mark.dataset.verified = String(res.ok);
  if (res.ok) return fill(mark, "(✓ verified)");
  const pointed = res.keyReason && keyFault;
  if (pointed && res.reason) fill(mark, "(✗ not verified: ", res.reason, "; nor does the verifier key fit: see the verdict above)");
  else if (pointed) fill(mark, "(✗ not verified: no fitting verifier key; see the verdict above)");
  else fill(mark, "(✗ not verified: ", [res.reason, res.keyReason].filter(Boolean).join("; "), ")");
}

