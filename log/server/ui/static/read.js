// What the page reads from a server or a bundle, none of it trusted: each
// answer is fetched with the reader's token and bounded in how deeply it
// nests before any other part of the page walks it.

// reader holds the reader token sent with every request, if any.
export const reader = { token: "" };

class HTTPError extends Error {
  constructor(status, msg) {
    super(msg);
    this.status = status;
  }
}

// get fetches path with the reader's token, as text, "bytes" or "json"
// (bounded); an answer that is not a success throws an HTTPError with its
// status.
export async function get(path, as) {
  const headers = {};
  if (reader.token) headers.Authorization = "Bearer " + reader.token;
  const r = await fetch(path, { headers, cache: "no-store" });
  if (!r.ok) {
    const text = (await r.text()).trim();
    if (r.status === 401) throw new HTTPError(401, "the log needs a reader token for this: enter it above");
    throw new HTTPError(r.status, `${path}: ${r.status} ${text}`);
  }
  if (as === "bytes") return new Uint8Array(await r.arrayBuffer());
  if (as === "json") {
    let v;
    try {
      v = await r.json();
    } catch {
      throw new Error(`the answer to ${path} is not JSON`);
    }
    return bounded(v, "whole only in the server's answer " + path);
  }
  return r.text();
}

// maxDepth bounds how deeply the arrays and objects the page reads nest:
// the log refuses an entry nested deeper than 100 (log's maxJCSDepth, the
// entry's own object included), so an entry of the log shows whole, and a
// deeper value (a hostile bundle's or server's, 100,000 nested arrays) is
// cut there rather than exhausting the browser's stack in whatever part of
// the page walks it (showing, joining into text, turning into a number).
export const maxDepth = 100;

// A Cut stands for an array or object cut at maxDepth: what it was, how
// deep it nested and how many values it held, and where it shows whole.
export class Cut {
  constructor(v, whole) {
    // Counted with a stack of its own: v may be nested far deeper than
    // the call stack allows. The cut values of an answer are disjoint,
    // so counting is linear.
    let values = 0;
    let depth = 0;
    const stack = [[v, 1]];
    while (stack.length > 0) {
      const [x, d] = stack.pop();
      values++;
      if (x === null || typeof x !== "object") continue;
      depth = Math.max(depth, d);
      for (const k of Object.keys(x)) stack.push([x[k], d + 1]);
    }
    this.kind = Array.isArray(v) ? "an array" : "an object";
    this.text = `[cut: ${this.kind} ${depth} levels deep, holding ${values - 1} values; ${whole}]`;
  }

  // A cut value joined into text reads as its summary.
  toString() {
    return this.text;
  }
}

// bounded returns v, as JSON.parse made it from what a server or bundle
// sent, with each array or object nested deeper than maxDepth replaced by
// a Cut (whole says where it shows whole, if anywhere). Every value the
// page reads goes through it (get, parseJSON), so no other part of the
// page need bound its own walk. One pass, with a stack of its own.
export function bounded(v, whole) {
  if (v === null || typeof v !== "object") return v;
  const stack = [[v, 1]];
  while (stack.length > 0) {
    const [x, d] = stack.pop();
    for (const k of Object.keys(x)) {
      const c = x[k];
      if (c === null || typeof c !== "object") continue;
      // An own "__proto__" (JSON.parse makes one) is set as itself: an
      // own data property shadows Object.prototype's setter.
      if (d < maxDepth) stack.push([c, d + 1]);
      else x[k] = new Cut(c, whole);
    }
  }
  return v;
}

// parseJSON is JSON.parse for what a server or bundle sent, bounded.
export function parseJSON(text, whole) {
  return bounded(JSON.parse(text), whole);
}

// entryIndex is v as an entry index, or null if v is none (a server names
// indices as JSON numbers).
export function entryIndex(v) {
  return Number.isSafeInteger(v) && v >= 0 ? BigInt(v) : null;
}

// kindOf names what a JSON value is, for saying how an answer is not of
// the shape the page reads.
export function kindOf(v) {
  if (v === undefined) return "missing";
  if (v === null) return "null";
  if (v instanceof Cut) return `${v.kind} nested deeper than ${maxDepth}`;
  if (Array.isArray(v)) return "an array";
  return { object: "an object", string: "text", number: "a number" }[typeof v] ?? String(v);
}

// A WrongShape is an answer, or a part of one, that is not of the shape
// the page reads: its message names which, what it is, and what the page
// expected, so that the reader sees what was wrong (a hostile bundle's
// log.json, a server's answer) and the page shows the rest without it.
export class WrongShape extends Error {
  constructor(what, v, want) {
    super(`${what} is ${kindOf(v)}, not ${want}`);
  }
}

// isObject says whether v is a JSON object, not an array or a value cut
// at maxDepth.
export function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Cut);
}

// textList is v if it is an array of strings, else a WrongShape naming v
// or its first member that is not a string.
export function textList(v, what, want) {
  if (!Array.isArray(v)) return new WrongShape(what, v, want);
  const i = v.findIndex((x) => typeof x !== "string");
  return i < 0 ? v : new WrongShape(`member ${i} of ${what}`, v[i], "text");
}

// own returns table's own value for key k, never an inherited one: an
// entry's kind is untrusted text, and "constructor" or "__proto__" would
// otherwise read Object's own members.
export function own(table, k) {
  return typeof k === "string" && Object.hasOwn(table, k) ? table[k] : undefined;
}
