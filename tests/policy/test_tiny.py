"""Tiny model factory: determinism, layout, loadability, tokenizer recipe, CLI."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from hpd.policy.tiny import build_tiny


def _files(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


def test_same_seed_identical_files_other_seed_other_weights(tiny_dir, tmp_path):
    again = build_tiny(tmp_path / "again", size="xs", seed=0)
    other = build_tiny(tmp_path / "other", size="xs", seed=1)
    a, b, c = _files(tiny_dir), _files(again), _files(other)
    assert set(a) >= {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                      "tokenizer_config.json", "chat_template.jinja", "hpd_tiny.json"}
    assert a == b
    assert a["model.safetensors"] != c["model.safetensors"]
    assert a["tokenizer.json"] == c["tokenizer.json"]  # the tokenizer does not depend on the weight seed


def test_loads_and_recipe(tiny_dir, tok):
    import torch
    from transformers import AutoModelForCausalLM
    from trl.chat_template_utils import qwen3_chat_template

    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    assert type(model).__name__ == "Qwen3ForCausalLM"
    n = sum(p.numel() for p in model.parameters())
    assert 1e5 < n < 5e5
    assert model.config.vocab_size == len(tok)
    assert tok.chat_template == qwen3_chat_template  # TRL's template verbatim
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>" and tok.padding_side == "left"
    for t in ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]:
        assert len(tok(t, add_special_tokens=False)["input_ids"]) == 1
    gen = json.loads((tiny_dir / "generation_config.json").read_text())
    assert not {"do_sample", "temperature", "top_k", "top_p"} & set(gen)
    out = model(torch.tensor([tok("hello world", add_special_tokens=False)["input_ids"]]))
    assert out.logits.shape[-1] == len(tok)


def test_qwen_split_regex_keeps_completion_boundary(tok):
    # with GPT-2's regex "</think>\n\n" + "Item" merges differently jointly vs separately (docs/ml-stack.md sec 2)
    p, c = "<|im_start|>assistant\n<think>\n\n</think>\n\n", "Item 0 is in box 0.<|im_end|>"
    enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    assert enc(p) + enc(c) == enc(p + c)
    assert tok.decode(enc(p + c)) == p + c


@pytest.mark.slow
def test_size_s_and_data_dir(tmp_path, builtin_dir):
    d = build_tiny(tmp_path / "s", size="s", seed=0, data_dir=builtin_dir)
    meta = json.loads((d / "hpd_tiny.json").read_text())["hpd_tiny"]
    assert 3.5e6 < meta["n_params"] < 5e6
    # the BPE vocabulary (4096 + 6 added tokens at most) is learned from the built-in corpus plus the data
    assert 2000 < meta["vocab_total"] <= 4102 and meta["corpus"].startswith("builtin+data")


def test_cli_model_tiny(tmp_path):
    from hpd.cli import app
    from hpd.runfolder import validate_manifest

    r = CliRunner().invoke(app, ["model", "tiny", "--out", str(tmp_path / "m"), "--size", "xs", "--seed", "2"])
    assert r.exit_code == 0, r.output
    info = json.loads([ln for ln in r.output.splitlines() if ln.startswith("{")][-1])
    assert info["size"] == "xs" and info["seed"] == 2
    man = json.loads((tmp_path / "m" / "manifest.json").read_text())
    assert man["command"] == "hpd model tiny" and man["config"]["seed"] == 2 and validate_manifest(man) == []
    bad = CliRunner().invoke(app, ["model", "tiny", "--out", str(tmp_path / "x"), "--size", "xl"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    nodata = CliRunner().invoke(app, ["model", "tiny", "--out", str(tmp_path / "y"), "--data", str(tmp_path / "nope")])
    assert nodata.exit_code == 2
