// The page's state, shared by its parts: the reader's keys, what
// /ui/log.json says, and which route the page shows (seq).

export const state = { vkey: "", witness: [], info: null, infoP: null, seq: 0 };

// link is the fragment that opens what, keeping the reader's own keys.
export function link(what) {
  const p = new URLSearchParams(what);
  if (state.vkey) p.set("vkey", state.vkey);
  for (const w of state.witness) p.append("witness", w);
  return "#" + p.toString();
}
