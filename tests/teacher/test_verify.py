"""Verification discriminates: each failure mode gets its own machine-readable reason."""

import copy

import pytest
from teach_toy import toy_items

from hpd.harness import assistant_message, text, tool_call
from hpd.teacher import types as T
from hpd.teacher.proposal import perturb
from hpd.teacher.verify import verify


@pytest.fixture(scope="module")
def items():
    return toy_items(2)  # task 0: weather, time, final; task 1: weather, time, news, final


def _v(item, msg):
    base = item.restore()
    n0 = len(base.transcript)
    v = verify(msg, item, base)
    assert len(base.transcript) == n0, "verification must not touch the boundary state"
    return v


def test_reference_action_verifies_everywhere(items):
    for it in items:
        v = _v(it, it.reference)
        assert v.ok, (it.id, v)
        for c in v.calls:
            assert c["match"] == "exact"


def test_changed_argument_value_is_no_recorded_response(items):
    it = items[0]  # weather(city="Paris 0", days=2)
    v = _v(it, perturb(it.reference))
    assert not v.ok and v.reasons == [T.NO_RECORDED_RESPONSE]
    assert v.calls[0]["match"] == "miss"


def test_wrong_type_argument_is_invalid_args(items):
    it = items[0]
    msg = copy.deepcopy(it.reference)
    msg["content"][0]["arguments"]["days"] = {"not": "an integer"}
    v = _v(it, msg)
    assert not v.ok
    assert v.reasons[0] == T.INVALID_ARGS, v


def test_missing_required_argument_is_invalid_args(items):
    it = items[0]
    v = _v(it, assistant_message([tool_call("x", "weather", {"days": 2})]))
    assert v.reasons[0] == T.INVALID_ARGS, v


def test_unknown_tool(items):
    v = _v(items[0], assistant_message([tool_call("x", "weathr", {"city": "Paris 0"})]))
    assert v.reasons[0] == T.UNKNOWN_TOOL


def test_unparsed_tool_call_is_parse_error(items):
    v = _v(items[0], assistant_message([text('<tool_call>{"name": "weather", "argu</tool_call>')]))
    assert v.reasons[0] == T.PARSE_ERROR
    v = _v(items[0], assistant_message([tool_call("x", "weather", {}, arguments_error="{bad")]))
    assert v.reasons[0] == T.PARSE_ERROR
    assert not verify(None, items[0], items[0].restore()).ok


def test_repeated_call(items):
    it = items[1]  # after weather(...) executed: repeating it is answered "exact" but still rejected
    repeat = assistant_message([tool_call("x", "weather", dict(items[0].reference["content"][0]["arguments"]))])
    v = _v(it, repeat)
    assert v.reasons == [T.REPEATED_CALL], v
    assert v.calls[0]["match"] == "exact"
    # the same call twice within one candidate at the first boundary
    a = dict(items[0].reference["content"][0]["arguments"])
    v = _v(items[0], assistant_message([tool_call("x", "weather", a), tool_call("y", "weather", a)]))
    assert v.reasons == [T.REPEATED_CALL]


def test_premature_end_and_empty_answer(items):
    v = _v(items[0], assistant_message([text("Sunny, I guess.")]))
    assert v.reasons == [T.PREMATURE_END]
    final = items[2]
    assert final.can_end and final.is_final
    assert _v(final, assistant_message([text("   ")])).reasons == [T.EMPTY_ANSWER]
    assert _v(final, assistant_message([text("A different but non-empty answer")])).ok


def test_truncated_message(items):
    msg = copy.deepcopy(items[0].reference)
    msg["stopReason"] = "length"
    v = _v(items[0], msg)
    assert v.reasons[0] == T.TRUNCATED
