"""Render -> parse is exact for hand-made and random documents; the strict parser rejects broken text."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpd.document import ControlDocument, DocumentParseError, parse, parse_fields, render
from hpd.document.schema import (
    ActionCall, ArgSource, CallOutcome, EndRule, NextAction, PlanStep, ResultRef, ToolSpec,
)

END = EndRule(allowed=True, rule="a reply with no toolCall blocks ends the run", final_turn="text, no calls")


def _doc(privilege="oracle", **kw):
    base = dict(
        privilege=privilege, kind="after_tool_batch", index=2, turn=2, execution="parallel", turns_left=3,
        tail="toolResult",
        tools=[ToolSpec(name='Genius - Song Lyrics: Chart: Albums | "x"', required=["q", "weird name", "none"]),
               ToolSpec(name="Clock: now", required=[])],
        last_batch=[CallOutcome(name="Clock: now", ok=True),
                    CallOutcome(name="A | B", ok=False, error_kind="validation", cause="schema: q: missing"),
                    CallOutcome(name="X", ok=False, error_kind="unknown_tool", cause=None)],
        unused=[ResultRef(call=1, name="Clock: now")], calls_made=3, errors_made=2, end=END,
    )
    if privilege != "runtime":
        base.update(steps_left=2, complete=False, plan=[
            PlanStep(step=3, tool="Maps: Search", callable=True, recorded="ok", repeat=False,
                     args=[ArgSource(name="q", source="step:1"), ArgSource(name="lang code", source="default")]),
            PlanStep(step=4, tool="Off: tool", callable=False, recorded="failed", repeat=True, args=[]),
        ])
    if privilege == "oracle":
        base["next_action"] = NextAction(calls=[ActionCall(name="Maps: Search", arguments={"q": "Paris | \"FR\"\n", "n": 1.5,
                                                                                           "deep": {"a": [1, None, True]}})])
    base.update(kw)
    return ControlDocument(**base)


@pytest.mark.parametrize("privilege", ["runtime", "plan", "oracle"])
def test_roundtrip_hand_made(privilege):
    d = _doc(privilege)
    text = render(d)
    assert text.startswith(f"<control-document v1 privilege={privilege}>\n")
    assert parse(text) == d
    assert render(parse(text)) == text


def test_roundtrip_edge_values():
    cases = [
        _doc("runtime", turns_left=None, tools=[], last_batch=[], unused=[], tail="user", kind="initial"),
        _doc("plan", plan=[], steps_left=0, complete=True),
        _doc("oracle", next_action=NextAction(final="Line 1\nLine 2 | \u00e9\u4e2d </control-document>")),
        _doc("oracle", next_action=NextAction(final="")),
        _doc("oracle", next_action=NextAction(calls=[ActionCall(name="a", arguments={})], final="also text")),
        _doc("oracle", next_action=NextAction()),
        _doc("oracle", next_action=None),
        _doc("plan", plan=None, steps_left=None, complete=None),
    ]
    for d in cases:
        assert parse(render(d)) == d, render(d)


def test_levels_cannot_leak():
    with pytest.raises(ValueError):
        _doc("runtime", steps_left=1)
    with pytest.raises(ValueError):
        _doc("plan", next_action=NextAction(final="x"))


def test_strict_parse_rejects_broken_text():
    text = render(_doc("oracle"))
    lines = text.split("\n")
    bad = [
        "",
        text.replace("privilege=oracle", "privilege=root"),
        "\n".join(lines[:-3]) + "\n",  # truncated
        "\n".join([lines[0], lines[2], lines[1]] + lines[3:]),  # reordered
        text.replace("turn=2", "turn=two"),
        text.replace("allowed=yes", "allowed=maybe"),
        text.replace('{"q"', '["q"'),
    ]
    for t in bad:
        with pytest.raises(DocumentParseError):
            parse(t)


def test_parse_fields_is_lenient():
    text = render(_doc("oracle"))
    broken = text.replace("calls: made=3", "calls: made=lots")
    f = parse_fields("garbage\n" + broken)
    assert f["privilege"] == "oracle"
    assert "calls_made" not in f
    assert f["turns_left"] == 3 and f["next_action"]["calls"][0]["name"] == "Maps: Search"
    assert parse_fields(None) == {} and parse_fields("") == {}


# -- random documents ---------------------------------------------------------------------------------
names = st.text(min_size=0, max_size=12)
idents = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
argnames = st.one_of(idents, names)
json_vals = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False),
              st.text(max_size=8)),
    lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=4), c, max_size=3)),
    max_leaves=6,
)
sources = st.one_of(st.sampled_from(["query", "default", "unknown"]), st.integers(1, 40).map(lambda k: f"step:{k}"))


@st.composite
def documents(draw):
    privilege = draw(st.sampled_from(["runtime", "plan", "oracle"]))
    kw = dict(
        privilege=privilege, kind=draw(st.sampled_from(["initial", "after_tool_batch", "after steering"])),
        index=draw(st.integers(0, 50)), turn=draw(st.integers(0, 50)),
        execution=draw(st.sampled_from(["parallel", "sequential"])),
        turns_left=draw(st.one_of(st.none(), st.integers(-3, 30))), tail=draw(st.sampled_from(["user", "toolResult"])),
        tools=draw(st.lists(st.builds(ToolSpec, name=names, required=st.lists(argnames, max_size=3)), max_size=4)),
        last_batch=draw(st.lists(st.one_of(
            st.builds(CallOutcome, name=names, ok=st.just(True)),
            st.builds(CallOutcome, name=names, ok=st.just(False), error_kind=st.sampled_from(["validation", "miss"]),
                      cause=st.one_of(st.none(), names))), max_size=3)),
        unused=draw(st.lists(st.builds(ResultRef, call=st.integers(1, 20), name=names), max_size=3)),
        calls_made=draw(st.integers(0, 30)), errors_made=draw(st.integers(0, 30)),
        end=draw(st.builds(EndRule, allowed=st.booleans(), rule=names, final_turn=names)),
    )
    if privilege != "runtime":
        kw["steps_left"] = draw(st.one_of(st.none(), st.integers(0, 20)))
        kw["complete"] = draw(st.one_of(st.none(), st.booleans()))
        kw["plan"] = draw(st.one_of(st.none(), st.lists(st.builds(
            PlanStep, step=st.integers(1, 20), tool=names, callable=st.booleans(),
            recorded=st.sampled_from(["ok", "failed"]), repeat=st.booleans(),
            args=st.lists(st.builds(ArgSource, name=argnames, source=sources), max_size=3)), max_size=3)))
    if privilege == "oracle":
        kw["next_action"] = draw(st.one_of(st.none(), st.builds(
            NextAction, calls=st.lists(st.builds(ActionCall, name=names,
                                                 arguments=st.dictionaries(st.text(max_size=5), json_vals, max_size=3)),
                                       max_size=3),
            final=st.one_of(st.none(), st.text(max_size=30)))))
    return ControlDocument(**kw)


@settings(max_examples=150, deadline=None)
@given(documents())
def test_roundtrip_random(d):
    text = render(d)
    assert parse(text) == d
