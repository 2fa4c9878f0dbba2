"""SmolLM2-135M-Instruct as a model, not just a tokenizer: plain transformers answers the France question,
the hf backend generates with it (stop tokens, context window, grouped decode attention; greedy tokens
identical batched and one prompt at a time), and ``hpd serve --model`` answers chat completions.

The folder is the session fixture ``smollm2_dir`` (tests/conftest.py, built once, ~30 s). Slow: a model
load and a few hundred-token prefills per test on a 2-core CPU.

Measured fact, recorded here on purpose: with ``enable_thinking=False`` the Qwen3 template (hpd's
protocol, rendered for every model) ends the generation prompt with an empty ``<think>\\n\\n</think>\\n\\n``
block. The base SmolLM2 never saw that block, and on the France question it then answers
``'\\nThe answer is "french"'`` instead of ``'The capital of France is Paris.'`` (greedy, this build). hpd
renders with thinking off by default (``hpd eval``, ``hpd serve``, the demo), so the untrained Base model
is evaluated with that block in every prompt; trained variants see it in their training prompts too.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]

FRANCE = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
EMPTY_THINK = "<think>\n\n</think>\n\n"


def _greedy(model, tok, prompt: str, n: int = 16) -> str:
    import torch

    ids = tok(prompt, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=n, do_sample=False)
    return tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)


def test_plain_transformers_answers_paris(smollm2_dir, record_property):
    """AutoTokenizer + AutoModelForCausalLM, ``apply_chat_template(..., add_generation_prompt=True)`` with no
    ``enable_thinking`` (a plain ChatML generation prompt): the greedy answer names Paris. With
    ``enable_thinking=False`` the prompt differs by exactly the empty think block (see module doc for
    what the base model then says; recorded as a property, not asserted)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir).eval()
    plain = tok.apply_chat_template(FRANCE, add_generation_prompt=True, tokenize=False)
    assert plain.endswith("<|im_start|>assistant\n")
    answer = _greedy(model, tok, plain)
    assert "Paris" in answer, answer
    off = tok.apply_chat_template(FRANCE, add_generation_prompt=True, tokenize=False, enable_thinking=False)
    assert off == plain + EMPTY_THINK
    record_property("answer_plain", answer)
    record_property("answer_enable_thinking_false", _greedy(model, tok, off))


@pytest.fixture(scope="module")
def policy(smollm2_dir):
    from hpd.policy.backends.hf import HFPolicy

    return HFPolicy(str(smollm2_dir), batch_size=8, dtype="float32")   # exact tokens against the fp32 sdpa path


def _prompts(tok):
    """Three real agent prompts of different lengths (built-in benchmark, 2 tools each) + the France one."""
    from hpd.bench.builtin import generate
    from hpd.bench.loader import load_bench
    from hpd.eval.rollout import start_episode
    from hpd.policy import chat
    import tempfile

    with tempfile.TemporaryDirectory() as td:
        bench = load_bench(generate(os.path.join(td, "b"), seed=0, n_per_domain=1))
        ctxs = [start_episode(t, bench, env_kwargs={"k": 2}).harness.context() for t in bench.tasks[:3]]
    france = tok.apply_chat_template(FRANCE, add_generation_prompt=True, tokenize=False)
    return [chat.render_prompt(tok, c) for c in ctxs] + [france]


def test_hf_backend_generates_with_smollm2(smollm2_dir, policy):
    """The backend reads SmolLM2's stop tokens (``<|im_end|>`` 2 and ``<|endoftext|>`` 0, which is also its
    unk and pad token), its 8192-token window and its cache size; greedy tokens are the same batched, one
    prompt at a time, and with transformers' own sdpa decode attention; the France prompt stops on
    ``<|im_end|>`` with Paris in the text."""
    from transformers import AutoModelForCausalLM

    from hpd.policy.backends.hf import HFPolicy

    tok = policy.tokenizer
    assert policy.stop_ids == [2, 0] and policy.pad_id == 0 and tok.unk_token_id == 0
    assert policy.context_window == 8192 and policy.decode_attention == "grouped"
    assert policy.cache_bytes_per_token == 30 * 2 * 3 * 64 * 4      # layers x (k, v) x kv heads x head dim x fp32
    prompts = _prompts(tok)
    lens = [len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts]
    assert len(set(lens)) == len(lens)
    batched = policy.generate(prompts, temperature=0.0, max_new_tokens=12, logprobs=True)
    alone = [policy.generate([p], temperature=0.0, max_new_tokens=12, logprobs=True)[0] for p in prompts]
    sdpa = HFPolicy(str(smollm2_dir), model=AutoModelForCausalLM.from_pretrained(smollm2_dir), tokenizer=tok,
                    decode_attention="sdpa")
    plain = sdpa.generate(prompts, temperature=0.0, max_new_tokens=12, logprobs=True)
    for b, a, s in zip(batched, alone, plain):
        assert b[0].token_ids == a[0].token_ids == s[0].token_ids
        assert max(abs(x - y) for x, y in zip(b[0].logprobs, a[0].logprobs)) < 1e-3
    france = batched[-1][0]
    assert "Paris" in france.text and france.finish_reason == "stop" and france.token_ids[-1] == 2
    # sampled candidates of a prompt do not depend on the rest of the batch
    s2 = policy.generate(prompts[1:3], n=2, temperature=1.0, max_new_tokens=8, seed=[7, 8])
    s1 = policy.generate(prompts[2:3], n=2, temperature=1.0, max_new_tokens=8, seed=[8])
    assert [g.token_ids for g in s2[1]] == [g.token_ids for g in s1[0]]


def test_prompt_over_the_context_window_is_an_error(policy):
    """A prompt longer than SmolLM2's 8192 positions is refused without running the model: a one-line
    error generation, and a Pi ``error`` message from ``act`` (the episode ends as it would with vLLM)."""
    long_prompt = "<|im_start|>user\n" + "alpha " * 8300 + "<|im_end|>\n<|im_start|>assistant\n"
    t0 = time.perf_counter()
    [[g]] = policy.generate([long_prompt], temperature=0.0, max_new_tokens=4)
    assert time.perf_counter() - t0 < 10      # refused, not prefilled
    assert g.finish_reason == "error" and "context window is 8192" in g.error and "\n" not in g.error
    ctx = {"systemPrompt": "", "tools": [], "messages": [
        {"role": "user", "content": [{"type": "text", "text": "alpha " * 8300}], "timestamp": 0}]}
    [[cand]] = policy.act([ctx], temperature=0.0, max_new_tokens=4)
    assert cand.message["stopReason"] == "error" and "8192" in cand.message["errorMessage"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_hpd_serve_answers_chat_completions(smollm2_dir):
    """``hpd serve --model <SmolLM2>`` (a real subprocess): a chat completion with a tool list comes back
    in OpenAI's shape; with thinking on (no empty think block in the prompt) the France question is
    answered with Paris; a request over the context window is a 400 with a one-line message."""
    import httpx

    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.Popen([sys.executable, "-c", "from hpd.cli import main; main()", "serve", "--model",
                             str(smollm2_dir), "--port", str(port), "--max-tokens", "32", "--backend", "hf"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"hpd serve exited with {proc.returncode}: {proc.stdout.read()[-2000:]}")
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline:
                pytest.fail("hpd serve did not come up in 180 s")
            time.sleep(1)
        tools = [{"type": "function", "function": {"name": "get_capital", "description": "Capital city of a country.",
                                                   "parameters": {"type": "object", "properties": {
                                                       "country": {"type": "string"}}, "required": ["country"]}}}]
        r = httpx.post(f"{base}/v1/chat/completions", timeout=300, json={
            "model": "hpd", "messages": FRANCE, "tools": tools, "max_tokens": 24, "temperature": 0})
        assert r.status_code == 200, r.text
        data = r.json()
        [choice] = data["choices"]
        assert choice["finish_reason"] in ("stop", "length", "tool_calls")
        msg = choice["message"]
        assert msg["role"] == "assistant" and (msg["content"] or msg.get("tool_calls"))
        assert data["usage"]["prompt_tokens"] > 50 and 0 < data["usage"]["completion_tokens"] <= 24
        r = httpx.post(f"{base}/v1/chat/completions", timeout=300, json={
            "messages": FRANCE, "max_tokens": 16, "temperature": 0, "chat_template_kwargs": {"enable_thinking": True}})
        assert r.status_code == 200, r.text
        assert "Paris" in (r.json()["choices"][0]["message"]["content"] or ""), r.text
        r = httpx.post(f"{base}/v1/chat/completions", timeout=60, json={
            "messages": [{"role": "user", "content": "alpha " * 8300}], "max_tokens": 4})
        assert r.status_code == 400 and "context window is 8192" in r.json()["error"]["message"]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
