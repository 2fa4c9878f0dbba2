"""Evaluable checkpoints (issue 17): every checkpoint holds a loadable adapter that IS the checkpoint's
weights, `keep` spares `checkpoint.eval_steps`, `hpd eval --adapter` takes a mid-training checkpoint, and the
in-training native evaluation (`evaluation.steps`) writes TS/F1 into curves.json without changing training."""

import json
from pathlib import Path

import torch
from typer.testing import CliRunner

from hpd.cli import app
from hpd.train.logger import read_csv
from hpd.train.trainer import train
from hpd.views import synthetic_records


def _cfg(tiny_dir, **sections):
    cfg = {"name": "ck", "seed": 0, "model": {"path": str(tiny_dir), "precision": "fp32"},
           "lora": {"r": 4, "alpha": 8, "dropout": 0.0}, "optim": {"lr": 3e-3},
           "batch": {"global_batch": 4, "micro_batch_tokens": 2048}, "data": {"max_length": 2048},
           "schedule": {"phases": [{"views": {"T": 1, "I": 1, "R": 1}, "updates": 6}]},
           "checkpoint": {"every": 2, "keep": 1},
           "logging": {"probe_examples": 0, "progress": False, "tensorboard": False}}
    cfg.update(sections)
    return cfg


def test_checkpoints_hold_their_adapter_and_eval_steps_survive_keep(tiny_dir, builtin_dir, tmp_path):
    out = tmp_path / "run"
    train(synthetic_records(6, seed=0), _cfg(tiny_dir, checkpoint={"every": 2, "keep": 1, "eval_steps": [2]}), out)
    ck = out / "checkpoints"
    # keep 1 deletes update 4, but update 2 is listed in eval_steps; update 6 is the newest
    assert sorted(p.name for p in ck.iterdir()) == ["update-00000002", "update-00000006"]
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    for name in ("update-00000002", "update-00000006"):
        adapter = ck / name / "adapter"
        assert (adapter / "adapter_config.json").is_file() and (adapter / "tokenizer.json").is_file()
        saved = torch.load(ck / name / "trainable.pt")
        m = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(tiny_dir)), str(adapter))
        params = dict(m.named_parameters())
        lora = {n: t for n, t in saved.items() if "lora_" in n}
        assert lora and all(torch.equal(params[n], t) for n, t in lora.items())
    a2 = torch.load(ck / "update-00000002" / "trainable.pt")
    a6 = torch.load(ck / "update-00000006" / "trainable.pt")
    assert any(not torch.equal(a2[n], a6[n]) for n in a2)          # two different points of the run
    curves = json.loads((out / "curves.json").read_text())
    assert set(curves["loss"]) == {"T", "I", "R"} and curves["evaluation"]["step"] == []
    # the mid-training checkpoint evaluates natively with hpd eval
    ev = tmp_path / "ev"
    r = CliRunner().invoke(app, ["eval", "--model", str(tiny_dir), "--adapter", str(ck / "update-00000002" / "adapter"),
                                 "--data", str(builtin_dir), "--limit", "2", "--max-turns", "2",
                                 "--max-new-tokens", "8", "--out", str(ev)])
    assert r.exit_code == 0, r.output
    m = json.loads((ev / "metrics.json").read_text())
    assert m["n_tasks"] == 2 and 0.0 <= m["TS"] <= 1.0 and 0.0 <= m["F1"] <= 1.0
    assert json.loads((ev / "manifest.json").read_text())["inputs"]["adapter"]["path"].endswith("update-00000002/adapter")


def test_in_training_evaluation_writes_ts_f1_and_leaves_training_unchanged(tiny_dir, builtin_dir, tmp_path):
    recs = synthetic_records(6, seed=0)
    lora = {"r": 4, "alpha": 8, "dropout": 0.2}       # dropout draws from torch's RNG at every update
    plain = tmp_path / "plain"
    train(recs, _cfg(tiny_dir, lora=lora), plain)
    evaluated = tmp_path / "evaluated"
    evaluation = {"steps": [2, 6], "data": str(builtin_dir), "limit": 2, "split": None, "max_turns": 2,
                  "max_new_tokens": 8}
    train(recs, _cfg(tiny_dir, lora=lora, evaluation=evaluation), evaluated)
    # the evaluation neither moves the training RNG nor the weights: the same losses, update by update
    assert [r["loss"] for r in read_csv(evaluated / "metrics.csv")] == [r["loss"] for r in read_csv(plain / "metrics.csv")]
    for step in (2, 6):
        d = evaluated / "evals" / f"update-{step:08d}"
        m = json.loads((d / "metrics.json").read_text())
        assert m["n_tasks"] == 2 and json.loads((d / "manifest.json").read_text())["status"] == "complete"
    curves = json.loads((evaluated / "curves.json").read_text())
    assert curves["evaluation"]["step"] == [2, 6]
    assert curves["evaluation"]["TS"] == [json.loads((evaluated / "evals" / f"update-{s:08d}" / "metrics.json")
                                                     .read_text())["TS"] for s in (2, 6)]
    assert (evaluated / "curves.png").is_file()


def test_bad_evaluation_inputs_fail_before_training_in_one_line(tmp_path, builtin_dir):
    runner = CliRunner()
    config = Path(__file__).resolve().parents[2] / "configs" / "tiny-cpu.yaml"
    base = ["train", "--config", str(config), "evaluation.steps=[10]"]
    r = runner.invoke(app, [*base, "--out", str(tmp_path / "a"), f"evaluation.data={tmp_path / 'nowhere'}"])
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert r.output.startswith("error: evaluation.data: TRAJECT-Bench data folder not found")
    (tmp_path / "split.txt").write_text("no/such/task.json#0\n")
    r = runner.invoke(app, [*base, "--out", str(tmp_path / "b"), f"evaluation.data={builtin_dir}",
                            f"evaluation.split_file={tmp_path / 'split.txt'}"])
    assert r.exit_code == 2 and r.output.startswith("error: evaluation.split_file: ") and "no/such/task.json#0" in r.output
    assert not (tmp_path / "b" / "checkpoints").exists()          # refused before the first update
