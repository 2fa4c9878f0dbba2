"""A real kill: `hpd train` in a subprocess is SIGKILLed after a checkpoint, resumed with --resume, and
its per-update losses equal an uninterrupted run's."""

from pathlib import Path

import pytest
import yaml
from kill_helpers import kill_after_checkpoint

from hpd.train.logger import read_csv
from hpd.train.trainer import train

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_sigkill_then_resume_matches_uninterrupted(tiny_dir, tmp_path):
    cfg = {"name": "kill", "seed": 0, "model": {"path": str(tiny_dir), "precision": "fp32"},
           "lora": {"r": 8, "alpha": 16, "dropout": 0.1}, "optim": {"lr": 3e-3},
           "batch": {"global_batch": 4, "micro_batch_tokens": 2048}, "data": {"synthetic_tasks": 5, "max_length": 2048},
           "schedule": {"phases": [{"views": {"T": 1, "I": 1, "R": 1}, "updates": 400}]},
           "checkpoint": {"every": 2, "keep": 3}, "logging": {"probe_examples": 0, "progress": False, "tensorboard": False}}
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "killed"
    kill_after_checkpoint(["--config", str(path), "--out", str(out)], out, REPO)
    assert not (out / "adapter").exists()                  # killed mid-run (400 updates scheduled)
    ckpts = sorted((out / "checkpoints").glob("update-*"))
    latest = int(ckpts[-1].name.split("-")[1]) if (ckpts[-1] / "state.json").exists() else int(ckpts[-2].name.split("-")[1])
    end = latest + 6
    assert train(None, dict(cfg, stop_after=6), out, resume=True) is None
    assert train(None, dict(cfg, stop_after=end), tmp_path / "straight") is None
    a = read_csv(tmp_path / "straight" / "metrics.csv")
    b = read_csv(out / "metrics.csv")
    assert [r["update"] for r in b] == list(range(end)) == [r["update"] for r in a]
    for ra, rb in zip(a, b):
        assert ra["view"] == rb["view"] and abs(ra["loss"] - rb["loss"]) <= 1e-6, (ra, rb)
