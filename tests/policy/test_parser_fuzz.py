"""Hypothesis fuzzing of the parser: arbitrary model output never raises and always yields a
well-formed Pi assistant message that the server path reproduces; rendered actions round-trip."""

from __future__ import annotations

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpd.harness import wire
from hpd.harness.messages import assistant_message, text, tool_call
from hpd.policy import chat

FRAGMENTS = ["<tool_call>", "</tool_call>", "<think>", "</think>", "<|im_end|>", "<|endoftext|>", "<tool_response>",
             '{"name": "add", "arguments": ', '{"name": ', '"arguments"', '"name"', '{', '}', '[', ']', '"', "\\", "\\u12",
             ":", ",", "\n", " ", "null", "1e999", "NaN", '{"a": 1}', '"x"', "\x00", "\ud800", "é", "🙂"]
model_output = st.one_of(
    st.text(max_size=200),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=40).map("".join),
)


def _check_message(m: dict) -> None:
    assert m["role"] == "assistant" and isinstance(m["content"], list)
    assert m["stopReason"] in ("stop", "toolUse", "length")
    calls = [b for b in m["content"] if b["type"] == "toolCall"]
    for b in m["content"]:
        assert b["type"] in ("text", "thinking", "toolCall")
        if b["type"] == "toolCall":
            assert isinstance(b["name"], str) and b["name"] and isinstance(b["arguments"], dict)
            if "argumentsError" in b:
                assert b["arguments"] == {} and isinstance(b["argumentsError"], str)
    assert (m["stopReason"] == "toolUse") == bool(calls) or m["stopReason"] == "length"
    assert len({b["id"] for b in calls}) == len(calls)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(txt=model_output, truncated=st.booleans())
def test_parse_never_raises_and_server_agrees(txt, truncated):
    m = chat.parse_action(txt, finish_reason="length" if truncated else "stop")
    _check_message(m)
    p = chat.parse_completion(txt)
    resp = {"choices": [{"index": 0, "message": chat.to_openai_message(p), "finish_reason": chat.finish_reason_for(p, truncated)}]}
    via_pi = wire.from_chat_completion(resp)
    assert via_pi["content"] == m["content"]
    assert via_pi["stopReason"] == m["stopReason"]


json_scalar = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                        st.floats(allow_nan=False, allow_infinity=False, width=32), st.text(max_size=12))
json_value = st.recursive(json_scalar, lambda c: st.one_of(st.lists(c, max_size=3),
                                                           st.dictionaries(st.text(max_size=6), c, max_size=3)),
                          max_leaves=8)
safe_text = st.text(alphabet=string.ascii_letters + string.digits + " .,;:!?'()-_\n\téß€", min_size=1, max_size=60).filter(
    lambda s: s.strip() != "" and s == s.strip("\n"))
name = st.from_regex(r"[a-z][a-z0-9_]{0,15}", fullmatch=True)
action = st.builds(
    lambda t, calls: assistant_message(([text(t)] if t else []) + [tool_call(f"i{k}", n, a) for k, (n, a) in enumerate(calls)]),
    st.one_of(st.none(), safe_text),
    st.lists(st.tuples(name, st.dictionaries(st.text(max_size=8), json_value, max_size=4)), max_size=3),
)


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(a=action)
def test_rendered_actions_round_trip(tok, a):
    rendered = chat.render_action(tok, a)
    got = chat.parse_action(rendered, id_prefix="i")
    # compare as JavaScript sees the values (a float like 6.7e16 and the int with the same digits are one JS number)
    norm = lambda bs: [{k: (chat.js_json(v) if k == "arguments" else v) for k, v in b.items() if k != "id"}  # noqa: E731
                       for b in bs]
    assert norm(got["content"]) == norm(a["content"])
