"""Our validation / argument parsing / JSON.parse texts vs the real pi-ai (one Node process per batch)."""

import random

import pytest

from hpd.harness.jsvalues import js_json_parse
from hpd.harness.validation import ToolArgumentsError, validate_tool_arguments
from hpd.harness.wire import parse_tool_call_arguments

pytestmark = pytest.mark.node

SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": False},
    {"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"type": "integer"}, "unit": {"type": "string", "enum": ["c", "f"]},
        "exact": {"type": "boolean"}, "n": {"type": ["integer", "null"]}, "level": {"enum": [1, 2, "3"]},
        "filters": {"type": "object", "properties": {"min": {"type": "number", "minimum": 0}, "tags": {"type": "array", "items": {"type": "string"}}},
                    "required": ["min"]}},
     "required": ["query"]},
    {"type": "object", "properties": {"date": {"type": "string", "format": "date"}, "code": {"type": "string", "minLength": 2, "maxLength": 4}}},
]
ATOMS = [None, True, False, 0, 1, -1, 2.5, 3.0, 1e21, "", " ", "0", "1", "3", "4.5", "7.9", "-2", "1e2", "0x10", "true", "FALSE",
         "null", "abc", "c", "C", "2024-02-30", "2024-02-29", "12n", [], [1], ["x"], {}, {"min": "2"}, {"min": -1, "tags": "solo"}]
KEYS = ["a", "b", "text", "query", "limit", "unit", "exact", "n", "level", "filters", "date", "code", "extra", "10", "2"]


def random_args(rng):
    return {k: rng.choice(ATOMS) for k in rng.sample(KEYS, rng.randint(0, 5))}


def canon(v):
    """JSON text with JS number semantics (3.0 and 3 are the same number)."""
    from hpd.harness.jsvalues import js_stringify

    def walk(x):
        if isinstance(x, dict):
            return {k: walk(x[k]) for k in sorted(x)}
        if isinstance(x, list):
            return [walk(i) for i in x]
        return x
    return js_stringify(walk(v))


def ours(schema, call):
    try:
        return {"ok": True, "value": validate_tool_arguments(type("T", (), {"parameters": schema})(), call)}
    except ToolArgumentsError as e:
        return {"ok": False, "error": str(e)}


def test_validation_matches_pi_schema(node_bridge):
    from hpd.harness.bridge import pi_validate

    rng = random.Random(0)
    cases = [{"schema": rng.choice(SCHEMAS), "call": {"name": "t", "arguments": random_args(rng)}} for _ in range(1500)]
    theirs = pi_validate(cases)
    bad = []
    for c, t in zip(cases, theirs):
        o = ours(c["schema"], c["call"])
        if canon(o) != canon(t):
            bad.append((c, o, t))
    assert not bad, f"{len(bad)} differ, first: {bad[0]}"


MALFORMED_SEEDS = ['{"a": 1, "b": [1, 2, {"c": "d"}], "e": "fgh"}', '{"query": "weather in paris", "days": 3}', '[1,2,3]']


def mutations(rng, n):
    out = ["", "   ", "{}", "null", '"s"', "NaN", "undefined"]
    for _ in range(n):
        s = list(rng.choice(MALFORMED_SEEDS))
        for _ in range(rng.randint(1, 3)):
            op = rng.random()
            i = rng.randrange(len(s) + 1)
            if op < 0.4 and s:
                del s[min(i, len(s) - 1)]
            elif op < 0.8:
                s.insert(i, rng.choice(list('{}[],:"\\ 0123456789abtrufnle-+.\n\t')))
            else:
                s = s[:i]
        out.append("".join(s))
    return out


def test_json_parse_errors_match_v8(node_bridge):
    from hpd.harness.bridge import pi_json_parse_errors, pi_parse_args

    texts = mutations(random.Random(1), 1500)
    theirs = pi_json_parse_errors(texts)
    bad = [(t, js_json_parse(t)[1], m) for t, m in zip(texts, theirs) if js_json_parse(t)[1] != m]
    assert not bad, f"{len(bad)} differ, first: {bad[:3]}"
    parsed = pi_parse_args(texts)
    bad = [(t, parse_tool_call_arguments(t), p) for t, p in zip(texts, parsed) if parse_tool_call_arguments(t) != p]
    assert not bad, f"{len(bad)} differ, first: {bad[:3]}"
