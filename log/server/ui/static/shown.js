// What the page shows of what it was sent: a string as its text, with a
// visible mark for each character that would make it pass for another
// text; any other value as indented JSON (render); both as nodes (el,
// fill). Every string the page shows goes through shown (fill).

import { Cut, maxDepth, WrongShape } from "./read.js";
import { lookalikeLetters } from "./confusables.js";

// unseen matches the characters that change how the text around them
// reads without being seen themselves: bidi controls (U+202E makes
// "report\u202Efdp.exe" read "reportexe.pdf"), zero-width and other
// invisible characters (U+200B makes "ad\u200Bmin" look like "admin";
// U+FE0F after "read_file" shows as nothing), line and paragraph
// separators, and control characters other than tab and newline. Its
// classes are those of the log's own definition (log.Invisible, Go):
// controls, format characters, variation selectors, default-ignorable
// characters, the blank braille pattern, Zl and Zp, and what no font
// need show (private use, unassigned, and a lone surrogate, which Go
// never sees in UTF-8). A hand-written list of ranges
// missed some (U+FE0F, U+E0100, U+1BCA0, U+1D173, U+13430, U+2800).
const unseen = /(?![\t\n])[\p{Cc}\p{Cf}\p{Variation_Selector}\p{Default_Ignorable_Code_Point}\u2800\p{Zl}\p{Zp}\p{Co}\p{Cn}\p{Cs}]/u;

// confusable are the scripts with letters that pass for Latin ones (or
// for each other's: Cyrillic "а" U+0430 for "a", Greek "ο" U+03BF for
// "o"), each with the pattern of its letters. "symbol" are the letters of
// no script (Unicode's Common) that read as Latin (mathematical 𝐚,
// letterlike ℎ); the micro sign and modifier letters are left out, as
// "µs" and "ʻ" are ordinary. Full-width Latin letters ("ａ" U+FF41) are of
// the Latin script but pass for the ASCII ones, so they count as a script
// of their own.
const confusable = [
  ["full-width", /[\uFF21-\uFF3A\uFF41-\uFF5A]/u],
  ["Latin", /\p{Script=Latin}/u],
  ["Greek", /\p{Script=Greek}/u],
  ["Cyrillic", /\p{Script=Cyrillic}/u],
  ["Armenian", /\p{Script=Armenian}/u],
  ["Cherokee", /\p{Script=Cherokee}/u],
  ["Coptic", /\p{Script=Coptic}/u],
  ["Georgian", /\p{Script=Georgian}/u],
  ["Lisu", /\p{Script=Lisu}/u],
  ["Canadian syllabics", /\p{Script=Canadian_Aboriginal}/u],
  ["Tifinagh", /\p{Script=Tifinagh}/u],
  ["symbol", /(?![\u00B5\p{Lm}])\p{Script=Common}/u],
];

// foreign matches a letter of a confusable script other than Latin: a
// string without one mixes no confusable scripts.
const foreign = /[\uFF21-\uFF3A\uFF41-\uFF5A]|(?=\p{L})(?!\p{Script=Latin})(?![\u00B5\p{Lm}])[\p{Script=Greek}\p{Script=Cyrillic}\p{Script=Armenian}\p{Script=Cherokee}\p{Script=Coptic}\p{Script=Georgian}\p{Script=Lisu}\p{Script=Canadian_Aboriginal}\p{Script=Tifinagh}\p{Script=Common}]/u;

// looksLatin maps each letter of a confusable script that reads as a
// Latin letter in common fonts to that letter: a word wholly of such
// letters ("раура", Cyrillic) passes for a Latin word ("paypa"). A word
// with one letter that does not ("мир": "м" and "и") reads as what it is.
// Letters of full-width and of no script ("symbol") have their Latin
// letter as their compatibility form (NFKC), so they are not listed.
const looksLatin = (() => {
  const pairs = (text) => text.split(" ").map((pair) => [...pair]);
  // Cherokee's small letters are its capitals' shapes, small.
  const cherokee = pairs("ᎪA ᏴB ᏟC ᎠD ᎬE ᏀG ᎻH ᎥI ᎫJ ᏦK ᏞL ᎷM ᏢP ᏚS ᎢT ᏙV ᏔW ᏃZ ᏒR");
  return new Map([
    ...pairs("аa сc еe һh іi јj ӏl оo рp ԛq ѕs ԝw хx уy ԁd үy АA ВB ЕE КK МM НH ОO РP СC ТT ХX УY ЅS ІI ЈJ ԚQ ԜW ӀI ҮY ҺH"), // Cyrillic
    ...pairs("οo νv ιi ρp αa υu κk χx γy ΑA ΒB ΕE ΖZ ΗH ΙI ΚK ΜM ΝN ΟO ΡP ΤT ΥY ΧX ϹC ϳj ͿJ"), // Greek
    ...pairs("օo սu հh ոn զq ՕO ՍU ՏS ԼL"), // Armenian
    ...pairs("ⲀA ⲂB ⲎH ⲒI ⲔK ⲘM ⲚN ⲞO ⲢP ⲤC ⲦT ⲨY ⲬX ⲁa ⲟo ⲣp ⲥc ⲭx"), // Coptic
    ...pairs("ꓮA ꓐB ꓚC ꓓD ꓰE ꓝF ꓖG ꓧH ꓲI ꓙJ ꓗK ꓡL ꓟM ꓠN ꓳO ꓑP ꓣR ꓢS ꓔT ꓴU ꓦV ꓪW ꓫX ꓬY ꓜZ"), // Lisu
    ...pairs("ᐯV ᑌU ᑭP ᒪL ᒍJ ᔕS ᕼH ᗅA ᗪD ᗷB ᗯW ᑕC ⵔO ⵏI ⵝX"), // Canadian syllabics, Tifinagh
    ...cherokee,
    ...cherokee.map(([ch, latin]) => [ch.toLowerCase(), latin]),
  ]);
})();

// asciiLookalike is the ASCII letter that ch, a letter other than ASCII,
// passes for by Unicode's confusables data, or undefined: "ɑ" U+0251 for
// "a", "ı" U+0131 for "i", "ǀ" U+01C0 for "l". These are Latin letters,
// which marks by script cannot see. The table (confusables.js) is made
// from the one the sidecar reads actor ids with, so the page and the log
// take the same letters for ASCII ones.
function asciiLookalike(ch) {
  return /[A-Za-z]/.test(ch) ? undefined : lookalikeLetters.get(ch.codePointAt(0));
}

// languages maps each look-alike letter that is a letter of a language's
// alphabet (dotless ı of Turkish and Azerbaijani, thorn þ of Icelandic) to
// the other letters of that alphabet beyond ASCII, none a look-alike: in
// a text that holds one of them the letter is a word's own ("kapı" in
// "Kapıyı kapat ve ışığı aç"), not a disguise, and is not marked unless
// its word is an identifier (holds "_" or a digit: "deploy_sıte"). A
// text of ASCII words alone ("admın") has it marked.
const languages = new Map([
  [0x0131, /[çğöşüâîûəÇĞÖŞÜÂÎÛƏİ]/u],
  [0x00FE, /[áðéíóúýæöÁÐÉÍÓÚÝÆÖÞ]/u],
]);

// ownLetter says whether ch, a look-alike, is a letter of the language
// text s is written in, in word, no identifier (languages).
function ownLetter(ch, word, s) {
  const alphabet = languages.get(ch.codePointAt(0));
  return alphabet !== undefined && alphabet.test(s) && !word.some((c) => /[_\p{N}]/u.test(c));
}

// lookalike matches a character of the table, for shown's fast path.
const lookalike = new RegExp("[" + [...lookalikeLetters.keys()].map((c) => "\\u{" + c.toString(16) + "}").join("") + "]", "u");

// lookalikeMark is a visible mark for ch, a Latin letter that passes for
// the ASCII letter latin.
function lookalikeMark(ch, latin) {
  return charMark("mixed", ch, `looks like “${latin}”, `, (code) => `a Latin letter (${code}) that Unicode's confusables data takes for “${latin}”: the word may pass for another word`);
}

// latinReading is the Latin word that word (its characters) passes for,
// or null if one of its letters looks like no Latin letter.
function latinReading(word) {
  let s = "";
  for (const ch of word) {
    if (!/\p{L}/u.test(ch)) {
      s += ch;
      continue;
    }
    const latin = looksLatin.get(ch) ?? ch.normalize("NFKC");
    if (!/^[A-Za-z]$/.test(latin)) return null;
    s += latin;
  }
  return s;
}

// wordChar matches what makes up a word, for the mixing of scripts:
// letters, marks, digits and "_" (tool and user names join words with it).
const wordChar = /[\p{L}\p{M}\p{N}\p{Pc}]/u;

// scriptOf is the confusable script of letter ch, or null: digits,
// marks and letters of other scripts (Han, Arabic...) mix with anything.
function scriptOf(ch) {
  if (!/\p{L}/u.test(ch)) return null;
  for (const [name, re] of confusable) if (re.test(ch)) return name;
  return null;
}

// charMark is a visible mark for a character that could pass for another
// text, labelled with its code point.
function charMark(cls, ch, label, title) {
  const code = "U+" + ch.codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
  const m = document.createElement("mark");
  m.className = cls;
  m.title = title(code);
  m.textContent = "[" + label + code + "]";
  return m;
}

// wordMark is a visible mark for a word wholly of script's letters that
// passes for the Latin word latin.
function wordMark(script, latin) {
  const m = document.createElement("mark");
  m.className = "mixed";
  m.title = `a word of ${script} letters that each look like a Latin one: it may pass for the word “${latin}”`;
  m.textContent = `[${script}, not “${latin}”]`;
  return m;
}

// shown is text s as nodes, each unseen character replaced by a visible
// mark naming its code point; in each word that mixes confusable scripts
// ("аdmin" with a Cyrillic "а") each letter not of the word's main script
// followed by a mark naming its script and code point; and each word
// wholly of another script's letters that all look Latin ("раура" in
// Cyrillic, "ａｄｍｉｎ" in full-width) followed by a mark naming the
// script and the word it passes for: the strings shown come from agents,
// servers and bundles, and an auditor must not be shown one id that looks
// like another. One pass, each character classified once.
export function shown(s) {
  if (!unseen.test(s) && !foreign.test(s) && !lookalike.test(s)) return [s];
  const out = [];
  let run = "";
  let word = [];
  const endWord = () => {
    const counts = new Map();
    const scripts = word.map(scriptOf);
    for (const sc of scripts) if (sc) counts.set(sc, (counts.get(sc) || 0) + 1);
    const [only] = counts.keys();
    // A word of Latin letters each ASCII or passing for it ("ɑdmin")
    // passes for an ASCII word: each look-alike is marked.
    const passes = (ch, i) => scripts[i] !== "Latin" || /[A-Za-z]/.test(ch) || asciiLookalike(ch) !== undefined;
    if (counts.size === 1 && only === "Latin" && word.every(passes)) {
      for (const ch of word) {
        run += ch;
        const latin = asciiLookalike(ch);
        if (latin === undefined || scriptOf(ch) !== "Latin" || ownLetter(ch, word, s)) continue;
        out.push(run, lookalikeMark(ch, latin));
        run = "";
      }
      word = [];
      return;
    }
    if (counts.size < 2) {
      run += word.join("");
      const latin = only !== undefined && only !== "Latin" ? latinReading(word) : null;
      if (latin !== null) {
        out.push(run, wordMark(only, latin));
        run = "";
      }
      word = [];
      return;
    }
    // The main script has the most letters; Latin wins a tie, so the
    // other letters are the ones marked.
    let main = "Latin";
    for (const [sc, n] of counts) if (n > (counts.get(main) || 0)) main = sc;
    word.forEach((ch, i) => {
      run += ch;
      const latin = scripts[i] === "Latin" ? asciiLookalike(ch) : undefined;
      if (latin !== undefined) {
        out.push(run, lookalikeMark(ch, latin));
        run = "";
        return;
      }
      if (!scripts[i] || scripts[i] === main) return;
      out.push(run);
      run = "";
      out.push(charMark("mixed", ch, scripts[i] + " ", (code) => `a ${scripts[i]} letter (${code}) in a word of ${main} letters: it may pass for another letter, and the word for another word`));
    });
    word = [];
  };
  for (const ch of s) {
    if (unseen.test(ch)) {
      endWord();
      if (run) out.push(run);
      run = "";
      out.push(charMark("invisible", ch, "", (code) => "an invisible or direction-changing character (" + code + "), shown so that it cannot pass for another text"));
    } else if (wordChar.test(ch)) {
      word.push(ch);
    } else {
      endWord();
      run += ch;
    }
  }
  endWord();
  if (run) out.push(run);
  return out;
}

// el makes an element: its attributes are the page's own, never a
// server's; its children are as fill takes them.
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  fill(e, ...children);
  return e;
}

// fill replaces what e holds with children: nodes, text, nested arrays;
// null and undefined are left out. Text goes through shown. Flattening
// has no depth bound of its own: every value the page reads is bounded
// on arrival (bounded), and the page nests its own arrays a few deep.
export function fill(e, ...children) {
  e.replaceChildren();
  for (const c of children.flat(Infinity)) {
    if (c !== undefined && c !== null) e.append(...(c instanceof Node ? [c] : shown(String(c))));
  }
}

// render shows a JSON value as indented text, marking the values that
// read "[redacted]", the hashes that stand for content kept outside the
// log, and cut values. entry says v is an entry itself: only its own
// members ending in _sha256 are hashes the entry's format puts in place
// of content (args_sha256, result_sha256); an argument of that name, at
// any depth, is what the agent sent, and was marked as the sidecar's.
export function render(v, indent, out, entry) {
  const pad = "  ".repeat(indent);
  if (v instanceof Cut) {
    return out.push(el("mark", { class: "cut", title: `not shown: nested deeper than ${maxDepth} arrays and objects, deeper than the log accepts` }, v.text));
  }
  if (Array.isArray(v)) {
    if (v.length === 0) return out.push("[]");
    out.push("[\n");
    v.forEach((x, i) => {
      out.push(pad + "  ");
      render(x, indent + 1, out);
      out.push(i < v.length - 1 ? ",\n" : "\n");
    });
    return out.push(pad + "]");
  }
  if (v !== null && typeof v === "object") {
    const keys = Object.keys(v);
    if (keys.length === 0) return out.push("{}");
    out.push("{\n");
    keys.forEach((k, i) => {
      out.push(pad + "  " + JSON.stringify(k) + ": ");
      render(v[k], indent + 1, out);
      if (entry && k.endsWith("_sha256") && k !== "tool_sha256") out.push(el("span", { class: "note" }, "  ← only the SHA-256 of this content is in the log"));
      out.push(i < keys.length - 1 ? ",\n" : "\n");
    });
    return out.push(pad + "}");
  }
  // The sidecar writes "[redacted]" in place of a value its redact list
  // names, but an entry does not record which values it replaced, and an
  // agent or a server may send that text itself: the mark says both.
  if (v === "[redacted]") {
    out.push(el("mark", { class: "redacted", title: "the text the sidecar writes in place of a value its redact list names; the entry does not record whether the sidecar wrote it or it was sent as it is" }, '"[redacted]"'));
    return out.push(el("span", { class: "note" }, "  ← redacted by the sidecar, or sent as this text"));
  }
  out.push(JSON.stringify(v));
}

// shownValue is a value a server or bundle sent, as the page shows it: a
// string as itself, anything else as render shows it (never as
// JavaScript's own text for it: ["ad", "min"] would read "ad,min").
export function shownValue(v) {
  if (typeof v === "string") return v;
  const out = [];
  render(v, 0, out);
  return out;
}

// said is a template tag: the text, each value in it as shownValue shows
// it.
export function said(strings, ...values) {
  return strings.flatMap((s, i) => (i < values.length ? [s, shownValue(values[i])] : [s]));
}

// joined is list with sep between its items.
export function joined(list, sep) {
  return list.flatMap((x, i) => (i ? [sep, x] : [x]));
}

// timeOf shows a time a server sent.
export function timeOf(v) {
  return el("time", { datetime: typeof v === "string" ? v : undefined }, shownValue(v));
}

// wrong shows e, a WrongShape (or any error), marked as what was wrong.
export function wrong(e) {
  return el("span", { class: "wrong" }, e.message);
}

// listed is f of each member of v, an array a server sent; nothing if v is
// missing, and what was wrong if it is no array (what names v, want what
// it should hold).
export function listed(v, what, want, f) {
  if (v === undefined) return [];
  if (!Array.isArray(v)) return [wrong(new WrongShape(what, v, want))];
  return v.map(f);
}

// quoted shows v, text an agent wrote (a task's title, a claim's summary,
// a note), as a quotation apart from the page's own words: in a q element
// styled as the agent's, so that a summary reading "✓ verified by the
// log" cannot pass for the page's verdict.
export function quoted(v) {
  return el("q", { class: "agent", title: "written by the agent, not by this page" }, shownValue(v));
}
