// JavaScript's string and JSON behaviour, for tests/harness/test_utf16.py: what V8 and the pinned pi-ai /
// pi-schema give for each string, so hpd's Python mirrors can be compared with it.
//
// stdin: one JSON object {strings, texts, slices, schemas, bytes} (bytes: arrays of byte values, decoded as the
// OpenAI SDK decodes a response stream, with a default TextDecoder: invalid UTF-8 becomes U+FFFD). Every string, in the request and in the answer, is
// an array of UTF-16 code units, so no JSON reader on either side can join or drop a surrogate. In answers a
// JSON value is encoded as: string -> {s: units}, object -> {o: [[key units, value], ...]} (Object.keys order),
// arrays as arrays, numbers / booleans / null as they are.
// stdout: one JSON object {strings: [...], texts: [...], bytes: [...]}, one answer per input, in order.
import { parseToolCallArguments, repairJson, validateToolArguments } from "@earendil-works/pi-ai";
import { sanitizeSurrogates } from "@earendil-works/pi-ai/utils/sanitize-unicode";

function fromUnits(units) {
  let s = "";
  for (const u of units) s += String.fromCharCode(u);
  return s;
}

function toUnits(s) {
  const out = new Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

function encode(v) {
  if (typeof v === "string") return { s: toUnits(v) };
  if (Array.isArray(v)) return v.map(encode);
  if (v !== null && typeof v === "object") return { o: Object.keys(v).map((k) => [toUnits(k), encode(v[k])]) };
  return v;
}

// validateToolArguments: the coerced arguments, or the error text the model reads.
function validate(schema, args) {
  try {
    return { ok: encode(validateToolArguments({ name: "t", parameters: schema }, { name: "t", arguments: args })) };
  } catch (error) {
    return { error: toUnits(error.message) };
  }
}

function stringFacts(s, slices, schemas) {
  return {
    length: s.length,
    trim: toUnits(s.trim()),
    sanitize: toUnits(sanitizeSurrogates(s)),
    stringify: toUnits(JSON.stringify(s)),
    stringifyIndented: toUnits(JSON.stringify({ [s]: [s, { k: s }] }, null, 2)),
    slices: slices.map(([a, b]) => toUnits(s.slice(a, b ?? undefined))),
    validate: schemas.map((schema) => validate(schema, { s })),
  };
}

function textFacts(t) {
  let parsed;
  try {
    const v = JSON.parse(t);
    parsed = { value: encode(v), stringify: toUnits(JSON.stringify(v)), indented: toUnits(JSON.stringify(v, null, 2)) };
  } catch (error) {
    parsed = { error: toUnits(error.message) };
  }
  return { parse: parsed, args: encode(parseToolCallArguments(t)), repair: toUnits(repairJson(t)) };
}

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const req = JSON.parse(input);
  const strings = req.strings.map((u) => stringFacts(fromUnits(u), req.slices, req.schemas));
  const texts = req.texts.map((u) => textFacts(fromUnits(u)));
  const decoder = new TextDecoder();
  const bytes = (req.bytes ?? []).map((b) => toUnits(decoder.decode(Uint8Array.from(b))));
  process.stdout.write(JSON.stringify({ strings, texts, bytes }));
});
