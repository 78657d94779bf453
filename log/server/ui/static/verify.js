// What the auditor's view checks itself, with the browser's WebCrypto and
// nothing else: RFC 6962 leaf and node hashes, the RFC 9162 inclusion-proof
// check, C2SP signed notes (Ed25519) and witness cosignatures
// (c2sp.org/tlog-cosignature, cosignature/v1). Every function here takes
// bytes or text from the server and trusts none of it.

const utf8 = new TextEncoder();

export function decodeBase64(s) {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s) || s.length % 4 !== 0) {
    throw new Error("not base64: " + JSON.stringify(s.slice(0, 40)));
  }
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function encodeBase64(b) {
  let s = "";
  for (const x of b) s += String.fromCharCode(x);
  return btoa(s);
}

export function toHex(b) {
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

function equalBytes(a, b) {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a[i] ^ b[i];
  return d === 0;
}

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

async function sha256(...parts) {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", concat(...parts)));
}

// leafHash is RFC 6962's hash of an entry: SHA-256(0x00 || entry).
export function leafHash(entry) {
  return sha256(Uint8Array.of(0), entry);
}

function nodeHash(left, right) {
  return sha256(Uint8Array.of(1), left, right);
}

// rootFromInclusion recomputes the tree root from a leaf hash and its
// inclusion proof, according to RFC 9162 section 2.1.3.2. index and size
// are BigInts. It throws when the proof has the wrong length for the tree.
export async function rootFromInclusion(index, size, leaf, proof) {
  if (index >= size) throw new Error(`index ${index} is not inside the tree of size ${size}`);
  let fn = index;
  let sn = size - 1n;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0n) throw new Error("the proof has more hashes than the tree allows");
    if ((fn & 1n) === 1n || fn === sn) {
      r = await nodeHash(p, r);
      while ((fn & 1n) === 0n && fn !== 0n) {
        fn >>= 1n;
        sn >>= 1n;
      }
    } else {
      r = await nodeHash(r, p);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  if (sn !== 0n) throw new Error("the proof has fewer hashes than the tree needs");
  return r;
}

// verifyConsistency checks an RFC 6962 consistency proof between the tree
// of size first with root firstRoot and the tree of size second with root
// secondRoot, according to RFC 9162 section 2.1.4.2. Sizes are BigInts.
export async function verifyConsistency(first, second, firstRoot, secondRoot, proof) {
  if (first > second) return false;
  if (first === second) return proof.length === 0 && equalBytes(firstRoot, secondRoot);
  if (first === 0n) return proof.length === 0;
  if (proof.length === 0) return false;
  const path = (first & (first - 1n)) === 0n ? [firstRoot, ...proof] : proof;
  let fn = first - 1n;
  let sn = second - 1n;
  while ((fn & 1n) === 1n) {
    fn >>= 1n;
    sn >>= 1n;
  }
  let fr = path[0];
  let sr = path[0];
  for (const c of path.slice(1)) {
    if (sn === 0n) return false;
    if ((fn & 1n) === 1n || fn === sn) {
      fr = await nodeHash(c, fr);
      sr = await nodeHash(c, sr);
      while ((fn & 1n) === 0n && fn !== 0n) {
        fn >>= 1n;
        sn >>= 1n;
      }
    } else {
      sr = await nodeHash(sr, c);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  return sn === 0n && equalBytes(fr, firstRoot) && equalBytes(sr, secondRoot);
}

const decimal = /^(0|[1-9][0-9]*)$/;

// parseReceipt reads a c2sp.org/tlog-proof@v1 receipt: optional extra
// line (provlog puts the leaf hash there), index, proof hashes, blank line,
// checkpoint note.
export function parseReceipt(text) {
  const lines = text.split("\n");
  if (lines[0] !== "c2sp.org/tlog-proof@v1") throw new Error("the receipt does not start with c2sp.org/tlog-proof@v1");
  let i = 1;
  let extra = null;
  if (lines[i] !== undefined && lines[i].startsWith("extra ")) extra = decodeBase64(lines[i++].slice(6));
  const idx = lines[i++];
  if (idx === undefined || !idx.startsWith("index ") || !decimal.test(idx.slice(6))) throw new Error("the receipt has no index line");
  const proof = [];
  for (;;) {
    const l = lines[i++];
    if (l === undefined) throw new Error("the receipt has no blank line before its checkpoint");
    if (l === "") break;
    const h = decodeBase64(l);
    if (h.length !== 32) throw new Error(`proof line ${proof.length + 1} is not a SHA-256 hash`);
    proof.push(h);
  }
  const note = lines.slice(i).join("\n");
  if (note === "") throw new Error("the receipt has no checkpoint");
  return { extra, index: BigInt(idx.slice(6)), proof, note };
}

// parseVKey reads a signed-note verifier key "name+hash+base64(type||key)".
export async function parseVKey(vkey) {
  const m = /^([^+\s]+)\+([0-9a-f]{8})\+([A-Za-z0-9+/=]+)$/.exec(vkey.trim());
  if (!m) throw new Error("the verifier key is not of the form name+hash+key");
  const [, name, hash, b64] = m;
  const key = decodeBase64(b64);
  if (key.length !== 33) throw new Error("the verifier key does not hold a 32-byte Ed25519 key");
  const want = (await sha256(utf8.encode(name + "\n"), key)).slice(0, 4);
  if (toHex(want) !== hash) throw new Error("the verifier key's hash does not match its name and key");
  return { name, hash: want, type: key[0], pub: key.slice(1), text: vkey.trim() };
}

// parseNote splits a signed note into its text and its signature lines.
export function parseNote(note) {
  const cut = note.lastIndexOf("\n\n");
  if (cut < 0 || !note.endsWith("\n")) throw new Error("the checkpoint is not a signed note");
  const body = note.slice(0, cut + 1);
  const sigs = [];
  for (const l of note.slice(cut + 2, -1).split("\n")) {
    const m = /^\u2014 (\S+) ([A-Za-z0-9+/=]+)$/.exec(l);
    if (!m) throw new Error("malformed signature line: " + JSON.stringify(l.slice(0, 60)));
    const raw = decodeBase64(m[2]);
    // atob drops the spare bits of the last character; a line spelled
    // with them set is refused, as log.OpenNote refuses it (C2SP notes
    // use RFC 4648 base64, whose decoders may refuse them, §3.5).
    if (encodeBase64(raw) !== m[2]) throw new Error(`the signature by ${m[1]} is not written in canonical base64`);
    if (raw.length < 5) throw new Error("signature too short on line for " + m[1]);
    sigs.push({ name: m[1], hash: raw.slice(0, 4), sig: raw.slice(4) });
  }
  return { body, sigs };
}

// parseCheckpoint reads a c2sp.org/tlog-checkpoint body.
export function parseCheckpoint(body) {
  const lines = body.split("\n");
  if (lines.length < 4 || !decimal.test(lines[1])) throw new Error("the checkpoint body is malformed");
  const root = decodeBase64(lines[2]);
  if (root.length !== 32) throw new Error("the checkpoint root is not a SHA-256 hash");
  return { origin: lines[0], size: BigInt(lines[1]), root, extensions: lines.slice(3, -1) };
}

async function ed25519Verify(pub, sig, msg) {
  const key = await crypto.subtle.importKey("raw", pub, { name: "Ed25519" }, false, ["verify"]);
  return crypto.subtle.verify({ name: "Ed25519" }, key, sig, msg);
}

// verifyNoteSignature checks that note carries a valid Ed25519 signature
// (type 0x01) by vkey over its text. It returns a reason when it does not,
// and keyFault when that reason is the key's (of another type, or no
// signature of its name and hash): a signature of the key's name and hash
// that does not verify is the checkpoint's fault, not the key's.
export async function verifyNoteSignature(note, vkey) {
  if (vkey.type !== 0x01) return { ok: false, keyFault: true, reason: "the verifier key is not an Ed25519 note key (type 0x01)" };
  const mine = note.sigs.filter((s) => s.name === vkey.name && equalBytes(s.hash, vkey.hash));
  if (mine.length === 0) return { ok: false, keyFault: true, reason: `the checkpoint carries no signature by the key ${vkey.name}+${toHex(vkey.hash)}` };
  for (const s of mine) {
    if (s.sig.length === 64 && (await ed25519Verify(vkey.pub, s.sig, utf8.encode(note.body)))) return { ok: true };
  }
  return { ok: false, reason: `the signature by ${vkey.name} does not verify over this checkpoint` };
}

// verifyCosignature checks one witness's cosignature/v1 (type 0x04) on
// note: an 8-byte big-endian time and an Ed25519 signature over
// "cosignature/v1\ntime <t>\n" followed by the checkpoint text.
export async function verifyCosignature(note, wkey) {
  const sig = note.sigs.find((s) => s.name === wkey.name && equalBytes(s.hash, wkey.hash));
  if (!sig) return { present: false };
  return { present: true, ...(await cosignature(note, sig, wkey)) };
}

async function cosignature(note, sig, wkey) {
  if (wkey.type !== 0x04 || sig.sig.length !== 72) return { ok: false, reason: "not a cosignature/v1" };
  const t = new DataView(sig.sig.buffer, sig.sig.byteOffset, 8).getBigUint64(0);
  const msg = utf8.encode(`cosignature/v1\ntime ${t}\n` + note.body);
  const ok = await ed25519Verify(wkey.pub, sig.sig.slice(8), msg);
  return { ok, time: new Date(Number(t) * 1000), seconds: String(t) };
}

// signatureLines is what is known of each of note's signature lines, in
// the note's order: {name, hash (hex), key, ok} for a line of one of keys
// (note verifier keys; key is the first that fits, ok whether it
// verifies), {name, hash, witness, ok, time} for one of wkeys (witness
// cosignature keys), {name, hash} for a line of a key given in neither.
// A line of a known name and another hash is of no known key: anyone may
// sign with a key of any name.
export async function signatureLines(note, keys, wkeys) {
  const out = [];
  const msg = utf8.encode(note.body);
  for (const s of note.sigs) {
    const line = { name: s.name, hash: toHex(s.hash) };
    const fits = (k) => k.name === s.name && equalBytes(k.hash, s.hash);
    const key = keys.find(fits);
    const witness = key ? undefined : wkeys.find(fits);
    if (key) Object.assign(line, { key, ok: key.type === 0x01 && s.sig.length === 64 && (await ed25519Verify(key.pub, s.sig, msg)) });
    else if (witness) Object.assign(line, { witness }, await cosignature(note, s, witness));
    out.push(line);
  }
  return out;
}

// checkKey says whether vkeyText fits checkpoint cp and its note: the
// parsed key (if it parses), with keyReason when the key does not fit (it
// does not parse, is of another name or type, or signed no line), or
// reason when the checkpoint is at fault (a line of the key's name and
// hash that does not verify), or the step that passed.
async function checkKey(note, cp, vkeyText) {
  let vkey;
  try {
    vkey = await parseVKey(vkeyText);
  } catch (e) {
    return { keyReason: e.message };
  }
  if (cp.origin !== vkey.name) return { vkey, keyReason: `the checkpoint's origin ${cp.origin} is not the key's name ${vkey.name}` };
  let sig;
  try {
    sig = await verifyNoteSignature(note, vkey);
  } catch (e) {
    return { vkey, reason: "checking the signature failed: " + e.message };
  }
  if (sig.ok) return { vkey, step: `checkpoint signature by ${vkey.name}+${toHex(vkey.hash)} verifies (Ed25519)` };
  return sig.keyFault ? { vkey, keyReason: sig.reason } : { vkey, reason: sig.reason };
}

// checkEntry checks what no key has a part in: the receipt is of the
// entry asked for (at wantIndex, or with leaf hash wantLeaf, hex, if
// given), the entry's bytes give the leaf it names, and the proof leads
// from that leaf to cp's root (proofFault when only that fails).
async function checkEntry(rc, cp, entryBytes, wantIndex, wantLeaf) {
  if (wantIndex !== undefined && rc.index !== wantIndex) return { reason: `the receipt is for entry ${rc.index}, not ${wantIndex}` };
  const leaf = await leafHash(entryBytes);
  if (rc.extra && !equalBytes(rc.extra, leaf)) return { leaf, reason: "the receipt names another leaf hash than the entry's bytes give" };
  if (wantLeaf !== undefined && toHex(leaf) !== wantLeaf.toLowerCase()) return { leaf, reason: `the server answered with the entry whose leaf hash is ${toHex(leaf)}, not ${wantLeaf.toLowerCase()}` };
  let root;
  try {
    root = await rootFromInclusion(rc.index, cp.size, leaf, rc.proof);
  } catch (e) {
    return { leaf, proofFault: true, reason: "the inclusion proof does not fit: " + e.message };
  }
  if (!equalBytes(root, cp.root)) return { leaf, proofFault: true, reason: "the inclusion proof leads to another root than the checkpoint's" };
  return { leaf, root };
}

// verifyEntry is the whole check of one entry: its bytes hash to the leaf
// the receipt names, the proof leads from that leaf to the checkpoint's
// root, the checkpoint is signed by vkey for its origin, and it is the
// entry asked for: at wantIndex, or with leaf hash wantLeaf (hex), if
// given. It never throws; it returns {ok, steps, reason, keyReason,
// checkpoint, note, vkey}. The key and the entry are checked apart, and
// each failure is said apart: reason for the entry's or the checkpoint's,
// keyReason when vkey does not fit the checkpoint (no key, another
// origin, no signature by it). Every entry of the log fails for the
// key's reason, which a page says once; an entry that also fails for its
// own reason hid the key's, and each step of its task then said the key's.
export async function verifyEntry(entryBytes, receiptText, vkeyText, wantIndex, wantLeaf) {
  let rc, note, cp;
  const fail = (reason) => ({ ok: false, reason, keyReason: null, steps: [], checkpoint: cp, note, noteText: rc && rc.note });
  if (!globalThis.crypto || !crypto.subtle) {
    return fail("this browser gives no WebCrypto here (it needs a secure context: https or localhost)");
  }
  try {
    rc = parseReceipt(receiptText);
    note = parseNote(rc.note);
    cp = parseCheckpoint(note.body);
  } catch (e) {
    return fail("the receipt cannot be read: " + e.message);
  }
  const key = await checkKey(note, cp, vkeyText);
  const entry = await checkEntry(rc, cp, entryBytes, wantIndex, wantLeaf);
  // A checkpoint whose signature fails is said before a proof that does
  // not lead to its root: that root is then no one's.
  const reason = (entry.proofFault && key.reason) || entry.reason || key.reason || null;
  const res = { checkpoint: cp, note, noteText: rc.note, index: rc.index, leaf: entry.leaf, vkey: key.vkey };
  if (reason || key.keyReason) return { ...res, ok: false, reason, keyReason: key.keyReason || null, steps: [] };
  const steps = [
    `leaf hash SHA-256(0x00 ‖ entry) = ${toHex(entry.leaf)}`,
    key.step,
    `inclusion proof of ${rc.proof.length} hashes recomputes the root ${encodeBase64(entry.root)} at size ${cp.size}`,
  ];
  return { ...res, ok: true, steps };
}
