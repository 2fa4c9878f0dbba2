"""A whole bf16 ``hpd train`` update (the demo's SFT trainer, T view, the demo's batching: the shared-prefix trie on
the CPU) with and without peft's cast of the LoRA inputs (``Trainer.uncast_adapter_inputs``), on the same batch
and the same weights (no optimizer step), alternating, one thread. Prints JSON: the median of the rounds' ratios,
the best times, and whether the losses were identical.

Usage: python trainer_cast.py WORK [ROWS=8] [ROUNDS=6]
  WORK: benchmarks/precision.py's --work folder (the demo's data, split, SmolLM2 and boundaries; made when absent)
"""
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from precision import bench_trainer, prepared  # noqa: E402

torch.set_num_threads(1)
work, rows = Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 8
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 6
demo, _bench, _tasks, base, bds = prepared(work)
tr = bench_trainer(demo, base, demo.records(bds), work.parent / "trainer-cast", "bfloat16", "auto")
skip = tr.uncast_adapter_inputs
times, losses = {"cast": [], "skip": []}, {"cast": [], "skip": []}
for r in range(rounds + 1):   # round 0 warms up
    batch = tr.streams["T"].take(rows)
    for key, ctx in (("cast", contextlib.nullcontext), ("skip", skip)):
        tr.uncast_adapter_inputs = ctx
        tr.model.zero_grad(set_to_none=True)
        start = time.perf_counter()
        loss, _ = tr.update_loss(batch)
        times[key] += [time.perf_counter() - start] if r else []
        losses[key].append(loss)
print(json.dumps({"batching": tr.mode, "rows": rows, "rounds": rounds,
                  "speedup_median_of_rounds": statistics.median(a / b for a, b in zip(times["cast"], times["skip"])),
                  "best_s": {k: min(v) for k, v in times.items()}, "losses_identical": losses["cast"] == losses["skip"]},
                 indent=1))
