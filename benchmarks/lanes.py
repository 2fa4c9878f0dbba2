"""Training throughput of two study lanes side by side (``hpd demo --lanes 2``: two processes of one thread each)
against one process on both threads (the baseline), SmolLM2-135M-Instruct on the demo's own data and update.

Both runs train the demo's SFT update (:func:`hpd.demo.train_config`: T view on the references, 8 rows, LoRA r16,
fp32, shared-prefix batching) for ``--updates`` updates from the same seed, so every process computes the same
batches; the first update is left out (warm-up). The baseline is one process with ``--threads`` threads; the
lanes are ``--lanes`` processes started together with ``threads // lanes`` threads each. Throughput is updates per
second summed over the processes; ``ratio`` = lanes / baseline. Prints one JSON object.

    python benchmarks/lanes.py [--work /tmp/hpd-bench-lanes] [--updates 4] [--threads 2] [--lanes 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _demo(work: Path):
    from hpd.demo import Demo, config_for_model

    cfg = config_for_model("smollm2", out=work, defect_rate=0.12)
    return cfg, Demo(cfg, log=lambda s: None)


def worker(work: Path, name: str, updates: int) -> dict:
    """Train ``updates`` demo updates in this process; seconds per update after the first."""
    from hpd.demo import setup_threads, train_config
    from hpd.train.trainer import Trainer

    setup_threads()
    cfg, demo = _demo(work)
    _bench, _tasks, base, bds = demo.prepare()
    tr = Trainer(demo.records(bds), train_config(cfg, name, {"T": 1}, "reference", base, updates=updates),
                 demo.out / "train" / name)
    tr.setup()
    secs = []
    for u in range(updates):
        t0 = time.perf_counter()
        tr.step(u)
        secs.append(time.perf_counter() - t0)
    return {"s_per_update": sum(secs[1:]) / (updates - 1), "last_loss": tr.last_loss["T"]}


def _launch(a, name: str, threads: int) -> subprocess.Popen:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    return subprocess.Popen([sys.executable, __file__, "--worker", name, "--work", a.work, "--updates", str(a.updates),
                             "--threads", str(threads)], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)


def _collect(procs: list[subprocess.Popen]) -> list[dict]:
    out = []
    for p in procs:
        stdout, _ = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"a worker failed (exit {p.returncode})")
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default="/tmp/hpd-bench-lanes")
    ap.add_argument("--updates", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2, help="threads of the baseline; split evenly between the lanes")
    ap.add_argument("--lanes", type=int, default=2)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.updates < 2:
        ap.error("--updates must be at least 2 (the first is a warm-up)")
    import torch

    torch.set_num_threads(a.threads)
    if a.worker:
        print(json.dumps(worker(Path(a.work), a.worker, a.updates)))
        return
    _demo(Path(a.work))[1].prepare()          # data, base model and boundaries, once, before the workers
    base = _collect([_launch(a, "baseline", a.threads)])[0]
    per = max(1, a.threads // a.lanes)
    lanes = _collect([_launch(a, f"lane{i}", per) for i in range(a.lanes)])
    thr_base = 1.0 / base["s_per_update"]
    thr_lanes = sum(1.0 / r["s_per_update"] for r in lanes)
    print(json.dumps({"benchmark": "lanes", "model": "SmolLM2-135M-Instruct", "updates": a.updates, "global_batch": 8,
                      "baseline": {"processes": 1, "threads": a.threads, "s_per_update": round(base["s_per_update"], 2),
                                   "updates_per_s": round(thr_base, 4)},
                      "lanes": {"processes": a.lanes, "threads_each": per,
                                "s_per_update": [round(r["s_per_update"], 2) for r in lanes],
                                "updates_per_s": round(thr_lanes, 4)},
                      "same_loss": all(abs(r["last_loss"] - base["last_loss"]) < 1e-3 for r in lanes),
                      "ratio": round(thr_lanes / thr_base, 3)}, indent=1))


if __name__ == "__main__":
    main()
