"""hpd.demo_engine: the demo's generators. The hf path needs no engine; the vLLM path (slow: engine starts) merges a
LoRA adapter into SmolLM2's weights on the CPU platform and generates what transformers + PEFT generate with the
adapter (fp32, greedy), reuses the engine for the same folder and the merged folder across instances."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpd.demo_engine import Engines, model_and_adapter

QUESTIONS = ["What is the capital of France?", "List three prime numbers.", "What is 12 times 7?",
             "Suggest a name for a dog."]


def test_model_and_adapter(tmp_path):
    (tmp_path / "sft" / "adapter").mkdir(parents=True)
    (tmp_path / "sft" / "adapter" / "adapter_config.json").write_text("{}")
    (tmp_path / "full" / "model").mkdir(parents=True)
    assert model_and_adapter(tmp_path / "base", None) == (str(tmp_path / "base"), None)
    assert model_and_adapter(tmp_path / "base", tmp_path / "sft" / "adapter") == (
        str(tmp_path / "base"), str(tmp_path / "sft" / "adapter"))
    assert model_and_adapter(tmp_path / "base", tmp_path / "full" / "model") == (str(tmp_path / "full" / "model"), None)


@pytest.fixture(scope="module")
def adapter(smollm2_dir, tmp_path_factory, one_torch_thread):
    """A random rank-8 LoRA adapter (B not zero, so it changes the model), in ``<tmp>/sft/adapter``."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(smollm2_dir), dtype=torch.float32)
    cfg = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, init_lora_weights=False,
                     target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    out = tmp_path_factory.mktemp("cell") / "sft" / "adapter"
    get_peft_model(model, cfg).save_pretrained(str(out))
    return out


def _greedy(policy, prompts):
    return [r[0].token_ids for r in policy.generate(prompts, temperature=0.0, max_new_tokens=24)]


@pytest.mark.slow
def test_vllm_runs_the_merged_adapter(smollm2_dir, adapter, tmp_path):
    from hpd.policy.backends.hf import HFPolicy

    engines = Engines("vllm", "float32", seed=0, merged=tmp_path / "merged", threads=1, log=lambda s: None)
    try:
        tuned = engines.generator(Path(smollm2_dir), adapter)
        assert tuned._lora is None and tuned.model_dir == str(tmp_path / "merged" / "sft")
        assert (tmp_path / "merged" / "sft" / "model.safetensors").is_file()
        prompts = [tuned.tokenizer.apply_chat_template([{"role": "user", "content": q}], tokenize=False,
                                                       add_generation_prompt=True) for q in QUESTIONS]
        mine = _greedy(tuned, prompts)
        assert engines.generator(Path(smollm2_dir), adapter).llm is tuned.llm     # same folder: same engine
        ref = _greedy(HFPolicy(str(smollm2_dir), adapter=str(adapter), dtype="float32", prefix_cache_gib=None),
                      prompts)
        # fp32: the merge rounds W + BA once; measured 4 of 4 identical (3 of 4 is the bar)
        assert sum(a == b for a, b in zip(mine, ref)) >= 3
        base = engines.generator(Path(smollm2_dir), None)                         # another folder: a new engine
        assert base.model_dir == str(smollm2_dir) and base.llm is not tuned.llm
        assert sum(a != b for a, b in zip(_greedy(base, prompts), mine)) >= 2
    finally:
        engines.close()
    again = Engines("vllm", "float32", seed=0, merged=tmp_path / "merged", threads=1, log=print)
    stamp = (tmp_path / "merged" / "sft" / "model.safetensors").stat().st_mtime_ns
    from hpd.demo_engine import merged_folder

    assert merged_folder(again.merged, str(smollm2_dir), str(adapter), "float32") == tmp_path / "merged" / "sft"
    assert (tmp_path / "merged" / "sft" / "model.safetensors").stat().st_mtime_ns == stamp     # reused, not rebuilt


@pytest.mark.parametrize("model,asked,vllm_ok,expected", [
    ("smollm2", "auto", True, "vllm"), ("smollm2", "auto", False, "hf"), ("tiny", "auto", True, "hf"),
    ("smollm2", "hf", True, "hf"), ("tiny", "vllm", False, "vllm"), ("/some/model", "auto", True, "vllm")])
def test_auto_backend(monkeypatch, model, asked, vllm_ok, expected):
    """auto = vLLM for a real model where it runs, else the hf backend; the tiny model stays on hf; an explicit
    choice is kept (a missing vLLM then fails when the engine starts, with its one-line reason)."""
    import hpd.policy.backends.vllm as vb
    from hpd.demo import DemoConfig, resolve_backend

    monkeypatch.setattr(vb, "vllm_available", lambda: (vllm_ok, "mocked"))
    assert resolve_backend(DemoConfig(model=model, backend=asked)) == expected
    with pytest.raises(ValueError, match="unknown backend"):
        resolve_backend(DemoConfig(model=model, backend="tgi"))


def test_the_engine_stops_however_the_run_ends(tmp_path, monkeypatch):
    """Demo.run closes the cell's engines on an error (and on Ctrl-C, which `hpd demo` makes of SIGTERM): a killed
    demo once left vLLM's EngineCore and Worker running, orphaned, for an hour."""
    import signal

    from hpd.cli.demo import sigterm_as_interrupt
    from hpd.demo import Demo, DemoConfig

    demo = Demo(DemoConfig(out=tmp_path / "d", model="tiny"), log=lambda s: None)
    closed = []
    monkeypatch.setattr(demo, "close_engine", lambda: closed.append(True))

    def boom():
        raise KeyboardInterrupt

    monkeypatch.setattr(demo, "_run", boom)
    with pytest.raises(KeyboardInterrupt):
        demo.run()
    assert closed == [True]
    before = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(KeyboardInterrupt):
            sigterm_as_interrupt(signal.SIGTERM, None)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN     # a second SIGTERM cannot cut the cleanup
    finally:   # this process's children inherit an ignored SIGTERM, and a bash child cannot trap it
        signal.signal(signal.SIGTERM, before)


def test_sigterm_is_an_interrupt(tmp_path):
    """A SIGTERMed `hpd demo` ends as Ctrl-C does: exit 130 and the resume line, not a silent death, and a second
    SIGTERM during its cleanup adds no traceback."""
    import os
    import signal
    import subprocess
    import sys
    import time

    hpd = Path(sys.executable).with_name("hpd")
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    p = subprocess.Popen([str(hpd), "demo", "--model", "tiny", "--out", str(tmp_path / "d")], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first = [p.stdout.readline() for _ in range(2)]          # the demo has started its stages (handler installed)
    assert p.poll() is None, first
    p.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)       # a second kill during the cleanup (pkill matching twice): no traceback
    out, _ = p.communicate(timeout=120)
    out = "".join(first) + out
    assert p.returncode == 130, out[-2000:]
    assert "interrupted; rerun the same command to resume from" in out and "Traceback" not in out, out[-2000:]
