"""The three-view trainer: ``train(records, config, out_dir) -> adapter dir``.

One optimizer update = one global batch of ``batch.global_batch`` examples from ONE view, the view
given by the exact schedule (:mod:`hpd.train.schedule`). The batch is split over processes
(``batch[rank::world]``), packed padding-free into rows of ``batch.micro_batch_tokens`` tokens and
accumulated; the loss is the token-mean over the global batch's completion tokens. Optimizer:
``torch.optim.AdamW(foreach=False)`` over the LoRA parameters, constant LR (optional linear warm-up),
grad-norm clipping. Multi-GPU through accelerate (DDP, FSDP2, DeepSpeed ZeRO-2/3 configs in
``configs/accelerate``).

Outputs in ``out_dir``: ``adapter/`` (PEFT adapter + tokenizer; ``model/`` under full fine-tuning), ``manifest.json``,
``metrics.json`` (per-view losses), ``metrics.csv``, ``tb/``, ``length_report.json``,
``checkpoints/``.

Departures from the paper, all stated in the manifest: the R prompt wording is ours
(:data:`hpd.views.RECONSTRUCT_INSTRUCTION`); LoRA rank/alpha/dropout, grad clipping and weight decay
are not given by the paper (defaults r=16, alpha=32, dropout 0.05, clip 1.0, wd 0); the loss is the
token-mean over each update's global batch.
"""

from __future__ import annotations

import json
import random
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

import hpd
from hpd.views import RECONSTRUCT_INSTRUCTION, Renderer, ViewExample, build_views, synthetic_records
from hpd.views.records import validate_record

from .checkpoint import list_checkpoints, load_checkpoint, save_checkpoint
from .config import TrainConfig, load_config
from .data import ViewStream, collate, collate_padded, group_padded, pack
from .logger import MetricsLogger, read_csv
from .model import batching_mode, load_lora_model, load_tokenizer, resolve_dtype, resolve_model_path, row_loss_sum
from .prefix import collate_prefix, group_prefix


class TrainError(RuntimeError):
    """A user-facing error (bad config, data or output dir); the CLI prints it on one line."""


def _as_config(config) -> TrainConfig:
    if isinstance(config, TrainConfig):
        return config
    if isinstance(config, dict):
        return TrainConfig.model_validate(config)
    return load_config(config)


def _seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _set_sync(accelerator, flag: bool) -> None:
    # Same switch accelerate's own `accumulate()` flips; DeepSpeed reads it to place the accumulation boundary.
    accelerator.gradient_state._set_sync_gradients(flag)


def micro_batches(examples: list[ViewExample], mode: str, budget: int, pad_id: int = 0) -> list:
    """Collated micro-batches of ``examples`` for ``mode`` (packed | padded | prefix), each within ``budget`` tokens."""
    if mode == "packed":
        return [collate(r) for r in pack(examples, budget)]
    if mode == "prefix":
        return [collate_prefix(r) for r in group_prefix(examples, budget)]
    return [collate_padded(r, pad_id) for r in group_padded(examples, budget)]


@torch.no_grad()
def probe_losses(model, examples: dict[str, list[ViewExample]], n: int, budget: int, device,
                 mode: str = "padded") -> dict[str, float]:
    """Token-mean completion loss of the first ``n`` examples of each view (eval mode, no dropout)."""
    was_training = model.training
    model.eval()
    out = {}
    for v, exs in examples.items():
        sel = exs[:n]
        if not sel:
            continue
        tot = 0.0
        for mb in micro_batches(sel, mode, budget):
            tot += float(row_loss_sum(model, mb.to(device)))
        cnt = sum(len(e.completion_ids) for e in sel)
        out[v] = tot / cnt
    model.train(was_training)
    return out


def _summarise(csv_rows: list[dict], views: list[str], tail: int = 10) -> dict:
    by = {v: [r["loss"] for r in csv_rows if r["view"] == v] for v in views}
    return {
        "first_loss": {v: xs[0] for v, xs in by.items() if xs},
        "last_loss": {v: xs[-1] for v, xs in by.items() if xs},
        "final_loss": {v: float(np.mean(xs[-tail:])) for v, xs in by.items() if xs},
        "final_loss_window": tail,
        "logged_updates": {v: len(xs) for v, xs in by.items()},
    }


def build_examples(records: list[dict], cfg: TrainConfig, tokenizer, views: list[str], renderer_module=None,
                   progress: bool = False):
    renderer = Renderer(tokenizer, enable_thinking=cfg.model.enable_thinking, module=renderer_module)
    return build_views(records, renderer, views, max_length=cfg.data.max_length,
                       length_policy=cfg.data.length_policy, target=cfg.data.target, progress=progress)


def train(records: list[dict] | None, config, out_dir: str | Path, *, resume: bool = False,
          renderer_module=None, command: str | None = None, data_path: str | None = None) -> Path | None:
    """Train a LoRA adapter on the views of ``records`` per ``config``; returns ``out_dir/adapter`` (or
    ``out_dir/model``, a whole model directory, when ``lora.enabled`` is False: full fine-tuning).

    ``records``: boundary records (see :mod:`hpd.views.records`); ``None`` -> ``config.data.path`` or
    the synthetic set (``config.data.synthetic_tasks``). ``config``: a :class:`TrainConfig`, a dict or
    a path. ``resume=True`` continues from the newest checkpoint in ``out_dir`` (exactly: same
    losses as an uninterrupted run). Returns ``None`` when ``config.stop_after`` ended the run early.
    Runs unchanged under ``accelerate launch`` (one call per process).
    """
    from accelerate import Accelerator

    cfg = _as_config(config)
    out = Path(out_dir)
    ckpt_root = out / "checkpoints"
    existing = list_checkpoints(ckpt_root)
    if existing and not resume:
        raise TrainError(f"{out} already holds a run ({existing[-1].name}); pass --resume or choose a new --out")
    if ((out / "adapter").exists() or (out / "model").exists()) and (out / "metrics.json").exists() and not resume:
        raise TrainError(f"{out} already holds a finished run; choose a new --out")

    dtype = resolve_dtype(cfg.model.precision)
    # AcceleratorState is a per-process singleton: let one process call train() several times (e.g. the
    # demo's SFT then HPD runs) with different precision. The process group (PartialState) is kept.
    from accelerate.state import AcceleratorState, GradientState
    AcceleratorState._reset_state()
    GradientState._reset_state()
    # cpu=True without CUDA: accelerate then maps a torchrun launch to MULTI_CPU (gloo) instead of ignoring it.
    accelerator = Accelerator(mixed_precision="bf16" if dtype == torch.bfloat16 else "no", cpu=not torch.cuda.is_available())
    world, rank, main = accelerator.num_processes, accelerator.process_index, accelerator.is_main_process
    if cfg.batch.global_batch % world:
        raise TrainError(f"batch.global_batch={cfg.batch.global_batch} is not divisible by {world} processes")
    if main:
        out.mkdir(parents=True, exist_ok=True)
    accelerator.wait_for_everyone()
    _seed_all(cfg.seed)

    # ---- data
    if records is None:
        path = data_path or cfg.data.path
        if path:
            from hpd.views.records import load_records
            records = load_records(path)
            data_path = str(path)
        elif cfg.data.synthetic_tasks:
            records = synthetic_records(cfg.data.synthetic_tasks, seed=cfg.seed)
            data_path = f"synthetic:{cfg.data.synthetic_tasks}"
        else:
            raise TrainError("no training data: give records, --data FILE, data.path or data.synthetic_tasks")
    records = [validate_record(r, i) for i, r in enumerate(records)]
    schedule = cfg.schedule.build()
    views = schedule.views()

    model_path = resolve_model_path(cfg, out, main)
    accelerator.wait_for_everyone()
    tokenizer = load_tokenizer(model_path)
    examples, report = build_examples(records, cfg, tokenizer, views, renderer_module,
                                      progress=main and cfg.logging.progress)
    if main:
        (out / "length_report.json").write_text(json.dumps(report.to_dict(), indent=1))
        print(f"[hpd train] {report.summary()}", file=sys.stderr)
    empty = [v for v in views if not examples[v]]
    if empty:
        raise TrainError(f"views {empty} have no examples after the length policy ({report.summary()})")

    # ---- model, optimizer
    model = load_lora_model(cfg, model_path)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.optim.lr, betas=tuple(cfg.optim.betas), eps=cfg.optim.eps,
                                  weight_decay=cfg.optim.weight_decay, foreach=False)
    warm = cfg.optim.warmup_updates
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0)
    model, optimizer = accelerator.prepare(model, optimizer)
    model.train()
    device = accelerator.device

    mode = batching_mode(cfg)
    budget = cfg.batch.micro_batch_tokens
    streams = {v: ViewStream(v, examples[v], cfg.seed, cfg.data.shuffle) for v in views}
    start, probe_initial = 0, None
    ckpts = list_checkpoints(ckpt_root)
    if resume and ckpts:
        st = load_checkpoint(ckpts[-1], accelerator=accelerator, model=model, optimizer=optimizer, scheduler=scheduler)
        start = int(st["update"])
        for v, s in st["streams"].items():
            streams[v].load_state(s)
        probe_initial = st.get("probe_initial")
        if main:
            print(f"[hpd train] resumed from {ckpts[-1].name}: update {start}, cycle position "
                  f"{st['cycle_position']}, streams {st['streams']}", file=sys.stderr)
    elif resume and main:
        print(f"[hpd train] --resume: no checkpoint in {ckpt_root}, starting fresh", file=sys.stderr)
    if probe_initial is None and cfg.logging.probe_examples:
        probe_initial = probe_losses(model, examples, cfg.logging.probe_examples, budget, device, mode)

    logger = MetricsLogger(out, start_update=start, tensorboard=cfg.logging.tensorboard, wandb=cfg.logging.wandb,
                           wandb_project=cfg.logging.wandb_project, run_name=cfg.name,
                           config=cfg.model_dump()) if main else None
    bar = None
    if main and cfg.logging.progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=schedule.total, initial=start, desc=f"hpd train {cfg.name}", unit="upd", dynamic_ncols=True)

    total = schedule.total
    stop_at = min(total, start + cfg.stop_after) if cfg.stop_after else total
    last_loss: dict[str, float] = {}
    t_run, tokens_run = 0.0, 0
    u = start
    for u in range(start, stop_at):
        t0 = time.perf_counter()
        phase, pos = schedule.locate(u)
        view = schedule.view_at(u)
        batch = streams[view].take(cfg.batch.global_batch)
        n_sup = sum(len(e.completion_ids) for e in batch)
        n_tok = sum(e.n_tokens for e in batch)
        rows = micro_batches(batch[rank::world], mode, budget)
        loss_acc = torch.zeros((), device=device)
        for i, row in enumerate(rows):
            last = i == len(rows) - 1
            _set_sync(accelerator, last)
            ctx = accelerator.no_sync(model) if not last else _null()
            with ctx:
                ls = row_loss_sum(model, row.to(device))
                accelerator.backward(ls * (world / n_sup))
            loss_acc += ls.detach().float()
        _set_sync(accelerator, True)
        gn = None
        if cfg.optim.max_grad_norm:
            gn = accelerator.clip_grad_norm_(model.parameters(), cfg.optim.max_grad_norm)
            gn = float(gn) if gn is not None else None
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        loss = float(accelerator.reduce(loss_acc, reduction="sum")) / n_sup
        dt = time.perf_counter() - t0
        t_run += dt
        tokens_run += n_tok
        last_loss[view] = loss
        if main:
            if (u + 1) % cfg.logging.every == 0 or u + 1 == total:
                logger.log({"update": u, "phase": phase, "view": view, "loss": loss, "supervised_tokens": n_sup,
                            "tokens": n_tok, "examples": len(batch), "lr": scheduler.get_last_lr()[0],
                            "grad_norm": gn, "tokens_per_s": n_tok / dt, "elapsed_s": t_run})
            if bar is not None:
                bar.update(1)
                bar.set_postfix({f"L{v}": f"{x:.3f}" for v, x in last_loss.items()} | {"tok/s": f"{n_tok / dt:.0f}"})
        done = u + 1
        if done % cfg.checkpoint.every == 0 or done == total:
            nxt_phase, nxt_pos = schedule.locate(done) if done < total else (len(schedule.phases), 0)
            save_checkpoint(ckpt_root, update=done, accelerator=accelerator, model=model, optimizer=optimizer,
                            scheduler=scheduler, keep=cfg.checkpoint.keep,
                            state={"update": done, "phase": nxt_phase, "cycle_position": nxt_pos,
                                   "next_view": schedule.view_at(done) if done < total else None,
                                   "streams": {v: s.state() for v, s in streams.items()},
                                   "probe_initial": probe_initial})
    if bar is not None:
        bar.close()
    if logger is not None:
        logger.close()
    if stop_at < total:
        accelerator.wait_for_everyone()
        return None

    # ---- final artefacts
    probe_final = (probe_losses(model, examples, cfg.logging.probe_examples, budget, device, mode)
                   if cfg.logging.probe_examples else None)
    adapter_dir = out / ("adapter" if cfg.lora.enabled else "model")   # full fine-tuning saves the whole model
    accelerator.wait_for_everyone()
    from accelerate.utils import DistributedType
    unwrapped = accelerator.unwrap_model(model)
    if accelerator.distributed_type in (DistributedType.FSDP, DistributedType.DEEPSPEED):
        sd = accelerator.get_state_dict(model)
        if main:
            unwrapped.save_pretrained(str(adapter_dir), state_dict=sd)
    elif main:
        unwrapped.save_pretrained(str(adapter_dir))
    if main:
        tokenizer.save_pretrained(str(adapter_dir))
        rows = read_csv(out / "metrics.csv")
        metrics = _summarise(rows, views)
        tps = [float(r["tokens_per_s"]) for r in rows]
        metrics.update({
            "updates": total, "updates_per_view": schedule.counts(),
            "probe_loss_initial": probe_initial, "probe_loss_final": probe_final,
            "probe_examples": cfg.logging.probe_examples,
            "n_examples": {v: len(examples[v]) for v in views},
            "tokens_per_s_median": float(np.median(tps)) if tps else None,
            "world_size": world,
        })
        (out / "metrics.json").write_text(json.dumps(metrics, indent=1))
        manifest = {
            "command": command or " ".join(sys.argv),
            "hpd_version": hpd.__version__, "pi_package": hpd.PI_PACKAGE, "pi_version": hpd.PI_VERSION,
            "time": datetime.now(timezone.utc).isoformat(), "seed": cfg.seed,
            "data": data_path or "records (in-memory)", "n_records": len(records),
            "base_model": str(model_path), "dtype": str(dtype).replace("torch.", ""),
            "config": cfg.model_dump(mode="json"),
            "schedule": schedule.describe(), "updates_per_view": schedule.counts(),
            "batching": mode, "distributed": {"type": str(accelerator.distributed_type), "world_size": world},
            "length_report": report.to_dict(), "resumed": bool(resume and ckpts),
            "views": {"R_instruction": RECONSTRUCT_INSTRUCTION,
                      "target_source": cfg.data.target},
            "departures_from_paper": DEPARTURES,
        }
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    accelerator.wait_for_everyone()
    return adapter_dir


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


DEPARTURES = [
    "R view prompt = native context + a fixed reconstruction instruction (our wording; the paper's is unpublished).",
    "LoRA r/alpha/dropout, grad clip (1.0) and weight decay (0.0) are our defaults; the paper does not state them.",
    "Loss = token-mean over the completion tokens of each update's global batch (TRL-style normalisation).",
    "Schedule: one optimizer update per view-batch; a cycle order fixed by smooth weighted round-robin for non-uniform weights.",
    "Over-long rows: oldest tool outputs replaced by a marker (or the row skipped), counted in length_report.json.",
]
