"""hpd serve: OpenAI-compatible responses, tool_calls, SSE streaming (read back with Pi's parser), errors."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from hpd.harness import wire
from hpd.serve.app import create_app
from policy_helpers import ScriptedPolicy, sample_boundaries

CALLS = ('Checking.\n<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>\n'
         '<tool_call>\n{"name": "add", "arguments": {"a": 1,}}\n</tool_call><|im_end|>')


def _client(tok, completions, **kw):
    return TestClient(create_app(ScriptedPolicy(tok, completions), **kw))


def _body(**extra):
    return {**wire.to_openai_request(sample_boundaries()[0]["ctx"], "hpd", stream=False), **extra}


def test_models_and_health(tok):
    c = _client(tok, [])
    assert c.get("/health").json()["status"] == "ok"
    assert c.get("/v1/models").json()["data"][0]["id"] == "hpd"


def test_chat_completion_with_tool_calls(tok):
    c = _client(tok, [CALLS])
    r = c.post("/v1/chat/completions", json=_body(max_completion_tokens=50, temperature=0.7, top_k=5, seed=9))
    data = r.json()
    [choice] = data["choices"]
    assert choice["finish_reason"] == "tool_calls"
    m = choice["message"]
    assert m["content"] == "Checking."
    assert [tc["function"]["name"] for tc in m["tool_calls"]] == ["add", "add"]
    assert json.loads(m["tool_calls"][0]["function"]["arguments"]) == {"a": 2, "b": 3}
    assert m["tool_calls"][1]["function"]["arguments"] == '{"a": 1,}'  # raw text: Pi derives argumentsError
    pi = wire.from_chat_completion(data)
    assert pi["stopReason"] == "toolUse" and "argumentsError" in pi["content"][2]
    assert data["usage"]["completion_tokens"] == len(tok(CALLS, add_special_tokens=False)["input_ids"])
    call = c.app.state.server.policy.calls[0]
    assert (call["temperature"], call["top_k"], call["top_p"], call["seed"], call["max_new_tokens"]) == (0.7, 5, 1.0, 9, 50)


def test_streaming_matches_non_streaming(tok):
    c = _client(tok, [CALLS, CALLS])
    plain = wire.from_chat_completion(c.post("/v1/chat/completions", json=_body()).json())
    with c.stream("POST", "/v1/chat/completions", json=_body(stream=True, stream_options={"include_usage": True})) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = [ln for ln in r.iter_lines() if ln]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(ln[len("data: "):]) for ln in lines[:-1]]
    assert all(ch["object"] == "chat.completion.chunk" for ch in chunks)
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
    streamed = wire.from_sse_chunks(lines)
    no_ids = lambda bs: [{k: v for k, v in b.items() if k != "id"} for b in bs]  # noqa: E731
    assert no_ids(streamed["content"]) == no_ids(plain["content"]) and streamed["stopReason"] == plain["stopReason"]
    assert [b["id"] for b in streamed["content"] if b["type"] == "toolCall"] == ["call_1_0_0", "call_1_0_1"]
    assert len([ch for ch in chunks if ch["choices"] and "content" in ch["choices"][0]["delta"]]) >= 2


def test_length_finish_and_thinking(tok):
    c = _client(tok, ['<tool_call>\n{"name": "add", "argu', "<think>\nhmm\n</think>\n\nok<|im_end|>"])
    r = c.post("/v1/chat/completions", json=_body()).json()
    assert r["choices"][0]["finish_reason"] == "length"
    assert wire.from_chat_completion(r)["stopReason"] == "length"
    r = c.post("/v1/chat/completions", json=_body(chat_template_kwargs={"enable_thinking": True})).json()
    m = r["choices"][0]["message"]
    assert m["reasoning_content"] == "hmm" and m["content"] == "ok"
    assert c.app.state.requests[-1]["prompt"].endswith("<|im_start|>assistant\n")


def test_text_completions_endpoint(tok):
    c = _client(tok, ["abc<|im_end|>", "def"])
    r = c.post("/v1/completions", json={"prompt": "x", "n": 2, "logprobs": 0}).json()
    assert [ch["text"] for ch in r["choices"]] == ["abc", "def"]
    assert [ch["finish_reason"] for ch in r["choices"]] == ["stop", "length"]


@pytest.mark.parametrize("body,msg", [
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "user", "content": "x"}], "n": 0}, "'n'"),
    ({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}, "temperature"),
    ({"messages": [{"role": "user", "content": "x"}], "tools": {"a": 1}}, "tools"),
])
def test_bad_requests_are_400(tok, body, msg):
    r = _client(tok, []).post("/v1/chat/completions", json=body)
    assert r.status_code == 400 and msg in r.json()["error"]["message"]
    r = _client(tok, []).post("/v1/chat/completions", content=b"{not json")
    assert r.status_code == 400


def test_max_tokens_capped(tok):
    c = _client(tok, ["a<|im_end|>"], max_tokens_cap=16)
    c.post("/v1/chat/completions", json=_body(max_completion_tokens=32000))
    assert c.app.state.server.policy.calls[0]["max_new_tokens"] == 16


def test_cli_serve_rejects_bad_paths(tmp_path, tiny_dir):
    from hpd.cli import app

    r = CliRunner().invoke(app, ["serve", "--model", str(tmp_path)])
    assert r.exit_code == 2 and "config.json" in r.output
    r = CliRunner().invoke(app, ["serve", "--model", str(tiny_dir), "--adapter", str(tmp_path)])
    assert r.exit_code == 2 and "adapter" in r.output
