// The auditor's view: looks an entry up, shows it with its task's history,
// its checkpoint's witnesses and anchors, and verifies it (verify.js).
// Everything the server sends is shown as text, never as markup.

import { verifyEntry, parseVKey, signatureLines, toHex, encodeBase64 } from "./verify.js";
import { reader, get, parseJSON, entryIndex, isObject, own, textList, WrongShape } from "./read.js";
import { el, fill, said, wrong } from "./shown.js";
import { showAnchors } from "./anchors.js";
import { state } from "./state.js";
import { showEntry } from "./entry.js";
import { readTask, showTimeline } from "./timeline.js";

const $ = (id) => document.getElementById(id);

// fragment reads #token=T&entry=N&vkey=VKEY (or hash=, task=), and any
// number of witness=WVKEY, the witness keys the reader trusts. A key or
// token pasted unescaped has its "+" read as a space by URLSearchParams;
// neither ever holds a space, so spaces are turned back.
function fragment() {
  const p = new URLSearchParams(location.hash.slice(1));
  const plus = (s) => (s === null ? null : s.replaceAll(" ", "+"));
  const witness = p.getAll("witness").map(plus).filter((w) => w.trim() !== "");
  return { token: plus(p.get("token")), vkey: plus(p.get("vkey")), witness, entry: p.get("entry"), hash: p.get("hash"), task: p.get("task") };
}

function setVerdict(verified, title, ...detail) {
  const v = $("verdict");
  if (verified === null) v.removeAttribute("data-verified");
  else v.setAttribute("data-verified", String(verified));
  fill(v, el("h2", {}, title), ...detail);
}

function clearSections() {
  for (const id of ["entry", "checkpoint", "anchors", "timeline"]) {
    $(id).replaceChildren();
    $(id).hidden = true;
  }
}

// route opens what the fragment names.
async function route() {
  const f = fragment();
  if (f.token !== null) {
    reader.token = f.token;
    $("token").value = f.token;
    // Keep the token out of the address bar and the history.
    const p = new URLSearchParams(location.hash.slice(1));
    p.delete("token");
    history.replaceState(null, "", location.pathname + location.search + "#" + p.toString());
  }
  state.vkey = f.vkey || "";
  state.witness = f.witness;
  $("vkey").value = state.vkey;
  const seq = ++state.seq;
  delete document.body.dataset.done;
  clearSections();
  try {
    await open(f, seq);
  } catch (e) {
    if (seq === state.seq) failed(e);
  }
  // Tests and scripts wait for this: everything for this fragment is shown.
  if (seq === state.seq) document.body.dataset.done = "true";
}

// failed shows that the page threw, whatever the verdict: after a false
// verdict (a substituted entry) a failure showed nothing, and the parts
// the page left unshown went unseen.
function failed(e) {
  const reason = el("p", { class: "reason failed" }, "the page failed: " + (e instanceof Error ? e.message : String(e)));
  if ($("verdict").dataset.verified === "false") $("verdict").append(reason);
  else setVerdict(false, "✗ Not verified", reason);
}

async function open(f, seq) {
  if (f.entry !== null) {
    $("q").value = f.entry;
    return openEntry({ index: f.entry }, seq);
  }
  if (f.hash !== null) {
    $("q").value = f.hash;
    return openEntry({ hash: f.hash }, seq);
  }
  if (f.task !== null) {
    $("q").value = f.task;
    return openTask(f.task, seq);
  }
  setVerdict(null, "Nothing opened yet", el("p", {}, "Enter an entry index, a leaf hash or a task id above."));
}

async function openTask(id, seq) {
  setVerdict(null, "Checking…");
  let task;
  try {
    task = await readTask(id);
  } catch (e) {
    if (seq === state.seq) setVerdict(false, "✗ Not verified", el("p", {}, "Task " + id + ": " + e.message));
    return;
  }
  if (seq !== state.seq) return;
  if (task.history.length === 0) return setVerdict(false, "✗ Not verified", el("p", {}, `the server's history of task ${id} has no steps`));
  const last = entryIndex(task.history[task.history.length - 1]?.index);
  if (last === null) return setVerdict(false, "✗ Not verified", el("p", {}, `the server's history of task ${id} names no entry index for its latest step`));
  return openEntry({ index: String(last) }, seq, task);
}

async function openEntry(sel, seq, task) {
  setVerdict(null, "Checking…");
  const query = sel.hash !== undefined ? "hash=" + encodeURIComponent(sel.hash.toLowerCase()) : "index=" + encodeURIComponent(sel.index);
  let receipt, bytes, index;
  try {
    if (sel.index !== undefined && !/^(0|[1-9][0-9]*)$/.test(sel.index)) throw new Error(`${JSON.stringify(sel.index)} is not an entry index`);
    if (sel.hash !== undefined && !/^[0-9a-fA-F]{64}$/.test(sel.hash)) throw new Error("a leaf hash is 64 hex digits");
    // By index, the receipt and the entry are fetched at once.
    const early = sel.index !== undefined ? get("/log/entry/" + sel.index, "bytes") : null;
    early?.catch(() => {}); // its error, if any, is reported when awaited
    receipt = await get("/log/proof/inclusion?" + query);
    const m = /\nindex (0|[1-9][0-9]*)\n/.exec(receipt);
    if (!m) throw new Error("the receipt has no index line");
    index = BigInt(m[1]);
    bytes = await (early || get("/log/entry/" + m[1], "bytes"));
    await state.infoP;
  } catch (e) {
    if (seq === state.seq) setVerdict(false, "✗ Not verified", el("p", {}, e.message));
    return;
  }
  if (seq !== state.seq) return;
  // Without a key of the reader's, a log.json whose vkey is no text
  // leaves nothing to check against; the rest is still shown.
  const key = state.vkey || state.info.vkey;
  const keyText = typeof key === "string" ? key : "";
  const want = sel.index !== undefined ? BigInt(sel.index) : undefined;
  let res = keyText ? await verifyEntry(bytes, receipt, keyText, want, sel.hash) : { ok: false, reason: null, keyReason: key.message + ": enter the verifier key to check against above", steps: [] };
  const fault = task ? taskFault(res, index, bytes, task) : null;
  if (fault) res = { ...res, ok: false, reason: res.reason ? res.reason + "; " + fault : fault };
  const known = await knownKeys(keyText);
  const wkeys = await witnessKeys();
  const lines = res.note ? await signatureLines(res.note, known, wkeys) : [];
  if (seq !== state.seq) return;
  showVerdict(res, keyText, lines);
  const entry = showEntry($("entry"), index, bytes);
  if (res.note && res.checkpoint) showCheckpoint(res, known, wkeys, lines);
  // The reader may open another entry while these load: each checks,
  // after every wait, that this route is still the page's, and shows
  // nothing of it otherwise (a left entry's history showed under the
  // next one's verdict).
  const live = () => seq === state.seq;
  await Promise.all([showAnchors($("anchors"), index, res, live), showTimeline($("timeline"), index, entry, task, keyText, !res.ok && res.keyReason !== null, res.ok ? res.checkpoint : null, live)]);
}

// taskFault says how entry index, opened for task's latest step, is not
// that step, or null: the step's index is the server's word, and a task
// lookup's verdict must be on an entry of the task, the one the step
// names by its leaf hash.
function taskFault(res, index, bytes, task) {
  const step = task.history[task.history.length - 1];
  if (res.leaf && toHex(res.leaf) !== step.leaf_hash) return `entry ${index} has the leaf hash ${toHex(res.leaf)}, not the one the latest step of task ${task.task_id} names`;
  let got = null;
  try {
    got = parseJSON(new TextDecoder().decode(bytes), "shown only in the entry's exact bytes");
  } catch {
    // An entry that is no JSON is of no task.
  }
  if (!isObject(got) || got.task_id !== task.task_id) return `entry ${index}, which the server's history names as the latest step of task ${task.task_id}, is not of that task`;
  return null;
}

// knownKeys are the note keys this page knows, each with what it is to
// the reader (label, and given if the reader gave it): the key checked
// against and, when the reader gave their own, the log's key as this
// server gives it, so each signature line can be said to be of which.
async function knownKeys(keyText) {
  const out = [];
  const add = async (text, label, given) => {
    try {
      out.push({ ...(await parseVKey(text)), label, given });
    } catch {
      // A key that cannot be read signed no line this page can name.
    }
  };
  if (keyText) await add(keyText, state.vkey ? "the key you gave" : serverKeyLabel(), Boolean(state.vkey));
  if (serverKeyDiffers()) await add(state.info.vkey, serverKeyLabel(), false);
  return out;
}

// carrier names what brought the key /ui/log.json gives, when that is a
// bundle or an evidence directory (provlog view) rather than a running
// log, or is null. Anyone can make a bundle with a key of their own, so
// its key is only the log's once compared with the one the reader was
// handed, as verify-bundle says.
function carrier() {
  return own({ bundle: "this bundle", evidence: "this evidence directory" }, state.info?.source) ?? null;
}

// serverKeyLabel is what the key /ui/log.json gives is to the reader.
function serverKeyLabel() {
  return carrier() ? `the key that came with ${carrier()}` : "the log's key as this server gives it";
}

// serverKeyDiffers is whether the reader gave a key of their own and
// /ui/log.json names another as the log's.
function serverKeyDiffers() {
  return Boolean(state.vkey) && typeof state.info.vkey === "string" && state.info.vkey.trim() !== state.vkey.trim();
}

// witnessKeys are the witness keys this page checks cosignatures
// against, each with given set if the reader gave it (#witness=), theirs
// first: a cosignature is what shows no one else was shown another
// history, and one by a key only the server names is the server's word.
// The keys of /ui/log.json that the reader did not give are checked too,
// and said to be the server's. A key that cannot be read checks no
// cosignature (a given one is listed in unread), and its lines are then
// of a key this page does not know.
async function witnessKeys() {
  const out = [];
  out.unread = [];
  const add = async (text, given) => {
    try {
      const k = await parseVKey(text);
      if (!out.some((o) => o.text === k.text)) out.push({ ...k, given });
    } catch {
      if (given) out.unread.push(text);
    }
  };
  for (const w of state.witness) await add(w, true);
  if (!(state.info.witnesses instanceof WrongShape)) for (const w of state.info.witnesses) await add(w, false);
  return out;
}

// witnessLabel says whose witness key wk is.
function witnessLabel(wk) {
  if (wk.given) return "a witness key you gave";
  const theirs = carrier() ? "a witness key that came with " + carrier() : "a witness key this server names";
  return state.witness.length ? theirs + ", not one you gave" : theirs;
}

// showVerdict says whether the entry verified. An entry that fails its
// own check and whose key does not fit either shows both, the entry's
// first (a changed entry is worse news than a wrong key), then the key's
// once, with what to do: the entry's alone hid the key's, which each
// step of the task then said again.
function showVerdict(res, keyText, lines) {
  const from = state.vkey ? "Checked against the verifier key you gave: "
    : carrier() ? `Checked against the verifier key that came with ${carrier()}, not one you gave: `
    : "Checked against the log's own verifier key, as this server gives it: ";
  const compare = !state.vkey && carrier() ? el("p", { class: "advice" }, `A key that comes with ${carrier()} can be anyone's (whoever made it chose it): compare this key with the log's verifier key from a source you trust, or enter that key above and look up again.`) : null;
  const key = keyText ? [el("p", {}, from, el("code", { class: "key" }, keyText)), compare] : null;
  if (!res.ok) {
    const entry = res.reason ? el("p", { class: "reason" }, res.reason) : null;
    const keyParts = res.keyReason ? [el("p", { class: "reason" }, res.reason ? "Nor does the verifier key fit: " : "", res.keyReason), keyAdvice(keyText)] : [];
    return setVerdict(false, res.keyReason ? keyTitle(keyText, Boolean(res.reason)) : "✗ Not verified", entry, keyParts, key);
  }
  const cp = res.checkpoint;
  setVerdict(
    true,
    "✓ Verified",
    el("p", {}, `Entry ${res.index} is in the log ${cp.origin} at size ${cp.size}: this browser computed its leaf hash, the root from the inclusion proof, and checked the checkpoint's signature itself.`),
    key,
    serverKeyNote(lines),
    el("ul", {}, res.steps.map((s) => el("li", {}, s))),
  );
}

// keyTitle names what was wrong with the key. The reader's own key is the
// trusted side: what failed is this server's checkpoint against it, which
// is as likely a server showing another history as a mistyped key.
function keyTitle(keyText, entryToo) {
  const what = !keyText ? "there is no verifier key to check against"
    : state.vkey ? "this server's checkpoint does not verify against the key you gave"
    : "the verifier key does not fit this log";
  if (entryToo) return "✗ Not verified: the entry fails its own check, and " + what;
  return !keyText ? "✗ Not verified: no verifier key to check against" : "✗ Not verified: " + what;
}

// serverKeyNote is a line on a key /ui/log.json names as the log's other
// than the reader's, which verified: the reader's key decides, but a
// server naming as the log's a key that does not sign its checkpoints is
// a red flag (it would have the next reader without a key of their own
// check against it).
function serverKeyNote(lines) {
  if (!serverKeyDiffers()) return null;
  const signed = lines.some((l) => l.key && !l.key.given && l.ok);
  const theirs = el("code", { class: "key" }, state.info.vkey);
  if (signed) return el("p", { class: "advice" }, "This server's /ui/log.json names another key as the log's own, which also signed this checkpoint: ", theirs);
  return el("p", { class: "advice" }, "This server's /ui/log.json names another key as the log's own, which did not sign this checkpoint: ", theirs, ". A server naming as the log's a key that does not sign its checkpoints is a red flag: make sure the key you gave is the one you were handed for this log.");
}

// keyAdvice says what to do about a key that does not fit the checkpoint,
// by whose key it is: the reader's own, or the one the server gives as
// the log's (none of text: the reason already says to enter one).
function keyAdvice(keyText) {
  if (!keyText) return null;
  if (state.vkey) {
    return el("p", { class: "advice" }, "Nothing here verifies against the key you gave. Either it is not the verifier key you were handed for this log (check it character for character), or this server is not showing that log's signed history, which is what this check is for: do not trust what it shows. To check against the log's own key as this server gives it, clear the verifier key field above and look up again.");
  }
  if (carrier()) return el("p", { class: "advice" }, `That key came with ${carrier()}, yet it did not sign the checkpoint ${carrier()} holds. Enter the log's verifier key, as you were handed it, in the verifier key field above and look up again.`);
  return el("p", { class: "advice" }, "This server gives that key as the log's own, yet it did not sign the checkpoint the server gives: the key or the checkpoint is not the log's. Enter the log's verifier key, as you were handed it, in the verifier key field above and look up again.");
}

// showCheckpoint shows the checkpoint and every signature line of its
// note with what is known of it: a line of a key this page was given
// verified or not, a line of such a key's name and another hash not that
// key, a witness's cosignature verified or not. Lines of the checked
// key's name were left out, so a note signed by the log's key but not
// the reader's showed no signature at all.
function showCheckpoint(res, known, wkeys, lines) {
  const sec = $("checkpoint");
  sec.hidden = false;
  const cp = res.checkpoint;
  const row = (name, hash, status) => el("tr", {}, el("td", {}, name), el("td", {}, el("code", {}, hash)), el("td", {}, status));
  const rows = lines.map((l) => row(l.name, l.hash, lineStatus(l, known)));
  for (const wk of wkeys) {
    if (!lines.some((l) => l.witness === wk)) rows.push(row(wk.name, toHex(wk.hash), witnessLabel(wk) + ": no cosignature on this checkpoint"));
  }
  const unread = state.info.witnesses instanceof WrongShape;
  fill(sec,
    el("h2", {}, "Checkpoint"),
    el("dl", {}, el("dt", {}, "Origin"), el("dd", {}, cp.origin), el("dt", {}, "Tree size"), el("dd", {}, String(cp.size)), el("dt", {}, "Root hash"), el("dd", {}, el("code", {}, encodeBase64(cp.root)))),
    el("h3", {}, "Signatures"),
    unread ? el("p", {}, wrong(state.info.witnesses)) : null,
    wkeys.unread.map((w) => el("p", { class: "wrong" }, "A witness key you gave cannot be read, and checks nothing: ", el("code", {}, w))),
    el("table", {}, el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Signed by"), el("th", { scope: "col" }, "Key hash"), el("th", { scope: "col" }, "What this page knows of it"))), el("tbody", {}, rows)),
    unread || lines.some((l) => l.witness) ? null : el("p", {}, "No witness this page knows of cosigned this checkpoint."),
    el("details", {}, el("summary", {}, "The signed checkpoint note"), el("pre", { class: "raw" }, res.noteText)),
  );
}

// cosignedAt is the time a witness's cosignature line l names: its own
// seconds, which a witness may put past the last date JavaScript can
// hold (year 275760), where a Date has no text.
function cosignedAt(l) {
  return Number.isNaN(l.time.getTime()) ? `${l.seconds} s after 1970, past any date this page can show` : l.time.toISOString();
}

// lineStatus says what is known of signature line l.
function lineStatus(l, known) {
  if (l.key) {
    const checked = (l.ok ? "✓ verified with " : "✗ does not verify with ") + l.key.label;
    return state.vkey && !l.key.given ? checked + "; not the key you gave" : checked;
  }
  if (l.witness) return l.ok ? `✓ cosignature verifies with ${witnessLabel(l.witness)} (signed ${cosignedAt(l)})` : "✗ cosignature does not verify with " + witnessLabel(l.witness);
  const named = known.find((k) => k.name === l.name);
  if (named) return said`by a key named ${l.name} with hash ${l.hash}: not ${named.label}`;
  return "signature by a key this page does not know: not checked";
}

function lookup(ev) {
  ev.preventDefault();
  delete document.body.dataset.done;
  reader.token = $("token").value.trim();
  const q = $("q").value.trim();
  const vkey = $("vkey").value.trim();
  const p = {};
  if (/^(0|[1-9][0-9]*)$/.test(q)) p.entry = q;
  else if (/^[0-9a-fA-F]{64}$/.test(q)) p.hash = q.toLowerCase();
  else p.task = q;
  if (vkey) p.vkey = vkey;
  const params = new URLSearchParams(p);
  for (const w of state.witness) params.append("witness", w);
  const h = "#" + params.toString();
  if (location.hash === h) route();
  else location.hash = h;
}

const sources = { sidecar: "a running provlog sidecar", bundle: "an export bundle, offline", evidence: "an evidence directory, offline" };

// readInfo is /ui/log.json's answer, each member the page reads either of
// its shape or a WrongShape saying how it is not: a wrong member shows as
// such, and the rest of the page without it.
function readInfo(v) {
  if (!isObject(v)) {
    const e = new WrongShape("/ui/log.json", v, "an object");
    return { vkey: e, source: e, witnesses: e, missing: [] };
  }
  const text = (k, want) => (typeof v[k] === "string" ? v[k] : new WrongShape("the " + k + " in /ui/log.json", v[k], want));
  return {
    vkey: text("vkey", "a verifier key (text)"),
    source: text("source", "text"),
    witnesses: textList(v.witnesses, "the witnesses in /ui/log.json", "an array of witness verifier keys"),
    missing: v.missing === undefined ? [] : textList(v.missing, "the missing in /ui/log.json", "an array of what the directory lacks"),
  };
}

async function main() {
  $("lookup").addEventListener("submit", lookup);
  window.addEventListener("hashchange", route);
  // The page's own info is read while the entry is fetched.
  state.infoP = get("/ui/log.json", "json").then((v) => {
    const info = (state.info = readInfo(v));
    const orWrong = (x) => (x instanceof WrongShape ? wrong(x) : x);
    fill($("logkey"), orWrong(info.vkey));
    if (carrier()) fill($("logkeylabel"), `The verifier key that came with ${carrier()} (compare it with the log's from a source you trust)`);
    fill($("source"), own(sources, info.source) || orWrong(info.source));
    const missing = info.missing instanceof WrongShape ? el("p", {}, wrong(info.missing)) : info.missing.length ? el("ul", {}, info.missing.map((m) => el("li", {}, m))) : null;
    if (missing) {
      $("missing").hidden = false;
      fill($("missing"), el("p", {}, el("strong", {}, "This directory says it lacks:")), missing);
    }
  });
  state.infoP.catch((e) => setVerdict(false, "✗ Not verified", el("p", {}, "cannot read /ui/log.json: " + e.message)));
  await route();
}

main();
