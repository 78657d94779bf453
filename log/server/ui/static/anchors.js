// The anchors of the checkpoints that hold an entry: each anchored tree
// checked against the verified checkpoint (same root, or an RFC 6962
// consistency proof from the server), its RFC 3161 times and transparency
// log indices listed as the server reports them.

import { verifyConsistency, encodeBase64, decodeBase64 } from "./verify.js";
import { get, entryIndex, isObject, WrongShape } from "./read.js";
import { el, fill, shownValue, said, listed, timeOf, wrong } from "./shown.js";

// maxPages bounds the pages of anchors read for one entry: a server that
// names a new next page in every answer would otherwise be paged forever.
const maxPages = 50;

// maxShown is how many anchors holding the entry are shown: the earliest
// few say when it was anchored; the rest add nothing.
const maxShown = 5;

// anchorsCovering pages through /log/anchors until it has the anchors of
// checkpoints that include entry index (at most maxShown). It returns
// them, what was wrong in the answers, and whether paging stopped before
// the listing's end. A page of the wrong shape does not end the paging
// while a next page can still be named (the last anchor in it with a
// name): its anchors are shown, and what was wrong with it. Paging stops
// where no next page can be named, where the next page named was read
// already (a server that pages in a circle), and at maxPages; the page
// says which. A wrong first page ended the paging, and the valid anchors
// after it were never shown.
async function anchorsCovering(index) {
  const got = { list: [], wrongs: [], stopped: false, unsized: 0, seen: new Set() };
  const stop = (why) => {
    got.wrongs.push(new Error(why));
    got.stopped = true;
  };
  const pagedAfter = new Set();
  let after = "";
  for (let page = 0; got.list.length < maxShown; page++) {
    const path = "/log/anchors" + (after ? "?after=" + encodeURIComponent(after) : "");
    if (page === maxPages) {
      stop(`paging stopped after ${maxPages} pages of anchors, the most this page reads: ${path} and the pages after it are not read`);
      break;
    }
    let list;
    try {
      list = await get(path, "json");
    } catch (e) {
      // No first page at all is no listing (a log with no anchors, or a
      // reader with no token): the section says only that.
      if (page === 0 && e.status !== undefined) throw e;
      stop(`${e.message}; paging stopped there: the anchors listed after it are not read`);
      break;
    }
    if (!Array.isArray(list)) {
      const what = new WrongShape("the answer to " + path, list, "an array of anchors").message;
      if (!named(list)) {
        stop(what + "; paging stopped there: it names no anchor for the next page to start after");
        break;
      }
      // One anchor not in a list still names the next page.
      got.wrongs.push(new Error(what + "; it is read as a list of that one anchor, whose name the next page starts after"));
      list = [list];
    }
    if (list.length === 0) break;
    readPage(list, path, index, got);
    const next = nextPage(list, path, got.wrongs);
    if (next === null) {
      got.stopped = true;
      break;
    }
    if (pagedAfter.has(next)) {
      stop(`the answer to ${path} names as the next page /log/anchors?after=${encodeURIComponent(next)}, which was read already; paging stopped there: it would go round in circles`);
      break;
    }
    pagedAfter.add(next);
    after = next;
  }
  if (got.unsized > 0) got.wrongs.push(new Error(`${got.unsized} of the anchors listed name no tree size (a whole number): not shown`));
  return got;
}

// named says whether a is an anchor with a name a next page can start
// after.
function named(a) {
  return isObject(a) && typeof a.name === "string" && a.name !== "";
}

// readPage adds to got the anchors of one page that include entry index,
// and says what was wrong with its members. An anchor read on an earlier
// page (a page that named its next page by an anchor before its last, so
// that the next one lists the last again) is not counted twice.
function readPage(list, path, index, got) {
  let odd = -1;
  let odds = 0;
  for (const [i, a] of list.entries()) {
    if (!isObject(a)) {
      if (odds++ === 0) odd = i;
      continue;
    }
    const key = JSON.stringify(a);
    if (got.seen.has(key)) continue;
    got.seen.add(key);
    // An anchor of no tree size anchors nothing to show.
    const size = entryIndex(a.size);
    if (size === null) got.unsized++;
    else if (size > index && got.list.length < maxShown) got.list.push(a);
  }
  if (odds > 0) {
    const first = new WrongShape(`member ${odd} of the answer to ${path}`, list[odd], "an anchor (an object)").message;
    got.wrongs.push(new Error(odds === 1 ? first + ": not shown" : `${first}, and ${odds - 1} more of its members are no objects either: not shown`));
  }
}

// nextPage is the name the page after list starts after: its last
// anchor's, or else the name of the last anchor in it that has one (what
// was wrong is added to wrongs). It is null, with why paging stops there
// in wrongs, if no anchor in it has a name.
function nextPage(list, path, wrongs) {
  const last = list[list.length - 1];
  if (named(last)) return last.name;
  const what = `the name of the last anchor in the answer to ${path}`;
  const why = last?.name === "" ? what + " is empty" : new WrongShape(what, last?.name, "text").message;
  const k = list.findLastIndex(named);
  if (k < 0) {
    wrongs.push(new Error(why + "; paging stopped there: no anchor in it has a name for the next page to start after"));
    return null;
  }
  wrongs.push(new Error(why + `; the next page starts after member ${k}, the last anchor in it with a name`));
  return list[k].name;
}

// linkTree says whether the tree of size and root is the verified
// checkpoint cp's or provably a prefix or extension of it (an RFC 6962
// consistency proof from the server, checked here): {ok, text}. It is
// the one check of how another tree relates to the verified one, for the
// anchors and for a task's steps proved against another checkpoint.
export async function linkTree(size, root, cp) {
  if (size === cp.size) return encodeBase64(root) === encodeBase64(cp.root) ? { ok: true, text: "✓ the verified checkpoint itself (same root)" } : { ok: false, text: "✗ same size as the verified checkpoint, DIFFERENT ROOT" };
  const [old, neu, oldRoot, newRoot] = size < cp.size ? [size, cp.size, root, cp.root] : [cp.size, size, cp.root, root];
  let text;
  try {
    text = await get(`/log/proof/consistency?old=${old}&new=${neu}`);
  } catch (e) {
    return { ok: false, text: "not checked: " + (e.status === 404 ? "no consistency proof is available here" : e.message) };
  }
  let proof;
  try {
    proof = text.split("\n").filter((l) => l !== "").map(decodeBase64);
  } catch {
    return { ok: false, text: "✗ the consistency proof is not base64" };
  }
  const ok = await verifyConsistency(old, neu, oldRoot, newRoot, proof);
  if (!ok) return { ok: false, text: `✗ NOT consistent with the verified checkpoint (size ${cp.size}): the log forked or the listing is wrong` };
  return { ok: true, text: size < cp.size ? `✓ a prefix of the verified checkpoint (consistency proof ${old} → ${neu} checked)` : `✓ extends the verified checkpoint (consistency proof ${old} → ${neu} checked)` };
}

// linkAnchor is linkTree of anchor a's tree.
async function linkAnchor(a, cp) {
  let root;
  try {
    root = decodeBase64(a.root);
  } catch {
    return { ok: false, text: "✗ the anchor's root is not base64" };
  }
  return linkTree(BigInt(a.size), root, cp);
}

// earliestLinked is the position in list of the anchor of the smallest
// tree whose link to the verified checkpoint holds, or -1: the server's
// order is its word, and an anchor of a tree not linked to the verified
// one anchors nothing this page knows of.
function earliestLinked(list, links) {
  let at = -1;
  list.forEach((a, i) => {
    if (links[i].ok && (at < 0 || BigInt(a.size) < BigInt(list[at].size))) at = i;
  });
  return at;
}

// showAnchors shows in sec the anchors holding entry index, checked
// against res's checkpoint; live says whether the page still shows that
// entry, checked after every wait so that a left entry's anchors never
// show under the next one.
export async function showAnchors(sec, index, res, live) {
  sec.hidden = false;
  let list, wrongs, stopped;
  try {
    ({ list, wrongs, stopped } = await anchorsCovering(index));
  } catch (e) {
    if (!live()) return;
    fill(sec, el("h2", {}, "Anchors"), el("p", {}, e.status === 404 ? "This log has no anchors." : e.message));
    return;
  }
  const cp = res.ok ? res.checkpoint : null;
  const links = await Promise.all(list.map((a) => (cp ? linkAnchor(a, cp) : { ok: false, text: "not checked: the checkpoint did not verify" })));
  if (!live()) return;
  const earliest = earliestLinked(list, links);
  const rows = list.map((a, i) =>
    el(
      "tr",
      {},
      el("td", {}, String(a.size) + (i === earliest ? " — the earliest anchor holding this entry" : "")),
      el("td", {}, links[i].text),
      el("td", {}, listed(a.timestamps, `the timestamps of the anchor of size ${a.size}`, "an array", (t) => el("div", {}, timeOf(t?.time), " by ", shownValue(t?.url)))),
      el("td", {}, listed(a.tlogs, `the transparency log entries of the anchor of size ${a.size}`, "an array", (t) => el("div", {}, t?.kind === "rekor.v1" ? said`Rekor log index ${t.log_index}` : said`${t?.kind} log index ${t?.log_index}`, t?.integrated_time ? said` (integrated ${unixTime(t.integrated_time)})` : "", " at ", shownValue(t?.url)))),
    ),
  );
  fill(sec,
    el("h2", {}, "Anchors"),
    rows.length
      ? el("table", {}, el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Anchored tree size"), el("th", { scope: "col" }, "Link to the verified checkpoint"), el("th", { scope: "col" }, "RFC 3161 time"), el("th", { scope: "col" }, "Transparency log"))), el("tbody", {}, rows))
      : el("p", {}, stopped ? "No anchor read here holds this entry: paging stopped before the end of the listing (see below)." : "No anchor holds this entry yet."),
    wrongs.map((e) => el("p", {}, wrong(e))),
    el("p", { class: "note" }, "The anchors' times and log indices are listed as the server reports them; this page checks how each anchored tree relates to the verified checkpoint, and calls earliest the smallest tree so linked. `provlog audit` and `provlog verify-evidence` check the RFC 3161 tokens and Rekor entries themselves."),
  );
}

// unixTime is seconds since 1970 in ISO 8601, or v as it is if it is no
// such time.
function unixTime(v) {
  const d = new Date(typeof v === "number" ? v * 1000 : NaN);
  return Number.isNaN(d.getTime()) ? v : d.toISOString();
}
