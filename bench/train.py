"""Trainer throughput: hpd.train vs TRL's SFTTrainer on identical T-view examples and the same tiny model.

    python bench/train.py [--out runs/bench/train] [--size s] [--tasks 32] [--steps 14] [--batch 8] [--threads 1]

Both sides: the same tiny Qwen3 (hpd.policy.tiny.build_tiny), the same LoRA (all-linear, r16/a32, no dropout),
torch AdamW, constant LR, fp32, the same global batch, the same examples in the same order (ours: no
shuffling; TRL: sequential sampler), one optimizer step per batch. TRL gets the pre-tokenized examples
(``input_ids`` + ``completion_mask``) so the tokens are identical. Throughput = tokens (prompt +
completion, no padding counted) per second of optimizer-step time, excluding the first ``--warmup``
steps of each. Ours includes batch collation inside its step time; TRL's data loading is outside.
Writes ``<out>/train_bench.json`` (keys: ``ratio`` = ours / TRL, ``ours_tokens_per_s``,
``trl_tokens_per_s``, ...) and ``<out>/manifest.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
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


def run_ours(model_dir: Path, records, steps: int, batch: int, lr: float, work: Path) -> dict:
    from hpd.train.logger import read_csv
    from hpd.train.trainer import train

    cfg = {"name": "bench", "seed": 0, "model": {"path": str(model_dir), "precision": "fp32"},
           "lora": {"r": 16, "alpha": 32, "dropout": 0.0}, "optim": {"lr": lr, "max_grad_norm": 1.0},
           "batch": {"global_batch": batch, "micro_batch_tokens": 65536}, "data": {"max_length": 8192, "shuffle": False},
           "schedule": {"phases": [{"views": {"T": 1}, "updates": steps}]}, "checkpoint": {"every": 10 ** 9},
           "logging": {"probe_examples": 0, "progress": False, "tensorboard": False}}
    out = work / "ours"
    t0 = time.perf_counter()
    train(records, cfg, out)
    wall = time.perf_counter() - t0
    rows = read_csv(out / "metrics.csv")
    return {"step_times": [float(r["tokens"]) / float(r["tokens_per_s"]) for r in rows],
            "tokens": [int(r["tokens"]) for r in rows], "wall_s": wall, "losses": [r["loss"] for r in rows]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--out", default="runs/bench/train")
    ap.add_argument("--size", default="s", choices=["xs", "s"])
    ap.add_argument("--tasks", type=int, default=32, help="synthetic tasks (2 boundaries each)")
    ap.add_argument("--steps", type=int, default=14)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: stable on a shared 2-core box)")
    a = ap.parse_args(argv)
    if a.steps <= a.warmup:
        print("error: --steps must exceed --warmup", file=sys.stderr)
        return 2
    import torch

    torch.set_num_threads(a.threads)
    import hpd
    from hpd.policy.tiny import build_tiny
    from hpd.views import Renderer, build_view, synthetic_records
    from transformers import AutoTokenizer

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="hpd-bench-train-"))
    try:
        model_dir = build_tiny(work / "tiny", size=a.size, seed=0)
        records = synthetic_records(a.tasks, seed=0)
        tok = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
        examples, report = build_view(records, Renderer(tok), "T", max_length=8192)
        n_used = a.steps * a.batch
        order = [examples[i % len(examples)] for i in range(n_used)]   # the sequence both trainers consume
        tok_per_step = [sum(e.n_tokens for e in order[s * a.batch:(s + 1) * a.batch]) for s in range(a.steps)]
        trl = run_trl(model_dir, order, a.steps, a.batch, a.lr, work)
        ours = run_ours(model_dir, records, a.steps, a.batch, a.lr, work)
        assert ours["tokens"] == tok_per_step, "the two trainers did not see the same batches"
        w = a.warmup

        def tps(times):
            return sum(tok_per_step[w:]) / sum(times[w:a.steps])

        res = {
            "ratio": tps(ours["step_times"]) / tps(trl["step_times"]),
            "ours_tokens_per_s": tps(ours["step_times"]), "trl_tokens_per_s": tps(trl["step_times"]),
            # LoRA B starts at 0, so the first step's loss is the base model's: equal iff same tokens + same mask
            "first_step_loss": {"ours": ours["losses"][0], "trl": trl["losses"][0] if trl["losses"] else None},
            "ours_wall_s": ours["wall_s"], "trl_wall_s": trl["wall_s"],
            "wall_ratio": trl["wall_s"] / ours["wall_s"],
            "steps": a.steps, "warmup_steps": w, "global_batch": a.batch, "tokens_measured": sum(tok_per_step[w:]),
            "n_examples": len(examples), "model_size": a.size, "threads": a.threads, "dtype": "fp32",
            "ours_batching": "padded (length-grouped, left-padded, logits only at completion positions)",
            "trl_batching": "TRL default collator (right padding to the longest row, full-sequence logits)",
        }
        (out / "train_bench.json").write_text(json.dumps(res, indent=1))
        (out / "manifest.json").write_text(json.dumps({
            "command": " ".join(["python", "bench/train.py", *(argv if argv is not None else sys.argv[1:])]),
            "hpd_version": hpd.__version__, "pi_version": hpd.PI_VERSION, "data": f"synthetic:{a.tasks}", "seed": 0,
            "time": datetime.now(timezone.utc).isoformat(), "args": vars(a)}, indent=1))
        print(json.dumps({k: res[k] for k in ("ratio", "ours_tokens_per_s", "trl_tokens_per_s", "wall_ratio")}))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
