"""The keyword table of ``hpd.harness.validation``: ``check`` and ``explain`` read the same handlers.

Before the table, ``check()`` and ``_walk()`` each restated every keyword, and they were written
differently: ``check`` tested ``"pattern" in node`` / ``"format" in node``, ``_walk`` tested
``isinstance(..., str)``. ``_pattern_ok`` / ``_format_ok`` accept non-strings, so the results were the
same. pi-schema's compiler and Explainer both test ``typeof node.pattern === "string"``, and the table
does too. These tests pin that and guard against the two readings drifting apart again.
"""

import random

import pytest

from hpd.harness import validation as V
from hpd.harness.jsvalues import js_stringify

ATOMS = [None, True, False, 0, 1, -1, 2.5, 3.0, "", "a", "abc", "2024-02-30", "1.2.3.4", "3", [], [1, 1], ["a"], {},
         {"a": 1}, {"b": "x", "10": 2}]
TYPES = ["string", "number", "integer", "boolean", "null", "array", "object", "bogus"]
KEYS = ["a", "b", "10"]


def _schema(r: random.Random, depth: int = 0):
    if depth > 2 or r.random() < 0.1:
        return r.choice([True, False, {"type": r.choice(TYPES)}, {}])
    sub = lambda: _schema(r, depth + 1)  # noqa: E731
    rows = [
        lambda: {"type": r.choice(TYPES) if r.random() < .7 else r.sample(TYPES, 2)},
        lambda: {"enum": r.sample(ATOMS, 2)}, lambda: {"const": r.choice(ATOMS)},
        lambda: {"properties": {k: sub() for k in r.sample(KEYS, 2)}}, lambda: {"required": r.sample(KEYS, 2)},
        lambda: {"additionalProperties": r.choice([False, True, sub()])},
        lambda: {"patternProperties": {r.choice(["^a", "[0-9]", "("]): sub()}}, lambda: {"propertyNames": sub()},
        lambda: {"items": r.choice([sub(), [sub()]]), "additionalItems": r.choice([False, sub()])},
        lambda: {"prefixItems": [sub()], "items": sub()},
        lambda: {"allOf": [sub(), sub()]}, lambda: {"anyOf": [sub(), sub()]}, lambda: {"oneOf": [sub(), sub()]},
        lambda: {"oneOf": [{"properties": {"a": {"const": c}}} for c in (1, "x")]},
        lambda: {"not": sub()}, lambda: {"if": sub(), "then": sub(), "else": sub()},
        lambda: {r.choice(["minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"]): r.choice([1, 2])},
        lambda: {"pattern": r.choice(["^a", "c$", 5])}, lambda: {"format": r.choice(["date", "ipv4", "uuid", 3])},
        lambda: {r.choice(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]): r.choice([0, 1, 2.5])},
        lambda: {"uniqueItems": True}, lambda: {"contains": sub(), "minContains": r.choice([0, 1, 2]), "maxContains": 1},
    ]
    node: dict = {}
    for _ in range(r.randint(1, 3)):
        node.update(r.choice(rows)())
    return node


def _value(r: random.Random, depth: int = 0):
    x = r.random()
    if depth < 2 and x < 0.15:
        return [_value(r, depth + 1) for _ in range(r.randint(0, 3))]
    if depth < 2 and x < 0.35:
        return {k: _value(r, depth + 1) for k in r.sample(KEYS, r.randint(0, 3))}
    return r.choice(ATOMS)


def _canon(x):
    """JSON text with sorted keys and JS number semantics (3.0 and 3 are one number)."""
    def walk(y):
        return {k: walk(y[k]) for k in sorted(y)} if isinstance(y, dict) else [walk(i) for i in y] if isinstance(y, list) else y
    return js_stringify(walk(x))


def test_every_supported_keyword_has_one_row():
    names = [n for kw in V.KEYWORDS for n in kw.names]
    assert len(names) == len(set(names))
    assert set(names) == {
        "type", "enum", "const", "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
        "exclusiveMaximum", "multipleOf", "required", "properties", "patternProperties", "additionalProperties",
        "propertyNames", "minProperties", "maxProperties", "items", "prefixItems", "additionalItems", "minItems",
        "maxItems", "uniqueItems", "contains", "minContains", "maxContains", "allOf", "anyOf", "oneOf", "not", "if",
        "then", "else"}


def test_check_fails_exactly_when_explain_names_a_keyword():
    """``explain`` falls back to ``root: invalid`` only if no handler spoke; with one table that never happens."""
    r = random.Random(0)
    for _ in range(3000):
        s, v = _schema(r), _value(r)
        assert V.check(s, v) == (V.explain(s, v) == [("", "invalid")]), (s, v)


@pytest.mark.parametrize("schema", [{"type": "string", "pattern": 5}, {"type": "string", "format": 3},
                                    {"type": "string", "pattern": None, "format": ["date"]}])
def test_non_string_pattern_and_format_are_ignored_by_both(schema):
    """pi-schema reads ``pattern`` / ``format`` only when they are strings (compiler and Explainer alike)."""
    assert V.check(schema, "anything")
    assert V.validate_tool_arguments(schema, {"name": "t", "arguments": "anything"}) == "anything"


def test_string_keywords_report_in_table_order():
    schema = {"enum": ["abcd"], "minLength": 5, "pattern": "^x", "format": "date"}
    assert not V.check(schema, "abc")
    assert V.explain(schema, "abc") == [("", 'expected one of ["abcd"]'), ("", "expected at least 5 characters"),
                                        ("", "expected to match ^x"), ("", "expected format date")]


def test_a_type_failure_ends_the_walk():
    schema = {"type": "string", "minLength": 3, "enum": ["abc"], "not": {}}
    assert V.explain(schema, 5) == [("", "expected string, got integer")]


def test_nested_errors_keep_their_paths():
    schema = {"type": "object", "required": ["q"], "additionalProperties": False,
              "properties": {"n": {"type": "array", "items": {"type": "integer", "minimum": 1}}}}
    value = {"n": [1, 0, "x"], "extra": 1}
    assert not V.check(schema, value)
    assert V.explain(schema, value) == [("/q", "missing"), ("/n/1", "expected >= 1"),
                                        ("/n/2", "expected integer, got string"), ("/extra", "unknown field")]


def test_unions_blame_the_tagged_branch_or_report_ambiguity():
    tagged = {"oneOf": [{"properties": {"kind": {"const": "a"}, "x": {"type": "number"}}, "required": ["kind"]},
                        {"properties": {"kind": {"const": "b"}}, "required": ["kind"]}]}
    assert V.explain(tagged, {"kind": "a", "x": "s"}) == [("/x", "expected number, got string")]
    assert V.explain(tagged, {"kind": "z"}) == [("/kind", 'expected one of ["a","b"]')]
    assert V.explain({"oneOf": [{}, {"type": "string"}]}, "s") == [("", "matches more than one alternative")]
    assert V.check({"anyOf": [{}, {"type": "string"}]}, "s")


@pytest.mark.node
def test_keyword_table_matches_pi_schema(node_bridge):
    """Random schemas over every row of the table, against the real pi-ai ``validateToolArguments``."""
    from hpd.harness.bridge import pi_validate

    r = random.Random(1)
    cases = [{"schema": {"type": "object", "properties": {"a": _schema(r)}} if r.random() < .5 else _schema(r),
              "call": {"name": "t", "arguments": {"a": _value(r)} if r.random() < .5 else _value(r)}} for _ in range(1500)]
    cases = [c for c in cases if isinstance(c["schema"], dict)]
    bad = []
    for c, t in zip(cases, pi_validate(cases)):
        if not t["ok"] and "Invalid regular expression" in t["error"]:
            continue  # pi-schema rejects the schema at compile time; we ignore the pattern (docs/departures.md)
        try:
            o = {"ok": True, "value": V.validate_tool_arguments(c["schema"], c["call"])}
        except V.ToolArgumentsError as e:
            o = {"ok": False, "error": str(e)}
        if _canon(o) != _canon(t):
            bad.append((c, o, t))
    assert not bad, f"{len(bad)} differ, first: {bad[0]}"
