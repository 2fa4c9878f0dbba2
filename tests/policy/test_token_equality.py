"""Token equality: training ids == serving ids for the same boundary and action.

Training path: ``encode_example(render_prompt(ctx), render_action(action))``.
Serving path: the request Pi's openai-completions provider sends for the same boundary
(``hpd.harness.wire.to_openai_request``, + the document / thinking flag where the view needs them)
goes over HTTP to ``hpd serve``; the server renders and tokenizes the prompt, then its policy emits the
action's completion ids; we take the server's ``prompt_ids + generated ids`` from its request log.
The response, read the way Pi reads it, must give back the action (ids aside). The real Node Pi version
of this check (with a real model generating) is in test_pi_serve.py.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from hpd.harness import wire
from hpd.policy import chat
from hpd.serve.app import create_app
from policy_helpers import ScriptedPolicy, sample_boundaries


def _no_ids(blocks):
    return [{k: v for k, v in b.items() if k != "id"} for b in blocks]


@pytest.mark.parametrize("case", sample_boundaries(), ids=lambda c: c["name"])
def test_training_ids_equal_serving_ids(tok, case):
    th = bool(case.get("thinking"))
    prompt = chat.render_prompt(tok, case["ctx"], document=case.get("document"), enable_thinking=th)
    completion = chat.render_action(tok, case["action"], enable_thinking=th)
    train_p, train_c = chat.encode_example(tok, prompt, completion)

    policy = ScriptedPolicy(tok, [completion])
    client = TestClient(create_app(policy))
    body = wire.to_openai_request(case["ctx"], "hpd", stream=False)
    if case.get("document") is not None:
        body["messages"] = chat.inject_document(body["messages"], case["document"])
    if th:
        body["chat_template_kwargs"] = {"enable_thinking": True}
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    [logged] = list(client.app.state.requests)
    assert logged["prompt_ids"] == train_p
    assert logged["prompt_ids"] + logged["completion_ids"][0] == train_p + train_c

    back = wire.from_chat_completion(r.json())
    want = case["action"]["content"] if th else [b for b in case["action"]["content"] if b["type"] != "thinking"]
    want = [{**b, "arguments": chat.js_json(b["arguments"])} if b["type"] == "toolCall" else b for b in want]
    assert _no_ids(back["content"]) == _no_ids(want)


def test_next_boundary_after_served_reply_matches(tok):
    """Multi-turn: the context Pi builds from the served reply renders to the same prompt as the
    Python-side context with the original action (ids and number formatting do not leak into tokens)."""
    case = sample_boundaries()[0]
    completion = chat.render_action(tok, case["action"])
    client = TestClient(create_app(ScriptedPolicy(tok, [completion])))
    r = client.post("/v1/chat/completions", json=wire.to_openai_request(case["ctx"], "hpd", stream=False))
    served = wire.from_chat_completion(r.json())
    results = [{"role": "toolResult", "toolCallId": b["id"], "toolName": b["name"],
                "content": [{"type": "text", "text": "ok"}], "details": {}, "isError": False, "timestamp": 0}
               for b in served["content"] if b["type"] == "toolCall"]
    orig_results = [{**x, "toolCallId": b["id"]} for x, b in
                    zip(results, [b for b in case["action"]["content"] if b["type"] == "toolCall"])]
    ctx_served = {**case["ctx"], "messages": case["ctx"]["messages"] + [served] + results}
    ctx_train = {**case["ctx"], "messages": case["ctx"]["messages"] + [case["action"]] + orig_results}
    assert chat.render_prompt(tok, ctx_served) == chat.render_prompt(tok, ctx_train)
