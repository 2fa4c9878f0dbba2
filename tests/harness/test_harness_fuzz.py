"""Hypothesis fuzzing: arbitrary assistant messages never break the loop; every call gets exactly one result."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpd.harness import AgentTool, Harness, LoopConfig, tool_result, user_message
from hpd.harness.wire import from_chat_completion, from_sse_chunks, parse_tool_call_arguments, to_openai_messages

SCHEMA = {"type": "object", "properties": {"a": {"type": "number"}, "s": {"type": "string"}, "e": {"enum": ["x", 1]},
                                           "o": {"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"]}},
          "required": ["a"], "additionalProperties": False}


def _boom(t, a):
    raise ValueError("boom")


TOOLS = [AgentTool("t", "", SCHEMA, lambda t, a: {**tool_result("ok"), "delay": len(t) % 3}),
         AgentTool("boom", "", {"type": "object"}, _boom),
         AgentTool("fin", "", {}, lambda t, a: tool_result("f", terminate=True))]

json_val = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
                        | st.text(max_size=8), lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                        max_leaves=8)
names = st.sampled_from(["t", "boom", "fin", "nope", "", "T"]) | st.text(max_size=5)
call = st.builds(lambda i, n, a, err: {"type": "toolCall", "id": i, "name": n, "arguments": a, **({"argumentsError": err} if err else {})},
                 st.text(max_size=4), names, st.dictionaries(st.sampled_from(["a", "s", "e", "o", "zz", "10"]), json_val, max_size=4)
                 | json_val, st.none() | st.text(max_size=6))
block = call | st.builds(lambda s: {"type": "text", "text": s}, st.text(max_size=6)) | st.builds(
    lambda s: {"type": "thinking", "thinking": s}, st.text(max_size=6)) | json_val
message = st.builds(lambda c, r: {"role": "assistant", "content": c, "stopReason": r},
                    st.lists(block, max_size=5) | json_val, st.sampled_from(["stop", "toolUse", "length", "error", "aborted", None]))


@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(message, min_size=1, max_size=4), st.sampled_from(["parallel", "sequential"]), st.booleans())
def test_loop_never_raises_and_answers_every_call(msgs, mode, abort):
    h = Harness.start([user_message("q")], "s", tools=TOOLS, config=LoopConfig(tool_execution=mode, max_turns=3))
    for m in msgs:
        if h.done:
            break
        if abort:
            h.abort()
        h.step(m)
        recorded = h.transcript[[i for i, x in enumerate(h.transcript) if x.get("role") == "assistant"][-1]]
        calls = [b for b in recorded["content"] if b.get("type") == "toolCall"]
        if recorded.get("stopReason") in ("error", "aborted"):
            assert h.done and h.last_tool_results == []
            continue
        assert [r["toolCallId"] for r in h.last_tool_results] == [c.get("id") for c in calls]
        assert all(isinstance(r["isError"], bool) for r in h.last_tool_results)
    # every call in the transcript has exactly one result directly after its message
    tr = h.transcript
    for i, m in enumerate(tr):
        if m.get("role") == "assistant" and m.get("stopReason") not in ("error", "aborted"):
            calls = [b for b in m["content"] if b.get("type") == "toolCall"]
            follow = tr[i + 1:i + 1 + len(calls)]
            assert [r.get("toolCallId") for r in follow] == [c.get("id") for c in calls]
            assert all(r["role"] == "toolResult" for r in follow)
    ends = [e["toolCallId"] for e in h.events if e["type"] == "tool_execution_end"]
    starts = [e["toolCallId"] for e in h.events if e["type"] == "tool_execution_start"]
    assert sorted(map(str, ends)) == sorted(map(str, starts))  # every started call ends exactly once
    assert isinstance(to_openai_messages(h.context()), list)  # the renderer never raises on what the loop recorded


@settings(max_examples=1500, deadline=None)
@given(st.text(max_size=30) | st.builds(lambda v: __import__("json").dumps(v), json_val))
def test_argument_parser_never_raises(s):
    r = parse_tool_call_arguments(s)
    assert isinstance(r["arguments"], dict)
    if "argumentsError" in r:
        assert r["arguments"] == {} and r["argumentsError"].endswith("\n\nReceived arguments:\n" + s)


@settings(max_examples=500, deadline=None)
@given(json_val, st.lists(json_val, max_size=4))
def test_response_parsers_never_raise(resp, chunks):
    m = from_chat_completion(resp)
    assert m["role"] == "assistant" and m["stopReason"] in ("stop", "length", "toolUse", "error")
    m = from_sse_chunks(chunks)
    assert m["stopReason"] in ("stop", "length", "toolUse", "error")
