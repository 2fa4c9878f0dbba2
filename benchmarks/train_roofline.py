"""How close the demo's SFT update runs to this CPU's dense-matmul rate (a roofline), and the least time the
demo's training could take at that rate: SmolLM2-135M-Instruct, LoRA r16, the demo's own data and batch, in fp32
and in bf16 (this CPU has AVX512-BF16: a bf16 matmul runs about 3x the fp32 rate, so each precision is held
against its own rate).

Measured in the same run, for each precision of ``--precision`` (``both`` by default):

* the baseline: this machine's dense matrix-product rate (GFLOP/s) in that dtype at the shapes of SmolLM2's own
  projections (a 1,024-token block times 576x1536, 1536x576 and 576x576 weights) and at 2048^3;
* the demo's SFT update (:func:`hpd.demo.train_config`, T view on the references, 8 rows, episodes grouped,
  shared-prefix batching) with the trainer's ``precision`` set to ``fp32`` or ``bf16`` (bf16 base weights and
  autocast, LoRA weights and optimizer state in fp32): its FLOPs as ``torch.utils.flop_counter.FlopCounterMode``
  counts them (matrix products forward and backward, plus attention: torch does not register the CPU
  flash-attention kernels, so this script adds their formulas, the same ones torch uses for the CUDA kernels,
  with the full, not causal, score matrix) and its wall time, so ``gflops`` = FLOPs / seconds.

Per precision, ``ratio`` = the update's rate / that dtype's matmul rate (at the model's shapes), and
``ratio_to_fp32_matmul`` holds it against the fp32 rate. A ratio near 1 means the update is bound by
matrix-product throughput: no kernel or batching change makes it much faster, only fewer FLOPs (fewer or shorter
rows, fewer layers adapted) or more hardware. ``demo_training_floor_min`` multiplies the measured FLOPs per update
by the demo's trained updates (SFT, HPD-T and HPD at ``--demo-updates`` each, plus the teacher's I-view warm-up at
a quarter of that) and divides by that dtype's matmul rate: the least time the demo's training stages could take
here. It is an underestimate: HPD's I and R rows carry the control document and are longer than the T rows
counted here, and the teacher and evaluation stages (generation) come on top. ``bf16_speedup`` = fp32 s/update
over bf16 s/update (with ``both``).

    python benchmarks/train_roofline.py [--work /tmp/hpd-bench-roofline] [--updates 4] [--threads 2]
                                        [--precision both|fp32|bf16] [--out DIR]

The first update is left out of the means (allocator and thread-pool warm-up).

Measured 2026-12-02 (fp32 only, before the bf16 rate was known; 2 cores, nothing else running; ``--work`` reused a
folder whose data and base model were built): baseline 148.9 GFLOP/s (142.7 / 155.2 / 148.8 at the three shapes;
137.1 at 2048^3); one update 2.092 TFLOP (attention 27.5 %) in 29.75 s, i.e. 70.3 GFLOP/s, ratio 0.472; demo
training floor 60.9 min, at the measured rate 128.9 min. A torch profile of one such update (not part of this
script) put 55 % of its time in ``aten::mm``, 22 % in the CPU flash-attention kernels (forward and backward) and
most of the rest in elementwise ops. Figures with both precisions: docs/experiments (the newest roofline note).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _matmul_gflops(m: int, k: int, n: int, dtype: str = "float32", seconds: float = 2.0) -> float:
    import torch

    dt = getattr(torch, dtype)
    a, b = torch.randn(m, k).to(dt), torch.randn(k, n).to(dt)
    a @ b
    reps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        a @ b
        reps += 1
    return 2 * m * k * n * reps / (time.perf_counter() - t0) / 1e9


def baseline_gflops(dtype: str = "float32") -> dict:
    """Dense-matmul GFLOP/s in ``dtype`` at SmolLM2's projection shapes (their mean) and at 2048^3."""
    shapes = {"1024x576x1536": (1024, 576, 1536), "1024x1536x576": (1024, 1536, 576), "1024x576x576": (1024, 576, 576)}
    at = {name: round(_matmul_gflops(*s, dtype=dtype), 1) for name, s in shapes.items()}
    return {"dtype": dtype, "model_shapes": at, "model_shapes_mean": round(sum(at.values()) / len(at), 1),
            "square_2048": round(_matmul_gflops(2048, 2048, 2048, dtype=dtype), 1)}


def _cpu_flash_formulas() -> dict:
    """FlopCounterMode formulas for the CPU flash-attention kernels (torch registers only the CUDA ones)."""
    import torch
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

    aten = torch.ops.aten

    def fwd(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
        return sdpa_flop_count(query_shape, key_shape, value_shape)

    def bwd(grad_out_shape, query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
        return sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)

    return {aten._scaled_dot_product_flash_attention_for_cpu: fwd,
            aten._scaled_dot_product_flash_attention_for_cpu_backward: bwd}


def measure_updates(timed, counted, updates: int) -> list[dict]:
    """Each update's wall time (``timed``) and FLOPs (``counted``, attention separately). The counter's
    dispatch hook costs time of its own, so two trainers of the same config and seed run the same batches,
    one timed and one counted; ``same_loss`` checks that they did."""
    from torch.utils.flop_counter import FlopCounterMode

    out = []
    for u in range(updates):
        t0 = time.perf_counter()
        timed.step(u)
        secs = time.perf_counter() - t0
        with FlopCounterMode(display=False, custom_mapping=_cpu_flash_formulas()) as fc:
            counted.step(u)
        ops = fc.get_flop_counts().get("Global", {})
        attn = sum(v for op, v in ops.items() if "attention" in str(op))
        same = abs(timed.last_loss["T"] - counted.last_loss["T"]) <= 1e-4 * max(1.0, abs(timed.last_loss["T"]))
        out.append({"seconds": secs, "flops": fc.get_total_flops(), "attention_flops": attn, "same_loss": same})
    return out


PRECISIONS = {"fp32": "float32", "bf16": "bfloat16"}


def roofline(demo, cfg, base: Path, records: list, precision: str, updates: int, demo_updates: int,
             rates: dict) -> dict:
    """The demo's SFT update in ``precision`` held against that dtype's matmul rate (module doc)."""
    from hpd.demo import train_config
    from hpd.train.config import TrainConfig
    from hpd.train.trainer import Trainer

    raw = train_config(cfg, f"roofline-{precision}", {"T": 1}, "reference", base, updates=updates)
    raw["model"]["precision"] = precision
    made = []
    for k in ("timed", "counted"):
        t = Trainer(records, TrainConfig.model_validate(raw), demo.out / "train" / f"roofline-{precision}-{k}")
        t.setup()
        made.append(t)
    steps = measure_updates(*made, updates)[1:]
    secs = sum(s["seconds"] for s in steps) / len(steps)
    flops = sum(s["flops"] for s in steps) / len(steps)
    attn = sum(s["attention_flops"] for s in steps) / len(steps)
    rate = flops / secs / 1e9
    own, fp32 = rates[PRECISIONS[precision]]["model_shapes_mean"], rates["float32"]["model_shapes_mean"]
    trained_updates = 3 * demo_updates + max(1, round(demo_updates / 4))
    return {"precision": precision, "updates_measured": len(steps),
            "same_batches": all(s["same_loss"] for s in steps),
            "s_per_update": round(secs, 2), "tflop_per_update": round(flops / 1e12, 3),
            "attention_share": round(attn / flops, 3), "gflops": round(rate, 1),
            "ratio": round(rate / own, 3), "ratio_to_fp32_matmul": round(rate / fp32, 3),
            "demo_trained_updates": trained_updates,
            "demo_training_floor_min": round(trained_updates * flops / (own * 1e9) / 60, 1),
            "demo_training_at_measured_rate_min": round(trained_updates * secs / 60, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default="/tmp/hpd-bench-roofline")
    ap.add_argument("--updates", type=int, default=4, help="updates measured (the first is left out of the means)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--demo-updates", type=int, default=80, help="updates per trained variant in the demo")
    ap.add_argument("--precision", default="both", choices=["both", *PRECISIONS],
                    help="the trainer precision(s) measured, each against its own dtype's matmul rate")
    ap.add_argument("--out", default=None, help="folder for roofline.json (the JSON is printed either way)")
    a = ap.parse_args()
    if a.updates < 2:
        ap.error("--updates must be at least 2 (the first is a warm-up)")
    import torch

    torch.set_num_threads(a.threads)
    from hpd.demo import Demo, config_for_model, setup_threads

    setup_threads()
    rates = {dt: baseline_gflops(dt) for dt in PRECISIONS.values()}
    cfg = config_for_model("smollm2", out=Path(a.work), defect_rate=0.12)
    demo = Demo(cfg, log=lambda s: None)
    _bench, _tasks, base, bds = demo.prepare()
    records = demo.records(bds)
    wanted = list(PRECISIONS) if a.precision == "both" else [a.precision]
    runs = {p: roofline(demo, cfg, base, records, p, a.updates, a.demo_updates, rates) for p in wanted}
    out = {"benchmark": "train_roofline", "model": "SmolLM2-135M-Instruct", "threads": a.threads,
           "global_batch": cfg.global_batch, "baseline_matmul_gflops": rates,
           "bf16_matmul_speedup": round(rates["bfloat16"]["model_shapes_mean"] / rates["float32"]["model_shapes_mean"], 2),
           "train": runs}
    if len(runs) == 2:
        out["bf16_speedup"] = round(runs["fp32"]["s_per_update"] / runs["bf16"]["s_per_update"], 2)
    text = json.dumps(out, indent=1)
    print(text)
    if a.out:
        from hpd.runfolder import write_json

        Path(a.out).mkdir(parents=True, exist_ok=True)
        write_json(Path(a.out) / "roofline.json", out)


if __name__ == "__main__":
    main()
