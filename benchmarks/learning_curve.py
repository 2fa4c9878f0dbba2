"""Learning curve of the demo's SFT baseline: held-out TS / RC / Step-SR against training rows seen.

The demo's data, split, base model and boundaries (``hpd.demo.Demo.prepare``, built in ``--out``), then ONE
SFT run (T view, reference targets, the demo's trainer settings unless overridden) that saves its adapter
after each of ``--at`` updates, then a native evaluation of the base model and of every saved adapter on
the same held-out tasks (``hpd.demo.Demo.evaluate``). Prints one JSON object: per point the updates, rows
seen and the metrics; the baseline is the untrained base model measured in the same run.

    python benchmarks/learning_curve.py [--out runs/lc] [--model smollm2|DIR] [--at 12,25,50]
        [--global-batch 8] [--lr 1e-3] [--train-sample N] [--test-limit 24] [--defect-rate 0] [--threads 2]

Measured 2026-11-30 on this 2-core machine with ``--at 12,25,50 --global-batch 8 --lr 1e-3 --defect-rate 0
--train-sample 321 --test-limit 24 --split-order`` (all 321 train tasks = 813 boundaries at pool-k 3; the
first 24 held-out tasks in split order, all parallel); and 2026-12-01 at the demo's own settings with ``--at
30,60,120 --defect-rate 0.12`` (Base / 30 / 60 / 120 updates: TS 0 / 0 / 0 / 0, RC 0.208 / 0.702 / 0.731 / 0.773,
F1 0.051 / 0.096 / 0.291 / 0.499); and 2026-12-01 on all 811 train boundaries with ``--at 40,80,120 --global-batch 8
--train-sample 10000 --defect-rate 0.12 --threads 1`` (TS 0 / 0 / 0.208 / 0.083, RC 0.208 / 0.924 / 0.906 / 0.917);
numbers and the failure analysis in docs/experiments/ (the demo learning-curve pages).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path


def held_out_tasks(demo, bench, how: str, limit: int | None) -> list | None:
    """The held-out tasks for ``how`` (see --held-out); None for the demo's own spread selection."""
    if how == "spread":
        return None
    from hpd.bench.split import select

    test = select(bench.tasks, json.loads((demo.paths.rate / "split.json").read_text()), "test")
    if how == "split-order":
        return test[:limit]
    from hpd.demo import round_robin

    return round_robin([[t for t in test if t.kind == k] for k in sorted({t.kind for t in test})], limit)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/lc")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--at", default="12,25,50", help="updates after which the adapter is evaluated")
    ap.add_argument("--global-batch", type=int, default=None)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--train-sample", type=int, default=None)
    ap.add_argument("--test-limit", type=int, default=None)
    ap.add_argument("--defect-rate", type=float, default=0.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0, help="the demo cell's seed: LoRA init and training order (data, "
                                                        "split and held-out tasks stay fixed)")
    from hpd.train.config import LR_DECAYS

    ap.add_argument("--lr-decay", choices=LR_DECAYS, default=None,
                    help="LR after the warm-up (default: the demo's); the decay ends at the LAST of --at")
    ap.add_argument("--warmup", type=int, default=None, help="linear LR warm-up in updates (default: the demo's)")
    ap.add_argument("--lora-top-layers", type=int, default=None,
                    help="adapt only the top N decoder layers (lora.top_layers; default: all, as the demo)")
    ap.add_argument("--lora-r", type=int, default=None, help="LoRA rank (default: the demo's, 16)")
    ap.add_argument("--lora-alpha", type=int, default=None, help="LoRA alpha (default: the demo's, 32)")
    ap.add_argument("--full-finetune", action="store_true", help="train every weight instead of a LoRA adapter")
    ap.add_argument("--held-out", choices=("spread", "by-kind", "split-order"), default="spread",
                    help="which --test-limit held-out tasks: spread = the demo's (hpd.demo.held_out); by-kind = "
                         "alternately by kind in split order (the demo's set before 2026-12-01, evening); "
                         "split-order = the first ones in split order (the 2026-11-30 measurement)")
    ap.add_argument("--split-order", action="store_true", help="same as --held-out split-order")
    ap.add_argument("--skip-base", action="store_true",
                    help="do not evaluate the base model (a parallel run on the same held-out set measures it)")
    a = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))
    import torch

    torch.set_num_threads(a.threads)
    from hpd.demo import Demo, config_for_model, setup_threads
    from hpd.train.trainer import Trainer

    setup_threads()
    at = sorted(int(x) for x in a.at.split(","))
    over = {k: v for k, v in {"lora_r": a.lora_r, "lora_alpha": a.lora_alpha}.items() if v is not None}
    cfg = config_for_model(a.model, out=Path(a.out), seed=a.seed, global_batch=a.global_batch, lr=a.lr,
                           train_sample=a.train_sample, test_limit=a.test_limit, defect_rate=a.defect_rate,
                           lr_decay=a.lr_decay, warmup_updates=a.warmup, **over)
    if a.full_finetune:
        cfg.full_finetune = True
    demo = Demo(cfg, log=lambda s: None)
    bench, tasks, base, bds = demo.prepare()
    tasks = held_out_tasks(demo, bench, "split-order" if a.split_order else a.held_out, cfg.test_limit) or tasks
    from hpd.demo import train_config

    tc = train_config(cfg, "lc", {"T": 1}, "reference", base, updates=at[-1])
    tc["lora"]["top_layers"] = a.lora_top_layers
    tr = Trainer(demo.records(bds), tc, demo.out / "train" / "lc")
    tr.setup()
    t0 = time.perf_counter()
    for u in range(at[-1]):
        tr.step(u)
        if u + 1 in at:
            tr.accelerator.unwrap_model(tr.model).save_pretrained(str(demo.out / "lc" / f"u{u + 1}"))
            if a.full_finetune:   # a whole model folder: hpd.demo.model_and_adapter loads it as the model
                tr.tokenizer.save_pretrained(str(demo.out / "lc" / f"u{u + 1}"))
    train_s = time.perf_counter() - t0
    del tr
    points = [] if a.skip_base else [{"updates": 0, "rows": 0, **demo.evaluate("base", bench, tasks, base, None)}]
    for n in at:
        m = demo.evaluate(f"lc-u{n}", bench, tasks, base, demo.out / "lc" / f"u{n}")
        points.append({"updates": n, "rows": n * cfg.global_batch, **m})
    print(json.dumps({"benchmark": "learning_curve", "model": a.model, "lora_top_layers": a.lora_top_layers,
                      "lora_r": cfg.lora_r, "lora_alpha": cfg.lora_alpha, "full_finetune": cfg.full_finetune,
                      "held_out": "split-order" if a.split_order else a.held_out,
                      "global_batch": cfg.global_batch,
                      "lr": cfg.lr, "lr_decay": cfg.lr_decay, "warmup_updates": cfg.warmup_updates,
                      "train_boundaries": len(bds), "held_out_tasks": len(tasks), "seed": cfg.seed,
                      "train_s": round(train_s, 1), "points": points,
                      "baseline": "not measured (--skip-base)" if a.skip_base else "base model (0 updates)"},
                     indent=1))


if __name__ == "__main__":
    main()
