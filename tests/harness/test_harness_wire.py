"""Wire format: our rendering/parsing vs Pi's openai-completions provider (unit + real provider on loopback)."""

import pytest

from hpd.harness import Harness, assistant_message, text, thinking, tool_call, user_message
from hpd.harness.wire import from_chat_completion, from_sse_chunks, to_openai_messages, to_openai_tools, to_openai_request


def _ctx():
    from hpd.harness import AgentTool, tool_result

    add = AgentTool("add", "Add two numbers", {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                                               "required": ["a", "b"]}, lambda t, a: tool_result(str(a["a"] + a["b"])))
    h = Harness.start([user_message("What is 2+3?")], "You are a helpful agent.", tools=[add])
    h.step(assistant_message([thinking("Need the sum.", "reasoning_content"), text("Let me add."), text("  "),
                              tool_call("call_a", "add", {"a": 2, "b": 3}), tool_call("call_b", "add", {"a": "x"})]))
    h.step(assistant_message([text("")], "error", error_message="boom"))  # dropped on the wire
    return h


def test_render_matches_pi_rules():
    h = _ctx()
    msgs = to_openai_messages(h.context())
    assert msgs[0] == {"role": "system", "content": "You are a helpful agent."}
    assert msgs[1] == {"role": "user", "content": "What is 2+3?"}
    a = msgs[2]
    assert a["content"] == "Let me add." and a["reasoning_content"] == "Need the sum."
    assert a["tool_calls"][0] == {"id": "call_a", "type": "function", "function": {"name": "add", "arguments": '{"a":2,"b":3}'}}
    assert msgs[3] == {"role": "tool", "content": "5", "tool_call_id": "call_a"}
    assert msgs[4]["role"] == "tool" and "isError" not in msgs[4] and msgs[4]["content"].startswith('Validation failed for tool "add"')
    assert len(msgs) == 5  # the error turn is dropped
    assert to_openai_messages(h.provider_context()) == msgs
    assert to_openai_tools(h.context()["tools"])[0]["function"]["name"] == "add"


def test_orphaned_calls_get_no_result_provided():
    ctx = {"systemPrompt": "", "tools": [], "messages": [
        user_message("x"), assistant_message([tool_call("c1", "t", {})]), user_message("interrupt")]}
    msgs = to_openai_messages(ctx)
    assert msgs[2] == {"role": "tool", "content": "No result provided", "tool_call_id": "c1"}
    assert msgs[3]["role"] == "user"


def test_parse_chat_completion():
    resp = {"id": "r1", "model": "qwen3-8b", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "Sure.", "reasoning_content": "hmm",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}},
                       {"id": "c2", "type": "function", "function": {"name": "add", "arguments": '{"a": 1 "b": 2}'}}]}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 4, "prompt_tokens_details": {"cached_tokens": 3}}}
    m = from_chat_completion(resp, model="qwen3-8b")
    assert m["stopReason"] == "toolUse" and [b["type"] for b in m["content"]] == ["thinking", "text", "toolCall", "toolCall"]
    assert m["content"][2]["arguments"] == {"a": 1, "b": 2}
    assert m["content"][3]["argumentsError"].startswith("Expected ',' or '}' after property value in JSON at position 8")
    assert m["usage"]["input"] == 7 and m["usage"]["cacheRead"] == 3 and m["usage"]["totalTokens"] == 14
    assert from_chat_completion({"choices": [{"message": {"content": "x"}, "finish_reason": "content_filter"}]})["errorMessage"] == \
        "Provider finish_reason: content_filter"
    assert from_sse_chunks([{"choices": [{"delta": {"content": "x"}}]}])["errorMessage"] == "Stream ended without finish_reason"


CHUNKS = [
    {"id": "r1", "model": "qwen3-8b", "choices": [{"index": 0, "delta": {"reasoning_content": "think "}}]},
    {"id": "r1", "choices": [{"index": 0, "delta": {"reasoning_content": "more", "content": "Hel"}}]},
    {"id": "r1", "choices": [{"index": 0, "delta": {"content": "lo", "tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "add", "arguments": '{"a": 1'}}]}}]},
    {"id": "r1", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ', "b": 2}'}},
                                                                  {"index": 1, "id": "call_2", "function": {"name": "add", "arguments": '{"a": '}}]}}]},
    {"id": "r1", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    {"id": "r1", "choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": 7}},
]


@pytest.mark.node
def test_against_real_openai_completions_provider(node_bridge):
    """The real pi-ai provider, pointed at a loopback server: same request messages/tools, same parsed message."""
    from hpd.harness.bridge import _one_shot
    from hpd.harness.conformance import normalise

    serving = {"provider": "vllm", "api": "openai-completions", "id": "qwen3-8b"}
    h = _ctx()
    ctx = h.provider_context()
    got = _one_shot({"op": "wire", "context": ctx, "chunks": CHUNKS, "modelId": "qwen3-8b"})
    body = got["body"]
    # our messages come from another "model" (provider hpd): Pi drops their thinking on replay
    assert body["messages"] == to_openai_messages(ctx, serving)
    assert "reasoning_content" not in body["messages"][2]
    assert body["tools"] == to_openai_tools(h.context()["tools"])
    assert to_openai_request(ctx, "qwen3-8b", provider="vllm") == body
    # the same transcript stamped as the serving model's own output: thinking is replayed
    same = {"messages": [dict(m, provider="vllm", model="qwen3-8b") if m["role"] == "assistant" else m for m in ctx["messages"]]}
    body2 = _one_shot({"op": "wire", "context": same, "chunks": CHUNKS, "modelId": "qwen3-8b"})["body"]
    assert body2["messages"] == to_openai_messages(same, serving) == to_openai_messages(same)
    assert body2["messages"][2]["reasoning_content"] == "Need the sum."
    theirs = normalise(got["message"])
    mine = normalise(from_sse_chunks(CHUNKS, model="qwen3-8b", provider="vllm"))
    theirs.pop("durationMs", None)
    assert mine == theirs
