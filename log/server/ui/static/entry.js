// The entry view: one entry's fields, its auth member and its exact bytes,
// every value shown as text (shown.js).

import { parseJSON, isObject, own, WrongShape } from "./read.js";
import { el, fill, render, shownValue, said, joined, wrong, quoted } from "./shown.js";

const kindWords = {
  genesis: "the log's first entry",
  call: "a tool call, recorded before it ran",
  "call.result": "the result of a tool call",
  tools: "a server's tool list",
  "resource.read": "a resource the agent read",
  "prompt.get": "a prompt the agent fetched",
  anchor: "an anchoring of a checkpoint",
  "task.create": "a task was created",
  "task.accept": "a task was accepted",
  "task.claim": "a completion claim",
  "task.handoff": "a task was handed off",
  "task.release": "a task was released",
  "task.cancel": "a task was cancelled",
  "witness.conflict": "a witness reported a conflict",
  namespace: "an identity provider's actor namespace was reserved",
  purge: "retained data was purged; its hashes stay",
  replay: "a replay run's report on recorded calls",
};

// showEntry shows entry index (its exact bytes) in sec: its fields, its
// auth, its redacted values marked, and the bytes that were hashed. It
// returns the entry read, or null if it is no JSON object.
export function showEntry(sec, index, bytes) {
  sec.hidden = false;
  const text = new TextDecoder().decode(bytes);
  let entry, problem;
  try {
    entry = parseJSON(text, "shown only in the exact bytes below");
    if (!isObject(entry)) problem = wrong(new WrongShape(`entry ${index}`, entry, "an object"));
  } catch {
    problem = "The entry is not JSON.";
  }
  if (problem) {
    fill(sec, el("h2", {}, `Entry ${index}`), el("p", {}, problem), el("pre", {}, text));
    return null;
  }
  // Any member may be any JSON, nested as deeply as maxDepth allows.
  const rows = [
    ["Index", String(index)],
    ["Kind", [shownValue(entry.kind), ` (${own(kindWords, entry.kind) || "another kind"})`]],
    ["Time", shownValue(entry.time)],
    ["Actor", shownValue(entry.actor)],
  ];
  const labels = { server: "Server", tool: "Tool", task_id: "Task", title: "Title", provenance: "Provenance", summary: "Summary", description: "Description", note: "Note", call: "Call entry", is_error: "Tool error", size: "Anchored size" };
  // What an agent wrote is quoted as the agent's (quoted).
  const agents = new Set(["title", "summary", "description", "note"]);
  for (const [k, label] of Object.entries(labels)) {
    if (entry[k] !== undefined) rows.push([label, agents.has(k) && typeof entry[k] === "string" ? quoted(entry[k]) : shownValue(entry[k])]);
  }
  const redacted = text.split('"[redacted]"').length - 1;
  const parts = [];
  render(entry, 0, parts, true);
  fill(sec,
    el("h2", {}, `Entry ${index}`),
    el("dl", {}, rows.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])),
    authOf(entry.auth, `the auth of entry ${index}`, authBlock),
    redacted ? el("p", { class: "redacted-note" }, `${redacted} value${redacted > 1 ? "s read" : " reads"} “[redacted]” (marked below): the sidecar writes that in place of a value its redact list names, which the log then never held; the entry does not record which values it replaced, and an agent or a server may send that text itself.`) : null,
    el("pre", { class: "json", "aria-label": "the entry's fields" }, parts),
    el("details", {}, el("summary", {}, `The exact ${bytes.length} bytes that were hashed`), el("pre", { class: "raw" }, text)),
  );
  return entry;
}

// actChain names the parties of an RFC 8693 act chain, outermost (the
// party acting now) first.
function actChain(a) {
  const out = [];
  for (let x = a.act; x && out.length < 8; x = x.act) {
    out.push([shownValue(x.sub), x.client_id ? said` (client ${x.client_id})` : "", x.iss && x.iss !== a.iss ? said` of ${x.iss}` : ""]);
  }
  return out;
}

// authBlock shows an entry's auth member: who the identity provider says
// made the request, through which client and for whom. The log holds
// the token's SHA-256, never the token.
function authBlock(a) {
  const rows = [["Issuer", shownValue(a.iss)], ["Subject", shownValue(a.sub)]];
  if (a.client_id) rows.push(["Client", shownValue(a.client_id)]);
  const chain = actChain(a);
  if (chain.length) rows.push(["Acting", [chain[0], said`, for ${a.sub}`, chain.length > 1 ? [", through ", joined(chain.slice(1), ", then ")] : ""]]);
  if (a.scope) rows.push(["Scope", shownValue(a.scope)]);
  if (a.jti) rows.push(["Token id (jti)", shownValue(a.jti)]);
  rows.push(["Checked", a.via === "jwt" ? "a JWT access token, signature and claims checked by the sidecar (RFC 9068)" : "an opaque token the issuer vouched for (RFC 7662 introspection)"]);
  rows.push(["Token SHA-256", el("code", {}, shownValue(a.token_sha256))]);
  return [
    el("h3", {}, "Authenticated by an identity provider"),
    el("dl", { class: "auth", "aria-label": "how the actor was authenticated" }, rows.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])),
    el("p", { class: "note" }, "The token itself never reaches the log; the entry keeps its SHA-256."),
  ];
}

// authOf is f of auth member a; nothing if there is none, and what was
// wrong if it is no object.
export function authOf(a, what, f) {
  if (a === undefined || a === null) return null;
  return isObject(a) ? f(a) : wrong(new WrongShape(what, a, "an object"));
}

// authWords is a timeline step's short account of its auth member.
export function authWords(a) {
  const chain = actChain(a);
  const parts = [];
  if (chain.length) parts.push(["acted by ", joined(chain, " through ")]);
  if (a.client_id) parts.push(said`client ${a.client_id}`);
  parts.push(said`issuer ${a.iss}`);
  return el("span", { class: "auth" }, " (", joined(parts, ", "), ")");
}

