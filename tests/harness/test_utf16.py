"""JavaScript strings are UTF-16 code units (hpd.harness.jsvalues, wire, validation; hpd.runfolder.dumps).

hpd holds a JS string as a Python ``str`` with surrogate pairs joined and lone surrogates kept (``js_string``).
The Node check feeds random strings (ASCII, BMP, astral characters, lone and reversed surrogates, escapes,
white space of either language) to each function hpd uses to mirror Pi and compares with V8 / pi-ai / pi-schema
through ``bridge/js_strings.mjs``, which speaks in code units so no JSON reader can blur a surrogate."""

import json
import random
import struct
import subprocess

import pytest

from hpd.harness.jsvalues import (
    js_code_points,
    js_json_parse,
    js_length,
    js_slice,
    js_string,
    js_stringify,
    js_trim,
    js_value,
    utf16_units,
)
from hpd.harness.messages import zero_usage
from hpd.harness.validation import ToolArgumentsError, validate_tool_arguments
from hpd.harness.wire import _sanitize, from_sse_chunks, parse_tool_call_arguments, repair_json, to_openai_messages
from hpd.runfolder import dumps, read_json, write_json

SMILE = "\U0001F600"                     # UTF-16: D83D DE00


def canon(units: list[int]) -> str:
    """A JS string (UTF-16 code units) as hpd spells it, decoded independently of hpd: pairs joined, lone kept."""
    return struct.pack(f"<{len(units)}H", *units).decode("utf-16-le", "surrogatepass")


def raw(units: list[int]) -> str:
    """The same JS string with one Python code point per code unit (pairs not joined)."""
    return "".join(map(chr, units))


def units_of(s: str) -> list[int]:
    b = s.encode("utf-16-le", "surrogatepass")
    return list(struct.unpack(f"<{len(b) // 2}H", b))


# ------------------------------------------------------------------------------- examples (no Node needed)
def test_escaped_pairs_join_and_lone_surrogates_stay():
    assert js_json_parse('"\\uD83D\\uDE00"') == (SMILE, None)
    assert js_json_parse('"\\uD83D' + "\ude00" + '"') == (SMILE, None)        # escape + raw low half
    assert js_json_parse('"\\uD800"') == ("\ud800", None)
    assert js_json_parse('"\\uDE00\\uD83D"') == ("\ude00\ud83d", None)       # reversed: two lone halves
    assert js_stringify(js_json_parse('"\\uD83D\\uDE00"')[0]) == '"' + SMILE + '"'
    assert js_stringify("\ud83d\ude00") == '"' + SMILE + '"'                  # a pair held as two code points
    assert js_stringify("\ud800\udc00\udc00\ud800") == '"\U00010000\\udc00\\ud800"'


def test_parse_errors_count_code_units():
    assert js_json_parse('{"' + SMILE * 6 + '":1 x}')[1] == "Expected ',' or '}' after property value in JSON at position 18"
    assert js_json_parse(SMILE)[1] == "Unexpected token '\ud83d', \"" + SMILE + "\" is not valid JSON"


def test_lengths_and_slices_are_utf16():
    s = "a" + SMILE + "\ud800"
    assert (js_length(s), js_code_points(s), len(utf16_units(s))) == (4, 3, 4)
    assert js_slice(s, 0, 2) == "a\ud83d" and js_slice(s, 2) == "\ude00\ud800" and js_slice(s, -3, -1) == SMILE
    assert js_string("\ud83d" + "\ude00") == SMILE and js_value({"\ud83d\ude00": ["\ud83d\ude00"]}) == {SMILE: [SMILE]}


def test_trim_is_javascripts():
    assert js_trim("\ufeff x \u2028") == "x"
    assert js_trim("\x1c x \x85") == "\x1c x \x85"                            # Python's strip would remove both
    assert parse_tool_call_arguments("\ufeff") == {"arguments": {}}
    assert parse_tool_call_arguments("\x1c")["argumentsError"].startswith("Unexpected token")


def test_sanitize_keeps_pairs_held_as_two_code_points():
    assert _sanitize("a\ud83d\ude00b\ud800") == "a" + SMILE + "b"
    msgs = to_openai_messages({"messages": [{"role": "user", "content": "\ud83d\ude00\udc00"}]})
    assert msgs == [{"role": "user", "content": SMILE}]


def test_string_length_bounds_count_code_points():
    schema = {"type": "object", "properties": {"s": {"type": "string", "maxLength": 1, "pattern": "^.$"}}}
    assert validate_tool_arguments(schema, {"name": "t", "arguments": {"s": "\ud83d\ude00"}}) == {"s": SMILE}
    with pytest.raises(ToolArgumentsError, match="expected at most 1 characters"):
        validate_tool_arguments(schema, {"name": "t", "arguments": {"s": SMILE + "\ud800"}})
    with pytest.raises(ToolArgumentsError, match="expected to match"):               # JS `$` is the end only
        validate_tool_arguments(schema, {"name": "t", "arguments": {"s": "a\n"}})


def test_streamed_pair_split_across_chunks_is_one_character():
    chunks = [{"choices": [{"delta": {"content": "x\ud83d"}}]}, {"choices": [{"delta": {"content": "\ude00"}}]},
              {"choices": [{"delta": {}, "finish_reason": "stop"}]}]
    assert from_sse_chunks(chunks)["content"] == [{"type": "text", "text": "x" + SMILE}]


def test_run_folder_records_with_lone_surrogates(tmp_path):
    """UTF-8 cannot hold a lone surrogate: dumps writes it as JSON.stringify does (\\udXXX) and reads it back."""
    rec = {"k\udc00": ["a\ud800", "\ud83d\ude00", SMILE]}
    text = dumps(rec, indent=None)
    assert text == '{"k\\udc00":["a\\ud800","' + SMILE + '","' + SMILE + '"]}' == js_stringify(rec)
    p = write_json(tmp_path / "r.json", rec)
    assert read_json(p) == {"k\udc00": ["a\ud800", SMILE, SMILE]}


# ------------------------------------------------------------------------------- random strings against Node
_PIECES = (
    list("abxs01 .e-+") + ['"', "\\", "/", "\t", "\n", "\r", "\x00", "\x1f", "\x7f", "\x1c", "\x85", "\xa0", "\xe9", "\u4e2d",
                           "\u0663", "\u212a", "\u2028", "\u2029", "\ufeff", "\ue000", "\ufffd", "\uffff", "1e3", "12", "true"]
    + [SMILE, "\U00010000", "\U0010ffff", "\U0001F64F", "\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00\ud83d"]
)
_SLICES = [[0, 1], [1, 3], [0, -1], [-1, None], [2, None], [-3, -1], [3, 1]]
_SCHEMAS = [{"type": "object", "properties": {"s": s}} for s in (
    {"type": "string", "minLength": 2}, {"type": "string", "maxLength": 3}, {"type": "string", "minLength": 4, "maxLength": 4},
    {"pattern": "^.$"}, {"pattern": "^..$"}, {"pattern": "^.{2,4}$"}, {"pattern": "^[^a]*$"}, {"pattern": "\\S"},
    {"pattern": "^\\s*$"}, {"pattern": "^\\w+$"}, {"pattern": "\\d"}, {"pattern": "x$"}, {"pattern": "^.*$"},
    {"pattern": SMILE}, {"pattern": "\\uD83D"}, {"pattern": "^[\U0001F600-\U0001F64F]+$"}, {"pattern": "[\\s\\d]"},
    {"const": SMILE}, {"enum": ["a", "\ud800", SMILE]}, {"type": "number"}, {"type": "integer"}, {"type": "boolean"},
    {"format": "email"}, {"format": "uuid"},
)]


def _random_units(rng: random.Random, n: int) -> list[int]:
    return units_of("".join(rng.choice(_PIECES) for _ in range(rng.randrange(n + 1))))


def _write_string(rng: random.Random, units: list[int]) -> list[int]:
    """A JSON string literal for ``units``: some code units as ``\\uXXXX`` (either case), some raw, raw controls
    now and then (what pi-ai's repairJson fixes)."""
    out = [0x22]
    for u in units:
        if u in (0x22, 0x5C) or (u < 0x20 and rng.random() < 0.7) or rng.random() < 0.3:
            hx = "%04x" % u
            out += units_of("\\u" + (hx.upper() if rng.random() < 0.5 else hx))
        else:
            out.append(u)
    return out + [0x22]


def _random_value(rng: random.Random) -> list[int]:
    """A JSON value: a string, a number or literal, an array of one string, or an object of one string."""
    kind = rng.randrange(4)
    if kind == 0:
        return _write_string(rng, _random_units(rng, 6))
    if kind == 1:
        return units_of(rng.choice(["1", "2.5", "1e3", "-0", "true", "null"]))
    inner = _write_string(rng, _random_units(rng, 3))
    return units_of("[") + inner + units_of("]") if kind == 2 else units_of('{"k":') + inner + units_of("}")


def _random_text(rng: random.Random) -> list[int]:
    """A JSON object of 1-3 members, then 0-2 mutations: a cut (maybe inside a pair) or an inserted piece."""
    members = [_write_string(rng, _random_units(rng, 4)) + units_of(":") + _random_value(rng) for _ in range(rng.randrange(1, 4))]
    text = units_of("{")
    for i, m in enumerate(members):
        text += (units_of(",") if i else []) + m
    text += units_of("}")
    for _ in range(rng.choice([0, 0, 1, 2])):
        at = rng.randrange(len(text) + 1)
        if rng.random() < 0.4:
            text = text[:at]
        else:
            text = text[:at] + units_of(rng.choice([SMILE, "\ud800", "x", "}", "\\x", "\\u12", "\\", "\n", '"'])) + text[at:]
    return text


_FIXED_TEXTS = [SMILE, '"a"' + SMILE, '{"' + SMILE * 6 + '":1 x}', '{"a":"' + SMILE * 12 + '"x}', "[1," + SMILE + "]",
                "\ud800", '{"a":"\ud800"}x', '"\\uD83D\\uDE00"', '"\\uD83D"', '"\\uDE00\\uD83D"', '"\\uD83D\ude00"',
                '"\ud83d\\uDE00"', "tru" + SMILE, '{"a": "' + SMILE + '\x01"}', "\ufeff", "\x1c", " \u2028 "]


def _node(request: dict) -> dict:
    from hpd.harness.bridge import bridge_dir

    res = subprocess.run(["node", str(bridge_dir() / "js_strings.mjs")], cwd=str(bridge_dir()), input=json.dumps(request),
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)


def decode(v):
    """A value from js_strings.mjs's encoding (strings as code units) in hpd's spelling."""
    if isinstance(v, dict):
        return canon(v["s"]) if "s" in v else {canon(k): decode(x) for k, x in v["o"]}
    if isinstance(v, list):
        return [decode(x) for x in v]
    return v


def strict(v):
    """``v`` with types and key order made part of equality."""
    if isinstance(v, dict):
        return ("object", [(k, strict(x)) for k, x in v.items()])
    if isinstance(v, list):
        return ("array", [strict(x) for x in v])
    return (type(v).__name__, v)


def _validate(schema: dict, s: str) -> dict:
    try:
        return {"ok": validate_tool_arguments(schema, {"name": "t", "arguments": {"s": s}})}
    except ToolArgumentsError as e:
        return {"error": str(e)}


def _string_differences(u: list[int], node: dict) -> list[str]:
    want = canon(u)
    bad = []
    for form in (want, raw(u)):
        nested = {form: [form, {"k": form}]}
        got = {"length": js_length(form), "trim": js_trim(form), "sanitize": _sanitize(form), "stringify": js_stringify(form),
               "dumps": dumps(form, indent=None), "stringifyIndented": js_stringify(nested, 2), "dumpsIndented": dumps(nested),
               "slices": [js_slice(form, a, b) for a, b in _SLICES],
               "validate": [strict(_validate(sc, form)) for sc in _SCHEMAS]}
        exp = {"length": node["length"], "trim": canon(node["trim"]), "sanitize": canon(node["sanitize"]),
               "stringify": canon(node["stringify"]), "dumps": canon(node["stringify"]),
               "stringifyIndented": canon(node["stringifyIndented"]), "dumpsIndented": canon(node["stringifyIndented"]),
               "slices": [canon(x) for x in node["slices"]],
               "validate": [strict({"ok": decode(r["ok"])} if "ok" in r else {"error": canon(r["error"])}) for r in node["validate"]]}
        bad += [f"{k} of {ascii(form)}: ours {ascii(got[k])} != node {ascii(exp[k])}" for k in got if got[k] != exp[k]]
        if json.loads(dumps(nested).encode("utf-8")) != {want: [want, {"k": want}]}:
            bad.append(f"dumps round trip of {ascii(form)}")
    return bad


def _text_differences(u: list[int], node: dict) -> list[str]:
    bad = []
    for form in (canon(u), raw(u)):
        value, err = js_json_parse(form)
        p = node["parse"]
        if "error" in p:
            got, exp = err, canon(p["error"])
        else:
            got = (err, strict(value), js_stringify(value), js_stringify(value, 2))
            exp = (None, strict(decode(p["value"])), canon(p["stringify"]), canon(p["indented"]))
        if got != exp:
            bad.append(f"JSON.parse of {ascii(form)}: ours {ascii(got)} != node {ascii(exp)}")
        if strict(parse_tool_call_arguments(form)) != strict(decode(node["args"])):
            bad.append(f"parseToolCallArguments of {ascii(form)}: ours {ascii(parse_tool_call_arguments(form))}")
        if repair_json(form) != canon(node["repair"]):
            bad.append(f"repairJson of {ascii(form)}: ours {ascii(repair_json(form))} != node {ascii(canon(node['repair']))}")
    return bad


@pytest.mark.node
def test_random_strings_match_node(node_bridge):
    """400 random strings and 400 random argument texts (seed 37), every mirror of a JS string or JSON function."""
    rng = random.Random(37)
    strings = [_random_units(rng, 8) for _ in range(400)]
    texts = [units_of(t) for t in _FIXED_TEXTS] + [_random_text(rng) for _ in range(400)]
    node = _node({"strings": strings, "texts": texts, "slices": _SLICES, "schemas": _SCHEMAS})
    bad = []
    for u, n in zip(strings, node["strings"]):
        bad += _string_differences(u, n)
    for u, n in zip(texts, node["texts"]):
        bad += _text_differences(u, n)
    assert not bad, f"{len(bad)} differences, first ones:\n" + "\n".join(bad[:15])


@pytest.mark.node
def test_streamed_bytes_decode_as_text_decoder(node_bridge):
    """An SSE line given as bytes: invalid UTF-8 becomes U+FFFD exactly as the SDK's TextDecoder makes it."""
    rng = random.Random(38)
    alphabet = [0x41, 0x80, 0xBF, 0xC0, 0xC2, 0xE0, 0xE2, 0xED, 0xA0, 0xF0, 0xF4, 0x90, 0x8F, 0xFF, 0x9F, 0x98]
    cases = [bytes(rng.choice(alphabet) for _ in range(rng.randrange(1, 8))) for _ in range(500)]
    node = _node({"strings": [], "texts": [], "slices": [], "schemas": [], "bytes": [list(b) for b in cases]})["bytes"]
    for b, u in zip(cases, node):
        line = b'data: {"choices":[{"delta":{"content":"' + b + b'"},"finish_reason":"stop"}]}'
        assert from_sse_chunks([line])["content"] == [{"type": "text", "text": canon(u)}], b


@pytest.mark.node
def test_wire_round_trip_with_surrogates(node_bridge):
    """Pi's real openai-completions provider: request messages and the streamed message, with lone surrogates,
    pairs held as two Python code points and a pair split across two SSE deltas."""
    from hpd.harness.bridge import _one_shot
    from hpd.harness.conformance import normalise

    pair = "\ud83d\ude00"                                    # not joined: how Python code may hand it over
    ctx = {"messages": [
        {"role": "system", "content": "sys " + pair + "\ud800", "timestamp": 0},
        {"role": "user", "content": "q" + pair + "\udc00", "timestamp": 0},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t\ud800" + pair, "thinkingSignature": "reasoning_content"},
                                          {"type": "text", "text": "\x1c"}, {"type": "text", "text": "a" + pair + "\ud800"},
                                          {"type": "toolCall", "id": "c1", "name": "f", "arguments": {"k" + pair: ["\ud800", pair]}}],
         "stopReason": "toolUse", "usage": zero_usage(), "provider": "vllm", "api": "openai-completions", "model": "qwen3-8b", "timestamp": 0},
        {"role": "toolResult", "toolCallId": "c1", "toolName": "f", "content": [{"type": "text", "text": "\ufeff"}],
         "isError": False, "timestamp": 0},
    ]}
    chunks = [{"id": "r", "choices": [{"index": 0, "delta": {"reasoning_content": "r\ud83d", "content": "x\ud83d"}}]},
              {"id": "r", "choices": [{"index": 0, "delta": {"reasoning_content": "\ude00\udc00", "content": "\ude00\ud800",
                                                             "tool_calls": [{"index": 0, "id": "c2", "function": {"name": "f",
                                                                             "arguments": '{"a": "\\uD83D'}}]}}]},
              {"id": "r", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '\\uDE00\\uD800"}'}}]},
                                       "finish_reason": "tool_calls"}]}]
    got = _one_shot({"op": "wire", "context": ctx, "chunks": chunks, "modelId": "qwen3-8b"})
    serving = {"provider": "vllm", "api": "openai-completions", "id": "qwen3-8b"}
    assert got["body"]["messages"] == to_openai_messages(ctx, serving)
    theirs, mine = normalise(got["message"]), normalise(from_sse_chunks(chunks, model="qwen3-8b", provider="vllm"))
    theirs.pop("durationMs", None)
    assert mine == theirs
    assert mine["content"][-1]["arguments"] == {"a": SMILE + "\ud800"}
