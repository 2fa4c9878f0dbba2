"""hpd serve for many clients: limits, bad input and keys answer 4xx with one clear line, never 500."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from hpd.serve.app import create_app
from policy_helpers import ADD, ScriptedPolicy

USER = [{"role": "user", "content": "What is 2+3?"}]
TOOLS = [{"type": "function", "function": ADD}]


def _client(tok, completions=(), **kw):
    return TestClient(create_app(ScriptedPolicy(tok, list(completions)), **kw))


def _ok(**extra):
    return {"model": "hpd", "messages": USER, "tools": TOOLS, **extra}


def _error(r, status: int, *words: str) -> str:
    assert r.status_code == status, r.text
    msg = r.json()["error"]["message"]
    assert "\n" not in msg and all(w in msg for w in words), msg
    return msg


@pytest.mark.parametrize("body,status,words", [
    # malformed bodies and unknown fields
    ([1, 2], 400, ["JSON object"]),
    ("text", 400, ["JSON object"]),
    (_ok(temprature=0.5), 400, ["unknown field 'temprature'"]),
    # fields hpd cannot honour, at non-neutral values
    (_ok(stop=["\n"]), 400, ["'stop'", "not supported"]),
    (_ok(presence_penalty=0.5), 400, ["'presence_penalty'"]),
    (_ok(tool_choice="required"), 400, ["'tool_choice'"]),
    (_ok(response_format={"type": "json_object"}), 400, ["'response_format'"]),
    (_ok(stream="yes"), 400, ["'stream'"]),
    (_ok(logprobs="all"), 400, ["'logprobs'"]),
    (_ok(n=1.5), 400, ["'n'"]),
    (_ok(max_tokens=0), 400, ["'max_tokens'"]),
    (_ok(seed="x"), 400, ["'seed'"]),
    (_ok(chat_template_kwargs=[1]), 400, ["chat_template_kwargs"]),
    # messages
    ({"messages": "hi"}, 400, ["'messages'"]),
    ({"messages": [{"role": "wizard", "content": "x"}]}, 400, ["messages[0].role"]),
    ({"messages": [{"role": "user", "content": 5}]}, 400, ["messages[0].content"]),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}, 400,
     ["messages[0].content[0]", "'image_url' parts are not supported"]),
    ({"messages": USER + [{"role": "assistant", "content": None, "tool_calls": [{"function": "add"}]}]}, 400,
     ["messages[1].tool_calls[0]"]),
    ({"messages": USER + [{"role": "user", "content": "x", "tool_calls": []}]}, 400, ["messages[1].tool_calls"]),
    # tools and their schemas
    (_ok(tools={"add": ADD}), 400, ["'tools' must be a list"]),
    (_ok(tools=[ADD]), 400, ["tools[0] must be"]),
    (_ok(tools=[{"type": "function", "function": {**ADD, "name": "add\ntwo"}}]), 400, ["tools[0].function.name"]),
    (_ok(tools=[{"type": "function", "function": {**ADD, "name": ""}}]), 400, ["tools[0].function.name"]),
    (_ok(tools=TOOLS + TOOLS), 400, ["tools[1].function.name 'add' is declared twice"]),
    (_ok(tools=[{"type": "function", "function": {**ADD, "parameters": "object"}}]), 400,
     ["tools[0].function.parameters"]),
    (_ok(tools=[{"type": "function", "function": {**ADD, "parameters": {"type": "obj"}}}]), 400,
     ["tools[0].function.parameters.type", "not a JSON Schema type"]),
    (_ok(tools=[{"type": "function", "function": {**ADD, "parameters": {
        "type": "object", "properties": {"a": {"type": "number"}}, "required": "a"}}}]), 400,
     ["parameters.required must be a list of strings"]),
    (_ok(tools=[{"type": "function", "function": {**ADD, "parameters": {
        "type": "object", "properties": {"a": {"type": "array", "items": {"type": "integr"}}}}}}]), 400,
     ["parameters.properties.a.items.type"]),
    (_ok(tools=[{"type": "function", "function": {**ADD, "parameters": {"anyOf": []}}}]), 400, ["anyOf"]),
])
def test_bad_chat_requests_answer_400(tok, body, status, words):
    _error(_client(tok).post("/v1/chat/completions", json=body), status, *words)


@pytest.mark.parametrize("body,words", [
    ({"prompt": "x", "echo": True}, ["'echo'"]),
    ({"prompt": "x", "logprobs": 3}, ["'logprobs' must be 0"]),
    ({"prompt": "x", "stream": True}, ["'stream' is not supported on /v1/completions"]),
    ({"prompt": [1]}, ["'prompt'"]),
    ({"prompt": "x", "messages": USER}, ["unknown field 'messages'"]),
])
def test_bad_completion_requests_answer_400(tok, body, words):
    _error(_client(tok).post("/v1/completions", json=body), 400, *words)


def test_neutral_values_and_bookkeeping_fields_are_accepted(tok):
    c = _client(tok, ["ok<|im_end|>", "ok<|im_end|>"])
    body = _ok(stop=[], presence_penalty=0, tool_choice="auto", parallel_tool_calls=True, store=False,
               metadata={"k": "v"}, user="u", response_format={"type": "text"}, prompt_cache_key="s1",
               stream_options={"include_usage": True})
    r = c.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    # Pi's default thinking format sends reasoning_effort: thinking on, unless chat_template_kwargs says
    r = c.post("/v1/chat/completions", json=_ok(reasoning_effort="high"))
    assert r.status_code == 200 and c.app.state.requests[-1]["prompt"].endswith("<|im_start|>assistant\n")
    assert "<think>\n\n</think>" not in c.app.state.requests[-1]["prompt"]


def test_body_size_limit_is_413(tok):
    c = _client(tok, ["ok<|im_end|>"], max_body_bytes=2000)
    _error(c.post("/v1/chat/completions", json=_ok(messages=[{"role": "user", "content": "x" * 5000}])),
           413, "5", "at most 2000")
    # a chunked body without Content-Length is cut off while it is read
    chunks = (b for b in [json.dumps(_ok()).encode()[:-1], b" " * 3000, b"}"])
    _error(c.post("/v1/chat/completions", content=chunks), 413, "over 2000 bytes")
    assert c.post("/v1/chat/completions", json=_ok()).status_code == 200


def test_prompt_and_max_tokens_limits(tok):
    c = _client(tok, ["ok<|im_end|>"], max_prompt_tokens=20, max_tokens_limit=300, max_tokens_cap=16)
    _error(c.post("/v1/chat/completions", json=_ok()), 400, "tokens; this server accepts at most 20 prompt tokens")
    _error(c.post("/v1/completions", json={"prompt": ["short", "word " * 40]}), 400, "prompt[1] is", "at most 20")
    _error(c.post("/v1/completions", json={"prompt": "x", "max_tokens": 301}), 400, "'max_tokens' = 301",
           "limit of 300")
    r = c.post("/v1/completions", json={"prompt": "x", "max_tokens": 300})   # within the limit: clamped to the cap
    assert r.status_code == 200 and c.app.state.server.policy.calls[-1]["max_new_tokens"] == 16


def test_context_window_of_the_policy_is_the_default_limit(tok):
    pol = ScriptedPolicy(tok, [])
    pol.context_window = 64
    c = TestClient(create_app(pol))
    _error(c.post("/v1/chat/completions", json=_ok(max_tokens=65)), 400, "limit of 64")
    _error(c.post("/v1/chat/completions", json=_ok(messages=[{"role": "user", "content": "word " * 80}])), 400,
           "at most 63 prompt tokens", "context window is 64")
    assert c.get("/v1/models").json()["data"][0]["max_model_len"] == 64


def test_api_key(tok):
    c = _client(tok, ["ok<|im_end|>", "ok<|im_end|>"], api_key="s3cret")
    assert c.get("/health").status_code == 200                   # open
    _error(c.get("/v1/models"), 401, "API key")
    _error(c.post("/v1/chat/completions", json=_ok()), 401, "Authorization: Bearer")
    _error(c.post("/v1/chat/completions", json=_ok(), headers={"Authorization": "Bearer wrong"}), 401, "API key")
    good = {"Authorization": "Bearer s3cret"}
    assert c.get("/v1/models", headers=good).json()["data"][0]["id"] == "hpd"
    with c.stream("POST", "/v1/chat/completions", json=_ok(stream=True), headers=good) as r:
        lines = [ln for ln in r.iter_lines() if ln]
    assert r.status_code == 200 and lines[-1] == "data: [DONE]"
    assert c.post("/v1/completions", json={"prompt": "x"}, headers=good).status_code == 200


def test_garbage_never_answers_500(tok):
    """A spread of odd but JSON bodies: every answer is a 4xx (the policy is never reached)."""
    c = _client(tok)
    odd = [None, 0, [], {}, {"messages": None}, {"messages": [None]}, {"messages": [{}]},
           {"messages": [{"role": "assistant", "content": "x", "tool_calls": "add"}]}, {"messages": [{"role": "tool", "content": "x", "tool_call_id": 3}]},
           {"messages": USER, "tools": [None]}, {"messages": USER, "tools": [{"type": "function", "function": None}]},
           {"messages": USER, "tools": [{"type": "function", "function": {"name": "a", "parameters": {"properties": []}}}]},
           {"messages": USER, "tools": [{"type": "function", "function": {"name": "a", "description": 5}}]},
           {"messages": USER, "temperature": -1}, {"messages": USER, "top_p": 0}, {"messages": USER, "n": 65},
           {"messages": USER, "max_completion_tokens": "many"}, {"messages": USER, "reasoning_effort": 3},
           {"messages": USER, "stream_options": "yes"}]
    for body in odd:
        r = c.post("/v1/chat/completions", json=body)
        assert 400 <= r.status_code < 500, (body, r.status_code, r.text)
    for raw in [b"", b"{", b"\xff\xfe", b"[1,", b'{"messages": [}']:
        _error(c.post("/v1/chat/completions", content=raw), 400, "not JSON")
    assert c.app.state.server.policy.calls == []


def test_health_reports_the_engine(tok):
    c = _client(tok, ["ok<|im_end|>"])
    c.post("/v1/chat/completions", json=_ok())
    h = c.get("/health").json()
    assert h["status"] == "ok" and h["batches"] == 1 and h["queued"] == 0 and h["mean_batch_rows"] == 1.0


def test_cli_serve_rejects_bad_limits(tiny_dir):
    from hpd.cli import app

    for flag in ("--max-batch", "--max-body-bytes", "--max-prompt-tokens", "--max-tokens"):
        r = CliRunner().invoke(app, ["serve", "--model", str(tiny_dir), flag, "0"])
        assert r.exit_code == 2 and flag in r.output, (flag, r.output)
