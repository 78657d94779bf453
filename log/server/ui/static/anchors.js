// The anchors of the checkpoints that hold an entry: each anchored tree
// checked against the verified checkpoint (same root, or an RFC 6962
// consistency proof from the server), its RFC 3161 times and transparency
// log indices listed as the server reports them.

import { verifyConsistency, encodeBase64, decodeBase64 } from "./verify.js";
import { get, entryIndex, WrongShape } from "./read.js";
import { el, fill, shownValue, said, listed, timeOf, wrong } from "./shown.js";

// anchorsCovering pages through /log/anchors until it has the anchors of
// checkpoints that include entry index (at most a few). It returns them,
// and what was wrong in the answers: a page that is no array, or whose
// last anchor has no name to page on, ends the paging.
async function anchorsCovering(index) {
  const out = [];
  const wrongs = [];
  let unsized = 0;
  let after = "";
  for (let page = 0; page < 50 && out.length < 5; page++) {
    const path = "/log/anchors" + (after ? "?after=" + encodeURIComponent(after) : "");
    const list = await get(path, "json");
    if (!Array.isArray(list)) {
      wrongs.push(new WrongShape("the answer to " + path, list, "an array of anchors"));
      break;
    }
    for (const a of list) {
      // An anchor of no tree size anchors nothing to show.
      const size = entryIndex(a?.size);
      if (size === null) unsized++;
      else if (size > index && out.length < 5) out.push(a);
    }
    if (list.length === 0) break;
    after = list[list.length - 1]?.name;
    if (typeof after !== "string") {
      wrongs.push(new WrongShape(`the name of the last anchor in the answer to ${path}`, after, "text (the next page starts after it)"));
      break;
    }
  }
  if (unsized > 0) wrongs.push(new Error(`${unsized} of the anchors listed name no tree size (a whole number): not shown`));
  return { list: out, wrongs };
}

// linkAnchor says whether anchor a's tree is the verified checkpoint's or
// provably a prefix or extension of it (an RFC 6962 consistency proof from
// the server, checked here).
async function linkAnchor(a, cp) {
  const size = BigInt(a.size);
  let root;
  try {
    root = decodeBase64(a.root);
  } catch {
    return "✗ the anchor's root is not base64";
  }
  if (size === cp.size) return encodeBase64(root) === encodeBase64(cp.root) ? "✓ the verified checkpoint itself (same root)" : "✗ same size as the verified checkpoint, DIFFERENT ROOT";
  const [old, neu, oldRoot, newRoot] = size < cp.size ? [size, cp.size, root, cp.root] : [cp.size, size, cp.root, root];
  let text;
  try {
    text = await get(`/log/proof/consistency?old=${old}&new=${neu}`);
  } catch (e) {
    return "not checked: " + (e.status === 404 ? "no consistency proof is available here" : e.message);
  }
  let proof;
  try {
    proof = text.split("\n").filter((l) => l !== "").map(decodeBase64);
  } catch {
    return "✗ the consistency proof is not base64";
  }
  const ok = await verifyConsistency(old, neu, oldRoot, newRoot, proof);
  if (!ok) return `✗ NOT consistent with the verified checkpoint (size ${cp.size}): the log forked or the listing is wrong`;
  return size < cp.size ? `✓ a prefix of the verified checkpoint (consistency proof ${old} → ${neu} checked)` : `✓ extends the verified checkpoint (consistency proof ${old} → ${neu} checked)`;
}

export async function showAnchors(sec, index, res) {
  sec.hidden = false;
  let list, wrongs;
  try {
    ({ list, wrongs } = await anchorsCovering(index));
  } catch (e) {
    fill(sec, el("h2", {}, "Anchors"), el("p", {}, e.status === 404 ? "This log has no anchors." : e.message));
    return;
  }
  const cp = res.ok ? res.checkpoint : null;
  const links = await Promise.all(list.map((a) => (cp ? linkAnchor(a, cp) : "not checked: the checkpoint did not verify")));
  const rows = list.map((a, i) =>
    el(
      "tr",
      {},
      el("td", {}, String(a.size) + (i === 0 ? " — the earliest anchor holding this entry" : "")),
      el("td", {}, links[i]),
      el("td", {}, listed(a.timestamps, `the timestamps of the anchor of size ${a.size}`, "an array", (t) => el("div", {}, timeOf(t?.time), " by ", shownValue(t?.url)))),
      el("td", {}, listed(a.tlogs, `the transparency log entries of the anchor of size ${a.size}`, "an array", (t) => el("div", {}, t?.kind === "rekor.v1" ? said`Rekor log index ${t.log_index}` : said`${t?.kind} log index ${t?.log_index}`, t?.integrated_time ? said` (integrated ${unixTime(t.integrated_time)})` : "", " at ", shownValue(t?.url)))),
    ),
  );
  fill(sec,
    el("h2", {}, "Anchors"),
    rows.length
      ? el("table", {}, el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Anchored tree size"), el("th", { scope: "col" }, "Link to the verified checkpoint"), el("th", { scope: "col" }, "RFC 3161 time"), el("th", { scope: "col" }, "Transparency log"))), el("tbody", {}, rows))
      : el("p", {}, "No anchor holds this entry yet."),
    wrongs.map((e) => el("p", {}, wrong(e))),
    el("p", { class: "note" }, "The anchors' times and log indices are listed as the server reports them; this page checks how each anchored tree relates to the verified checkpoint. `provlog audit` and `provlog verify-evidence` check the RFC 3161 tokens and Rekor entries themselves."),
  );
}

// unixTime is seconds since 1970 in ISO 8601, or v as it is if it is no
// such time.
function unixTime(v) {
  const d = new Date(typeof v === "number" ? v * 1000 : NaN);
  return Number.isNaN(d.getTime()) ? v : d.toISOString();
}
