"""Two CPU processes (gloo) through `torchrun --nproc-per-node 2 -m hpd.train` (accelerate's own launcher
needs mpirun for multi-CPU; the Accelerator inside maps the torchrun env to MULTI_CPU/gloo, the same code
path DDP takes on GPUs): the distributed path runs and its
per-update losses equal a single-process run of the same config (the global batch is split over ranks,
the loss is normalised by the global token count, so the math is the same)."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hpd.train.logger import read_csv
from hpd.train.trainer import train

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_process_gloo_matches_single_process(tiny_dir, tmp_path):
    cfg = {"name": "ddp", "seed": 0, "model": {"path": str(tiny_dir), "precision": "fp32"},
           "lora": {"r": 8, "alpha": 16, "dropout": 0.0}, "optim": {"lr": 3e-3},
           "batch": {"global_batch": 4, "micro_batch_tokens": 2048}, "data": {"synthetic_tasks": 4, "max_length": 2048},
           "schedule": {"phases": [{"views": {"T": 1, "I": 1, "R": 1}, "updates": 3}]},
           "checkpoint": {"every": 2}, "logging": {"probe_examples": 2, "progress": False, "tensorboard": False}}
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    t0 = time.time()
    p = subprocess.run([torchrun, "--nproc-per-node", "2", "--master-port", str(_free_port()), "-m", "hpd.train",
                        "--config", str(path), "--out", str(tmp_path / "ddp")],
                       capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert p.returncode == 0, p.stderr[-3000:]
    man = json.loads((tmp_path / "ddp" / "manifest.json").read_text())
    assert man["distributed"]["world_size"] == 2 and "MULTI_CPU" in man["distributed"]["type"]
    ck = json.loads(sorted((tmp_path / "ddp" / "checkpoints").glob("update-*"))[-1].joinpath("state.json").read_text())
    assert ck["world_size"] == 2 and (sorted((tmp_path / "ddp" / "checkpoints").glob("update-*"))[-1] / "rng-1.pt").is_file()
    train(None, cfg, tmp_path / "single")
    a = read_csv(tmp_path / "ddp" / "metrics.csv")
    b = read_csv(tmp_path / "single" / "metrics.csv")
    assert [r["view"] for r in a] == [r["view"] for r in b] == ["T", "I", "R"]
    for ra, rb in zip(a, b):
        assert ra["loss"] == pytest.approx(rb["loss"], abs=1e-4), (ra, rb)
        assert int(ra["examples"]) == 4 and ra["supervised_tokens"] == rb["supervised_tokens"]
    print(f"2-process run took {time.time() - t0:.1f} s")
