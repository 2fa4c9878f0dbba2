"""Seconds per update with LoRA on every decoder layer (the paper's recipe, the baseline) against LoRA on the
top N layers only (``lora.top_layers``), SmolLM2-135M-Instruct on the demo's data, in one run.

Both runs: the demo's built-in benchmark with every train task (``--train-sample 10000``, 12 % defects), T view
on the references, 8 rows per update, episodes grouped, LR 2e-3, fp32, ``--updates`` updates each; the first
update (warm-up) is left out of the mean. With adapters on the top N layers only, autograd stops below the
lowest adapted layer, so the bottom layers run forward only. Prints one JSON object with each run's mean
seconds per update, trainable parameters and last loss, and ``ratio`` = all-layers / top-N seconds.

    python benchmarks/lora_layers.py [--work /tmp/hpd-bench-lora] [--top 10] [--updates 6] [--threads 2]

Measured 2026-12-01 (2 cores, nothing else running): all 30 layers 19.4 s per update (4.9M trainable),
top 10 layers 11.4 s (1.6M trainable), ratio 1.71.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _run(demo, cfg, base, records, top: int | None, updates: int) -> dict:
    from hpd.demo import train_config
    from hpd.train.trainer import Trainer

    tc = train_config(cfg, f"bench-top{top or 'all'}", {"T": 1}, "reference", base, updates=updates)
    tc["lora"]["top_layers"] = top
    tr = Trainer(records, tc, demo.out / "train" / f"bench-top{top or 'all'}")
    tr.setup()
    secs = []
    for u in range(updates):
        t0 = time.perf_counter()
        tr.step(u)
        secs.append(time.perf_counter() - t0)
    return {"top_layers": top, "trainable": sum(p.numel() for p in tr.model.parameters() if p.requires_grad),
            "s_per_update": round(sum(secs[1:]) / (updates - 1), 2), "last_loss": round(tr.last_loss["T"], 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default="/tmp/hpd-bench-lora")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--updates", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    from hpd.demo import Demo, config_for_model, setup_threads

    setup_threads()
    cfg = config_for_model("smollm2", out=Path(a.work), global_batch=8, train_sample=10000, defect_rate=0.12)
    demo = Demo(cfg, log=lambda s: None)
    _bench, _tasks, base, bds = demo.prepare()
    records = demo.records(bds)
    full = _run(demo, cfg, base, records, None, a.updates)
    top = _run(demo, cfg, base, records, a.top, a.updates)
    print(json.dumps({"benchmark": "lora_layers", "model": "SmolLM2-135M-Instruct", "updates": a.updates,
                      "global_batch": 8, "threads": a.threads, "baseline": full, "top": top,
                      "ratio": round(full["s_per_update"] / top["s_per_update"], 2)}, indent=1))


if __name__ == "__main__":
    main()
