"""hpd export: the merged model equals base + adapter (logits and greedy tokens), loads in transformers,
hpd serve and hpd eval; the card carries the training recipe and the evaluation table; bad input is one line."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from hpd.export import ExportError, export_model
from hpd.runfolder import read_json, validate_manifest

PROMPTS = ["<|im_start|>user\nLook up alpha.<|im_end|>\n<|im_start|>assistant\n",
           "<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n"]
SECTIONS = ["## Intended use", "## Tool protocol", "## How to run it", "## Training data and recipe",
            "## Evaluation", "## Limitations", "## License"]


@pytest.fixture(scope="module")
def run_dir(tiny_dir, tmp_path_factory):
    """A real ``hpd train`` run folder (adapter + manifest.json) on the tiny model, a few updates."""
    from hpd.train.trainer import train

    cfg = {"name": "export-test", "seed": 0, "model": {"path": str(tiny_dir), "precision": "fp32"},
           "lora": {"r": 4, "alpha": 8, "dropout": 0.0}, "optim": {"lr": 5e-2},
           "batch": {"global_batch": 2, "micro_batch_tokens": 2048}, "data": {"synthetic_tasks": 2, "max_length": 2048},
           "schedule": {"phases": [{"views": {"T": 1}, "updates": 4}]}, "checkpoint": {"every": 100, "keep": 1},
           "logging": {"probe_examples": 0, "progress": False, "tensorboard": False}}
    out = tmp_path_factory.mktemp("train") / "run"
    train(None, cfg, out)
    return out


@pytest.fixture(scope="module")
def exported(tiny_dir, run_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "pi-tiny"
    export_model(tiny_dir, out, adapter=run_dir / "adapter", license="apache-2.0", dtype="float32")   # exact below
    return out


def test_merged_model_equals_base_plus_adapter(tiny_dir, run_dir, exported, one_torch_thread):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hpd.policy.backends.hf import HFPolicy

    names = {p.name for p in exported.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja", "README.md",
            "manifest.json", "adapter"} <= names
    assert (exported / "adapter" / "adapter_config.json").is_file()
    merged = AutoModelForCausalLM.from_pretrained(str(exported)).eval()        # plain transformers loads it
    assert not any("lora" in k for k in merged.state_dict())
    base = AutoModelForCausalLM.from_pretrained(str(tiny_dir)).eval()
    tok = AutoTokenizer.from_pretrained(str(exported))
    ids = tok(PROMPTS[0], return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        plain = base(ids).logits
        lora = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(tiny_dir)), str(run_dir / "adapter"))
        with_adapter = lora.eval()(ids).logits
        out = merged(ids).logits
    assert (with_adapter - plain).abs().max() > 1e-3           # the adapter changes the model
    assert torch.allclose(out, with_adapter, atol=1e-5)       # and the merge keeps exactly that change
    greedy = dict(temperature=0.0, max_new_tokens=24)
    a = HFPolicy(str(exported), dtype="float32").generate(PROMPTS, **greedy)
    b = HFPolicy(str(tiny_dir), adapter=str(run_dir / "adapter"), dtype="float32").generate(PROMPTS, **greedy)
    assert [g[0].token_ids for g in a] == [g[0].token_ids for g in b]
    man = read_json(exported / "manifest.json")
    assert validate_manifest(man) == [] and man["status"] == "complete" and man["merged"] is True
    assert man["dtype"] == "float32"
    assert man["inputs"]["adapter"]["sha256"] and "README.md" in man["outputs"]


def _front_matter(card: str) -> dict:
    lines = card.splitlines()
    assert lines[0] == "---"
    end = lines.index("---", 1)
    return {k: json.loads(v) if v.strip()[:1] in "\"[{" else v.strip()
            for k, v in (ln.split(": ", 1) for ln in lines[1:end])}


def test_card_has_recipe_metrics_and_sections(tiny_dir, run_dir, tmp_path):
    ev = tmp_path / "eval"
    ev.mkdir()
    metrics = {"TS": 0.25, "F1": 0.5, "Step-SR": 0.4, "RC": 0.6, "Exact": 0.125, "Action-Acc": None,
               "n_tasks": 8, "n_boundaries": None, "split": "test"}
    (ev / "metrics.json").write_text(json.dumps(metrics))
    out = tmp_path / "card-export"
    export_model(tiny_dir, out, adapter=run_dir / "adapter", eval_dir=ev, name="Pi-Tiny")
    card = (out / "README.md").read_text()
    fm = _front_matter(card)
    assert fm["license"] == "other" and fm["base_model"] == tiny_dir.name and fm["library_name"] == "transformers"
    [entry] = fm["model-index"]
    got = {m["type"]: m["value"] for m in entry["results"][0]["metrics"]}
    assert entry["name"] == "Pi-Tiny" and got == {"TS": 0.25, "F1": 0.5, "Step-SR": 0.4, "RC": 0.6, "Exact": 0.125}
    assert all(s in card for s in SECTIONS)
    assert "| TS | F1 | Step-SR | RC | Exact | Action-Acc |" in card and "| 0.250 | 0.500 | 0.400 | 0.600 | 0.125 | n/a |" in card
    train_man = read_json(run_dir / "manifest.json")
    assert train_man["inputs"]["records"]["sha256"][:16] in card          # the training data, by checksum
    assert '"r": 4, "alpha": 8' in card and '"lr": 0.05' in card         # the recipe, from the manifest
    assert "<tool_call>" in card and "hpd serve --model card-export --name Pi-Tiny" in card


def test_card_without_manifest_or_adapter_says_so(tiny_dir, run_dir, tmp_path):
    import shutil

    lone = tmp_path / "lone" / "adapter"
    shutil.copytree(run_dir / "adapter", lone)
    export_model(tiny_dir, tmp_path / "a", adapter=lone)
    assert "No training manifest" in (tmp_path / "a" / "README.md").read_text()
    export_model(tiny_dir, tmp_path / "b")
    card = (tmp_path / "b" / "README.md").read_text()
    assert "No adapter was exported" in card and "Not evaluated here" in card and not (tmp_path / "b" / "adapter").exists()
    assert read_json(tmp_path / "b" / "manifest.json")["merged"] is False


def test_bad_inputs_are_one_line(tiny_dir, run_dir, tmp_path):
    from hpd.cli import app

    ev = tmp_path / "ev"
    ev.mkdir()
    cases = [(["--model", str(tmp_path)], "no config.json"),
             (["--model", str(tiny_dir), "--adapter", str(tmp_path)], "no adapter_config.json"),
             (["--model", str(tiny_dir), "--eval", str(ev)], "has no metrics.json")]
    for args, words in cases:
        r = CliRunner().invoke(app, ["export", *args, "--out", str(tmp_path / "o")])
        assert r.exit_code == 2 and words in r.output and "Traceback" not in r.output, r.output
    (ev / "metrics.json").write_text(json.dumps({"TS": 1.5, "n_tasks": 2}))
    with pytest.raises(ExportError, match=r"metrics.json: 'TS' is 1.5, not a fraction"):
        export_model(tiny_dir, tmp_path / "o2", eval_dir=ev)
    with pytest.raises(ExportError, match="is an input folder"):
        export_model(tiny_dir, tiny_dir)


@pytest.mark.slow
def test_export_serves_and_evaluates(exported, builtin_dir, tmp_path, one_torch_thread):
    """hpd serve answers from the export; hpd eval --model evaluates it; its metrics.json feeds the card."""
    from hpd.cli import app
    from hpd.policy.backends.hf import HFPolicy
    from hpd.serve.app import BackgroundServer

    with BackgroundServer(HFPolicy(str(exported)), model_name="pi-tiny") as srv:
        r = httpx.post(f"{srv.base_url}/chat/completions", timeout=120, json={
            "model": "pi-tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "temperature": 0})
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["role"] == "assistant"
        assert httpx.get(f"{srv.base_url}/models").json()["data"][0]["id"] == "pi-tiny"
    ev = tmp_path / "eval"
    r = CliRunner().invoke(app, ["eval", "--model", str(exported), "--data", str(builtin_dir), "--limit", "2",
                                 "--max-new-tokens", "16", "--max-turns", "2", "--out", str(ev), "--backend", "hf"])
    assert r.exit_code == 0, r.output
    metrics = read_json(ev / "metrics.json")
    out = tmp_path / "with-eval"
    r = CliRunner().invoke(app, ["export", "--model", str(exported), "--eval", str(ev), "--out", str(out)])
    assert r.exit_code == 0, r.output
    card = (out / "README.md").read_text()
    assert f"| {metrics['TS']:.3f} |" in card and f"{metrics['n_tasks']} tasks" in card


def test_export_dtype_is_the_saved_weights_dtype(tiny_dir, run_dir, tmp_path, monkeypatch):
    """``--dtype`` (auto by default: hpd.policy.dtype, bfloat16 on a CPU with AVX512-BF16/AMX-BF16) is the dtype
    the merged weights are saved in (the merge runs in float32); the manifest records it."""
    import torch
    from transformers import AutoModelForCausalLM

    import hpd.policy.dtype as D

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(D, "cpu_has_bf16", lambda: True)
    man = export_model(tiny_dir, tmp_path / "auto", adapter=run_dir / "adapter")
    assert man["dtype"] == "bfloat16"
    m = AutoModelForCausalLM.from_pretrained(str(tmp_path / "auto"), dtype="auto")
    assert {p.dtype for p in m.parameters()} == {torch.bfloat16}
    f32 = AutoModelForCausalLM.from_pretrained(str(tmp_path / "auto"), dtype=torch.float32)
    ref = export_model(tiny_dir, tmp_path / "f32", adapter=run_dir / "adapter", dtype="fp32")
    assert ref["dtype"] == "float32"
    exact = AutoModelForCausalLM.from_pretrained(str(tmp_path / "f32"), dtype="auto")
    w, w32 = f32.state_dict(), exact.state_dict()
    assert all(torch.equal(w[k], w32[k].bfloat16().float()) for k in w32)     # the fp32 merge, rounded once
    monkeypatch.setattr(D, "cpu_has_bf16", lambda: False)
    assert export_model(tiny_dir, tmp_path / "plain")["dtype"] == "float32"
    with pytest.raises(ExportError, match="unknown dtype 'int8'"):
        export_model(tiny_dir, tmp_path / "bad", dtype="int8")
