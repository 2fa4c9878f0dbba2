"""Every command that takes a model runs with the real SmolLM2-135M-Instruct folder (issue 12, item 5):
``hpd eval --model`` (built-in benchmark and TRAJECT-Bench), ``hpd train`` with ``model.path`` (LoRA),
``hpd teach --teacher hf --model`` and ``hpd demo --model DIR`` (``hpd serve`` is in
tests/policy/test_smollm2_model.py). Sizes are tiny (a few tasks, a few new tokens, 1-3 updates), so
each test checks that the command finishes and writes what it promises, not what the model learns.

The folder is the session fixture ``smollm2_dir`` (tests/conftest.py, built once). The commands run in
process (``CliRunner``) with one torch thread: on this shared 2-core machine two threads were 2-4x
slower under load (OpenMP threads waiting for each other). Slow: model loads and prefills.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from hpd.cli import app

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]

METRICS = ("TS", "F1", "Step-SR", "RC", "Exact", "Action-Acc", "n_tasks", "n_boundaries")
REPO = Path(__file__).resolve().parents[2]


def _traject_dir() -> Path | None:
    """TRAJECT-Bench public_data: HPD_TRAJECT_DIR, else ../shared/traject-bench/public_data (None: absent)."""
    env = os.environ.get("HPD_TRAJECT_DIR")
    d = Path(env) if env else REPO.parent / "shared" / "traject-bench" / "public_data"
    return d if d.is_dir() else None


@pytest.fixture(scope="module")
def builtin(tmp_path_factory) -> Path:
    from hpd.bench.builtin import generate

    return generate(tmp_path_factory.mktemp("builtin") / "data", seed=0, n_per_domain=2)


def _invoke(args: list[str]):
    r = CliRunner().invoke(app, [str(a) for a in args])
    assert r.exit_code == 0, r.output[-3000:]
    assert "Traceback" not in r.output
    return r


def _metrics(out: Path, n_tasks: int) -> dict:
    m = json.loads((out / "metrics.json").read_text())
    for k in METRICS:
        assert k in m, k
    for k in METRICS[:6]:
        assert 0.0 <= m[k] <= 1.0, (k, m[k])
    assert m["n_tasks"] == n_tasks and m["n_boundaries"] >= n_tasks
    return m


def test_eval_builtin_and_traject(smollm2_dir, builtin, tmp_path):
    """``hpd eval --model <SmolLM2>`` on 2 built-in tasks and 1 TRAJECT-Bench task (2 tools shown, 1 turn,
    8 new tokens): metrics.json with the standard keys, rollouts that really ran the model."""
    common = ["--model", smollm2_dir, "--pool-k", 2, "--max-turns", 1, "--max-new-tokens", 8, "--backend", "hf"]
    out = tmp_path / "builtin"
    _invoke(["eval", "--data", builtin, "--limit", 2, "--out", out, *common])
    m = _metrics(out, 2)
    assert m["rollout"]["policy_stats"]["generations"] == 2 and m["rollout"]["policy_stats"]["generated_tokens"] > 0
    man = json.loads((out / "manifest.json").read_text())
    assert man["inputs"]["model"]["path"] == str(smollm2_dir)
    traject = _traject_dir()
    if traject is None:
        reason = "TRAJECT-Bench data not found (set HPD_TRAJECT_DIR); the built-in half of this test ran"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set: a missing prerequisite is a failure)", pytrace=False)
        pytest.skip(reason)
    out = tmp_path / "traject"
    _invoke(["eval", "--data", traject, "--limit", 1, "--out", out, *common])
    _metrics(out, 1)


def test_train_lora_on_smollm2(smollm2_dir, tmp_path):
    """``hpd train`` with ``model.path=<SmolLM2>``: 2 LoRA updates on T-view rows write an adapter on all
    of Llama's linear layers (q/k/v/o, gate/up/down), trained (lora_B no longer zero), that the hf
    backend loads on top of the base model."""
    from safetensors.torch import load_file

    from hpd.policy.backends.hf import HFPolicy

    cfg = {"name": "smollm2-lora", "seed": 0,
           "model": {"path": str(smollm2_dir), "precision": "fp32", "attn_implementation": "sdpa"},
           "lora": {"r": 8, "alpha": 16, "dropout": 0.0},
           "optim": {"lr": 1e-3},
           "batch": {"global_batch": 2, "micro_batch_tokens": 4096},
           "data": {"synthetic_tasks": 2, "max_length": 2048, "target": "reference"},
           "schedule": {"phases": [{"views": {"T": 1}, "updates": 2}]},
           "checkpoint": {"every": 2},
           "logging": {"probe_examples": 0, "progress": False, "tensorboard": False}}
    path = tmp_path / "smollm2.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "run"
    r = _invoke(["train", "--config", path, "--out", out])
    assert f"adapter: {out / 'adapter'}" in r.output
    ac = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert ac["base_model_name_or_path"] == str(smollm2_dir) and ac["r"] == 8
    assert set(ac["target_modules"]) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    weights = load_file(out / "adapter" / "adapter_model.safetensors")
    lora_b = [v for k, v in weights.items() if "lora_B" in k]
    assert len(lora_b) == 30 * 7 and any(float(v.abs().max()) > 0 for v in lora_b)
    m = json.loads((out / "metrics.json").read_text())
    assert m["updates"] == 2 and m["updates_per_view"] == {"T": 2} and math.isfinite(m["final_loss"]["T"])
    p = HFPolicy(str(smollm2_dir), adapter=str(out / "adapter"))
    [[g]] = p.generate(["<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"], temperature=0.0, max_new_tokens=4)
    assert type(p.model).__name__.startswith("Peft") and g.token_ids


def test_teach_with_smollm2_teacher(smollm2_dir, builtin, tmp_path):
    """``hpd teach --teacher hf --model <SmolLM2>`` on 3 boundaries of one built-in task: K=2 proposals each
    from the real model, verified in the harness, one target (teacher or flagged fallback) per boundary."""
    from hpd.boundary import ReplayConfig, run_replay

    rep = tmp_path / "replay"
    run_replay(builtin, rep, ReplayConfig(pool_k=2), limit=1, tokenizer_path=str(smollm2_dir))
    out = tmp_path / "teach"
    _invoke(["teach", "--boundaries", rep, "--out", out, "--teacher", "hf", "--model", smollm2_dir, "-K", 2,
             "--attempts", 1, "--max-new-tokens", 16, "--privilege", "oracle", "--limit", 3])
    d = json.loads((out / "diagnostics.json").read_text())
    n = d["n_boundaries"]
    assert 1 <= n <= 3
    rows = [json.loads(x) for x in (out / "targets.jsonl").read_text().splitlines()]
    assert len(rows) == n
    man = json.loads((out / "manifest.json").read_text())
    assert man["model"] == str(smollm2_dir) and man["sampling"]["temperature"] == 1.0


def test_demo_with_smollm2_folder(smollm2_dir, tmp_path):
    """``hpd demo --model <SmolLM2 folder>`` at tiny sizes: the whole pipeline runs with the paper's teacher
    procedure (the real model proposes; base-doc and i-warm are both probed and the one with the higher
    first-attempt acceptance teaches), trains LoRA adapters on the folder (used in place, nothing copied),
    and evaluates all four variants."""
    out = tmp_path / "demo"
    _invoke(["demo", "--model", smollm2_dir, "--out", out, "--n-per-domain", 6, "--train-limit", 2,
             "--test-limit", 1, "--updates", 1, "--global-batch", 1, "--max-new-tokens", 4, "--max-turns", 1,
             "--probe-examples", 0])
    res = json.loads((out / "results.json").read_text())
    assert list(res["variants"]) == ["Base", "SFT", "HPD-T", "HPD"]
    for v, m in res["variants"].items():
        assert m["n_tasks"] == 1 and m["n_boundaries"] >= 1, v
    assert res["config"]["model"] == str(smollm2_dir) and res["config"]["full_finetune"] is False
    from hpd.demo import MODEL_DEFAULTS

    assert res["config"]["lr"] == MODEL_DEFAULTS["real"]["lr"] and res["config"]["lora_r"] == 16
    assert res["config"]["teach_k"] == 2
    assert res["config"]["teach_attempts"] == 5 and res["config"]["teach_temperature"] == 1.0
    choice = res["teacher_choice"]
    assert set(choice["candidates"]) == {"base-doc", "i-warm"} and choice["chosen"] in choice["candidates"]
    for c in choice["candidates"].values():
        assert 0.0 <= c["first_attempt_acceptance"] <= 1.0 and c["n_boundaries"] >= 1
    assert res["teacher"]["teacher"] == choice["chosen"] and res["model"]["arg"] == str(smollm2_dir)
    assert (out / "train" / "teacher-warm" / "adapter" / "adapter_config.json").is_file()
    for name in ("sft", "hpd-t", "hpd", "teacher-warm"):
        ac = json.loads((out / "train" / name / "adapter" / "adapter_config.json").read_text())
        assert ac["base_model_name_or_path"] == str(smollm2_dir)
    assert not (out / "base").exists()
    man = json.loads((out / "manifest.json").read_text())
    assert man["status"] == "complete" and man["teacher"] == choice["chosen"] and man["model"]["path"] == str(smollm2_dir)
    ev = json.loads((out / "eval" / "sft" / "metrics.json").read_text())
    assert ev["rollout"]["policy_stats"]["generations"] >= 1


def test_demo_model_choices_and_bad_input(smollm2_dir, tmp_path, monkeypatch):
    """``--model smollm2`` builds SmolLM2 into <out>/base (the build itself is the session fixture's; here it
    is stood in by a copy of it) and records it; a run folder holding another base model is refused; bad
    ``--model``/``--size`` values are one-line errors."""
    import shutil

    import hpd.policy.smollm2 as sm
    from hpd.demo import MODEL_DEFAULTS, Demo, config_for_model

    calls = []

    def fake_build(d):
        calls.append(d)
        shutil.copytree(smollm2_dir, d, dirs_exist_ok=True)
        return Path(d)

    monkeypatch.setattr(sm, "build_smollm2", fake_build)
    cfg = config_for_model("smollm2", out=tmp_path / "run")
    real = MODEL_DEFAULTS["real"]
    assert (cfg.full_finetune, cfg.updates, cfg.lr, cfg.teacher) == (False, real["updates"], real["lr"], "auto")
    assert (cfg.teach_k, cfg.teach_attempts, cfg.teach_temperature) == (2, 5, 1.0)        # the paper's teacher
    assert config_for_model("tiny").updates == MODEL_DEFAULTS["tiny"]["updates"] == 500
    assert config_for_model("tiny", updates=7, lr=None).updates == 7
    base = Demo(cfg, log=lambda s: None).base(tmp_path)
    assert base == tmp_path / "run" / "base" and (base / "config.json").is_file() and len(calls) == 1
    done = json.loads((base / "done.json").read_text())
    assert done["model"] == "smollm2" and done["gguf_sha256"]
    Demo(cfg, log=lambda s: None).base(tmp_path)          # resumed: not built again
    assert len(calls) == 1
    with pytest.raises(ValueError, match="holds the smollm2 base model"):
        Demo(config_for_model("tiny", out=tmp_path / "run"), log=lambda s: None).base(tmp_path)

    for args, needle in ((["--model", tmp_path / "nope"], "no config.json"),
                         (["--model", "smollm2", "--size", "s"], "--size is for --model tiny"),
                         (["--updates", 0], "--updates must be >= 1"),
                         (["--seed", "0,x"], "--seed must be an integer"),
                         (["--defect-rate", "0.12,0.12"], "distinct values"),
                         (["--defect-rate", "0.7"], "--defect-rate values must be in [0, 0.5)"),
                         (["--teacher", "model"], "--teacher must be one of auto, base-doc, i-warm, oracle"),
                         (["--lr-decay", "step"], "--lr-decay must be one of constant, linear, cosine"),
                         (["--warmup", "-1"], "--warmup must be >= 0"),
                         (["--variants", "SFT,DPO"], "DPO is a baseline: add --baselines"),
                         (["--variants", "SFT,PPO", "--baselines"], "subset of Base, SFT, HPD-T, HPD, DPO, GRPO"),
                         (["--variants", "SFT,SFT"], "--variants takes a comma-separated subset"),
                         (["--lanes", "0"], "--lanes must be >= 1"),
                         (["--lanes", "2"], "--lanes runs the cells of a study side by side")):
        r = CliRunner().invoke(app, ["demo", "--out", tmp_path / "bad", *[str(a) for a in args]])
        assert r.exit_code == 2 and needle in r.output and "Traceback" not in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1, r.output
