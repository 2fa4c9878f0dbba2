"""Trainer throughput: hpd.train vs TRL's SFTTrainer on identical T-view examples and the same model.

    python benchmarks/train.py [--model tiny-s|tiny-xs|smollm2|DIR] [--order sequential|shuffled] [--steps 14]
                          [--batch 8] [--threads 1] [--also-padded] [--out runs/benchmarks/train]

Models: ``tiny-s``/``tiny-xs`` (hpd.policy.tiny.build_tiny, random weights), ``smollm2``
(SmolLM2-135M-Instruct built by hpd.policy.smollm2.build_smollm2 into a temp dir, ~30 s) or a local
model DIR. Both sides: the same model, the same LoRA (all-linear, r16/a32, no dropout: the paper's
setting), torch AdamW, constant LR, fp32, the same global batch, the same examples in the same order
(ours: no shuffling; TRL: sequential sampler), one optimizer step per batch. ``--order`` fixes that
order: ``sequential`` keeps each synthetic episode's boundaries next to each other (the way records
are written), ``shuffled`` permutes the examples with seed 0 first. TRL gets the pre-tokenized
examples (``input_ids`` + ``completion_mask``) so the tokens are identical. Throughput = tokens
(prompt + completion, no padding counted, i.e. the examples' own tokens) per second of
optimizer-step time, excluding the first ``--warmup`` steps of each. Ours includes batch collation
inside its step time; TRL's data loading is outside. ``--also-padded`` also runs ours with
``batching: padded`` (the previous default) to show what the shared-prefix batching adds.
Writes ``<out>/train_bench.json`` (keys: ``ratio`` = ours / TRL, ``ours_tokens_per_s``,
``trl_tokens_per_s``, ``ours_padded_tokens_per_s``, ...) and ``<out>/manifest.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def run_trl(model_dir: Path, examples, steps: int, batch: int, lr: float, work: Path) -> dict:
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import SFTConfig, SFTTrainer

    tok = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32, local_files_only=True)
    rows = [{"input_ids": list(e.prompt_ids) + list(e.completion_ids),
             "completion_mask": [0] * len(e.prompt_ids) + [1] * len(e.completion_ids)} for e in examples]
    ds = Dataset.from_list(rows)
    times: list[float] = []
    losses: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter() - self.t0)

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))

    args = SFTConfig(
        output_dir=str(work / "trl"), per_device_train_batch_size=batch, gradient_accumulation_steps=1,
        max_steps=steps, learning_rate=lr, lr_scheduler_type="constant", optim="adamw_torch", use_cpu=True,
        report_to="none", save_strategy="no", logging_steps=1, max_length=None, completion_only_loss=True,
        bf16=False, train_sampling_strategy="sequential", dataloader_num_workers=0, disable_tqdm=True, seed=0)
    peft = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM")
    trainer = SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=tok, peft_config=peft,
                         callbacks=[Timer()])
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    return {"step_times": times, "wall_s": wall, "losses": losses}


def run_ours(model_dir: Path, records, steps: int, batch: int, lr: float, work: Path, batching: str = "auto") -> dict:
    from hpd.train.logger import read_csv
    from hpd.train.trainer import train

    cfg = {"name": "bench", "seed": 0, "model": {"path": str(model_dir), "precision": "fp32"},
           "lora": {"r": 16, "alpha": 32, "dropout": 0.0}, "optim": {"lr": lr, "max_grad_norm": 1.0},
           "batch": {"global_batch": batch, "micro_batch_tokens": 65536, "batching": batching},
           "data": {"max_length": 8192, "shuffle": False},
           "schedule": {"phases": [{"views": {"T": 1}, "updates": steps}]}, "checkpoint": {"every": 10 ** 9},
           "logging": {"probe_examples": 0, "progress": False, "tensorboard": False}}
    out = work / f"ours-{batching}"
    t0 = time.perf_counter()
    train(records, cfg, out)
    batching_used = json.loads((out / "manifest.json").read_text())["batching"]
    wall = time.perf_counter() - t0
    rows = read_csv(out / "metrics.csv")
    return {"step_times": [float(r["tokens"]) / float(r["tokens_per_s"]) for r in rows],
            "tokens": [int(r["tokens"]) for r in rows], "wall_s": wall, "losses": [r["loss"] for r in rows],
            "batching": batching_used}


def _model_dir(spec: str, work: Path) -> Path:
    if spec in ("tiny-s", "tiny-xs"):
        from hpd.policy.tiny import build_tiny
        return build_tiny(work / "tiny", size=spec.split("-")[1], seed=0)
    if spec == "smollm2":
        from hpd.policy.smollm2 import build_smollm2
        return build_smollm2(work / "smollm2")
    if not (Path(spec) / "config.json").is_file():
        raise SystemExit(f"error: --model {spec}: not tiny-s, tiny-xs, smollm2 or a model folder with config.json")
    return Path(spec)


def _tps(tok_per_step: list[int], times: list[float], w: int) -> float:
    return sum(tok_per_step[w:]) / sum(times[w:len(tok_per_step)])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--out", default="runs/benchmarks/train")
    ap.add_argument("--model", default="tiny-s", help="tiny-s | tiny-xs | smollm2 | a local model DIR")
    ap.add_argument("--size", choices=["xs", "s"], help="(old spelling of --model tiny-xs / tiny-s)")
    ap.add_argument("--tasks", type=int, default=32, help="synthetic tasks (2 boundaries each)")
    ap.add_argument("--order", default="sequential", choices=["sequential", "shuffled"])
    ap.add_argument("--steps", type=int, default=14)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: stable on a shared 2-core box)")
    ap.add_argument("--also-padded", action="store_true", help="also time ours with batching: padded")
    a = ap.parse_args(argv)
    if a.size:
        a.model = f"tiny-{a.size}"
    if a.steps <= a.warmup:
        print("error: --steps must exceed --warmup", file=sys.stderr)
        return 2
    import random

    import torch

    torch.set_num_threads(a.threads)
    from hpd.views import Renderer, build_view, synthetic_records
    from transformers import AutoTokenizer

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="hpd-bench-train-"))
    try:
        model_dir = _model_dir(a.model, work)
        records = synthetic_records(a.tasks, seed=0)
        if a.order == "shuffled":
            random.Random(0).shuffle(records)
        tok = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
        examples, report = build_view(records, Renderer(tok), "T", max_length=8192)
        n_used = a.steps * a.batch
        if n_used > len(examples):
            print(f"error: --steps x --batch = {n_used} > {len(examples)} examples; raise --tasks", file=sys.stderr)
            return 2
        order = examples[:n_used]                      # the sequence every trainer consumes
        tok_per_step = [sum(e.n_tokens for e in order[s * a.batch:(s + 1) * a.batch]) for s in range(a.steps)]
        trl = run_trl(model_dir, order, a.steps, a.batch, a.lr, work)
        runs = {"ours": run_ours(model_dir, records, a.steps, a.batch, a.lr, work)}
        if a.also_padded:
            runs["ours_padded"] = run_ours(model_dir, records, a.steps, a.batch, a.lr, work, batching="padded")
        for r in runs.values():
            assert r["tokens"] == tok_per_step, "the trainers did not see the same batches"
        w = a.warmup
        tps = {k: _tps(tok_per_step, r["step_times"], w) for k, r in runs.items()}
        tps["trl"] = _tps(tok_per_step, trl["step_times"], w)
        res = {
            "ratio": tps["ours"] / tps["trl"],
            **{f"{k}_tokens_per_s": v for k, v in tps.items()},
            "ratio_padded": tps["ours_padded"] / tps["trl"] if "ours_padded" in tps else None,
            # LoRA B starts at 0, so the first step's loss is the base model's: equal iff same tokens + same mask
            "first_step_loss": {**{k: r["losses"][0] for k, r in runs.items()},
                                "trl": trl["losses"][0] if trl["losses"] else None},
            "wall_s": {**{k: r["wall_s"] for k, r in runs.items()}, "trl": trl["wall_s"]},
            "wall_ratio": trl["wall_s"] / runs["ours"]["wall_s"],
            "steps": a.steps, "warmup_steps": w, "global_batch": a.batch, "tokens_measured": sum(tok_per_step[w:]),
            "example_tokens": {"mean": sum(e.n_tokens for e in order) / len(order),
                               "max": max(e.n_tokens for e in order)},
            "n_examples": len(examples), "model": a.model, "order": a.order, "threads": a.threads, "dtype": "fp32",
            "lora": "all-linear r16 alpha32 dropout0",
            "ours_batching": runs["ours"]["batching"] + " (shared prefixes once, no padding, logits only at "
                             "completion positions)" if runs["ours"]["batching"] == "prefix" else runs["ours"]["batching"],
            "trl_batching": "TRL default collator (right padding to the longest row, full-sequence logits)",
        }
        (out / "train_bench.json").write_text(json.dumps(res, indent=1))
        from hpd.runfolder import finish_manifest, new_manifest, write_json
        man = new_manifest(" ".join(["python", "benchmarks/train.py", *(argv if argv is not None else sys.argv[1:])]),
                           vars(a), seed=0, inputs={"records": {"path": f"synthetic:{a.tasks}", "sha256": None}})
        write_json(out / "manifest.json", finish_manifest(man))
        keys = ["ratio", "ours_tokens_per_s", "trl_tokens_per_s", "ratio_padded", "wall_ratio"]
        print(json.dumps({k: res[k] for k in keys if res[k] is not None}))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
