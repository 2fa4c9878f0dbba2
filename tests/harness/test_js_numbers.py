"""JavaScript number semantics (hpd.harness.jsvalues): the values the harness holds and the JSON texts it
writes are the ones Pi (V8) holds and writes: ``1e3`` is ``1000``, never ``1000.0``."""

import json
import math
import random
import subprocess

import pytest

from hpd.harness import AgentTool, Harness, LoopConfig, assistant_message, tool_call, tool_result, user_message
from hpd.harness import conformance as cf
from hpd.harness.jsvalues import js_json, js_json_parse, js_number, js_number_str, js_stringify, js_to_number, js_value
from hpd.harness.wire import parse_tool_call_arguments

# (JSON text, what JSON.stringify(JSON.parse(text)) writes in Node 20)
KNOWN = [
    ("1e3", "1000"), ("1000.0", "1000"), ("-0", "0"), ("-0.0", "0"), ("1e21", "1e+21"), ("1e20", "100000000000000000000"),
    ("9007199254740993", "9007199254740992"), ("12345678901234567890", "12345678901234567000"), ("1e-7", "1e-7"),
    ("0.000001", "0.000001"), ("1E-6", "0.000001"), ("5e-324", "5e-324"), ("1e400", "null"), ("-1e400", "null"),
    ("1e-400", "0"), ("0.1", "0.1"), ("1.7976931348623157e308", "1.7976931348623157e+308"),
    ('{"b":1,"2":2,"a":3,"1":4}', '{"1":4,"2":2,"b":1,"a":3}'), ('{"a":1,"b":2,"a":3}', '{"a":3,"b":2}'),
    ('{"01":1,"4294967295":2,"4294967294":3}', '{"4294967294":3,"01":1,"4294967295":2}'),
]


@pytest.mark.parametrize("text,want", KNOWN)
def test_parse_then_stringify_as_node(text, want):
    value, err = js_json_parse(text)
    assert err is None
    assert js_stringify(value) == want


def test_integer_valued_numbers_are_python_ints():
    assert parse_tool_call_arguments('{"n": 1e3}')["arguments"] == {"n": 1000}
    assert type(parse_tool_call_arguments('{"n": 1e3}')["arguments"]["n"]) is int
    assert js_number(1000.0) == 1000 and type(js_number(1000.0)) is int
    assert type(js_number(-0.0)) is int and js_number(-0.0) == 0
    assert js_number(2.0 ** 60) == 1152921504606847000                 # the digits String(2**60) shows
    assert type(js_number(1e21)) is float and type(js_number(0.5)) is float
    assert math.isinf(js_number(math.inf)) and math.isnan(js_number(math.nan))
    assert js_number(2 ** 64) == 18446744073709552000                    # a Python int rounded to a double
    assert js_number(10 ** 400) == math.inf
    assert js_to_number("1e3") == 1000 and type(js_to_number("1e3")) is int
    # json.dumps of a held value now spells ints as JSON.stringify does
    assert json.dumps(js_value({"a": 1e3, "b": [2.0, -0.0], "c": 1e16})) == '{"a": 1000, "b": [2, 0], "c": 10000000000000000}'


def test_js_json_is_parse_of_stringify():
    v = {"b": float("nan"), "2": [math.inf, 1.5], "a": (1.0,), 3: "int key"}
    assert js_json(v) == {"2": [None, 1.5], "3": "int key", "b": None, "a": [1]}
    assert list(js_json(v)) == ["2", "3", "b", "a"]
    assert js_value({"x": math.inf})["x"] == math.inf                    # in memory Pi holds Infinity
    assert js_number_str(2 ** 53 + 1) == "9007199254740992" and js_number_str(10 ** 400) == "Infinity"


def _echo(tool_call_id, args):
    return {**tool_result(js_stringify(args)), "details": {"got": args, "ratio": 2.0, "tiny": 1e-7}}


def test_harness_holds_js_values():
    """Arguments written by Python code (1000.0) and results with Python floats are held as Pi holds them."""
    seen = []
    tool = AgentTool("t", "", {"type": "object", "properties": {"n": {"type": "integer"}}},
                     lambda i, a: seen.append(a) or _echo(i, a))
    h = Harness.start([user_message("q")], "s", tools=[tool], config=LoopConfig())
    h.step(assistant_message([tool_call("c1", "t", {"n": 1000.0, "z": -0.0, "k": {"2": 1.0, "1": 2}})]))
    call = h.transcript[-2]["content"][0]
    assert call["arguments"] == {"n": 1000, "z": 0, "k": {"1": 2, "2": 1}}
    assert [type(call["arguments"][k]) for k in ("n", "z")] == [int, int] and list(call["arguments"]["k"]) == ["1", "2"]
    assert type(seen[0]["n"]) is int
    res = h.transcript[-1]
    assert res["content"][0]["text"] == '{"n":1000,"z":0,"k":{"1":2,"2":1}}'
    assert type(res["details"]["ratio"]) is int and res["details"]["tiny"] == 1e-7


def test_comparison_is_strict_about_number_types():
    assert cf.first_difference({"n": 1000.0}, {"n": 1000}) is not None   # json.dumps would write 1000.0
    assert cf.first_difference({"n": 1000}, {"n": 1000}) is None
    assert cf.first_difference({"n": math.inf}, {"n": None}) is None     # JSON.stringify(Infinity) is null
    assert cf.first_difference({"n": 1}, {"n": True}) is not None


def _random_number_texts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        sign = rng.choice(["", "-"])
        kind = rng.randrange(5)
        if kind == 0:
            out.append(sign + str(rng.randrange(10 ** rng.randrange(1, 30))))
        elif kind == 1:
            out.append(f"{sign}{rng.randrange(1, 10 ** 6)}e{rng.randrange(-330, 330)}")
        elif kind == 2:
            out.append(f"{sign}{rng.randrange(10 ** 4)}.{rng.randrange(10 ** rng.randrange(1, 20))}")
        elif kind == 3:
            out.append(repr(rng.uniform(-1, 1) * 10 ** rng.randrange(-30, 30)))
        else:
            out.append(f"{sign}{rng.randrange(10)}.{'0' * rng.randrange(3)}5E{rng.choice(['+', '-', ''])}{rng.randrange(25)}")
    return out


@pytest.mark.node
def test_random_numbers_and_keys_match_node(node_bridge):
    """2,000 random number spellings and key orders: JSON.stringify(JSON.parse(t)) and String(n) in Node vs ours."""
    texts = _random_number_texts(1500)
    rng = random.Random(1)
    keys = ["a", "b", "0", "1", "2", "10", "01", "-1", "1.5", "4294967294", "4294967295", "__proto__x", "é"]
    texts += ["{" + ",".join(f'"{rng.choice(keys)}":{rng.choice(texts)}' for _ in range(rng.randrange(1, 6))) + "}"
              for _ in range(500)]
    js = ("let d='';process.stdin.on('data',c=>d+=c).on('end',()=>{const t=JSON.parse(d);"
          "process.stdout.write(JSON.stringify(t.map(s=>{const v=JSON.parse(s);"
          "return [JSON.stringify(v), typeof v==='number'?String(v):null]})))})")
    res = subprocess.run(["node", "-e", js], input=json.dumps(texts), capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    node = json.loads(res.stdout)
    for t, (want, want_str) in zip(texts, node):
        value, err = js_json_parse(t)
        assert err is None, t
        assert js_stringify(value) == want, t
        assert json.loads(want) == js_json(value) and type(json.loads(want)) is type(js_json(value)), t
        if want_str is not None:
            assert js_number_str(value) == want_str, t
