"""The three-view trainer: ``train(records, config, out_dir) -> adapter dir``, a :class:`Trainer` recipe.

One optimizer update = one global batch of ``batch.global_batch`` examples from ONE view, the view
given by the exact schedule (:mod:`hpd.train.schedule`). The batch is split over processes
(``batch[rank::world]``), packed padding-free into rows of ``batch.micro_batch_tokens`` tokens and
accumulated; the loss is the token-mean over the global batch's completion tokens. Optimizer:
``torch.optim.AdamW(foreach=False)`` over the LoRA parameters, constant LR (optional linear warm-up),
grad-norm clipping. Multi-GPU through accelerate (DDP and FSDP2 configs in ``configs/accelerate``; under
sharding every process runs the same number of micro-batches, :mod:`hpd.train.ranks`).

Outputs in ``out_dir``: ``adapter/`` (PEFT adapter + tokenizer; ``model/`` under full fine-tuning), ``manifest.json``,
``metrics.json`` (per-view losses), ``metrics.csv``, ``curves.json`` / ``curves.png`` (Figure 8's smoothed
per-view losses, :mod:`hpd.train.curves`), ``tb/``, ``length_report.json``, ``checkpoints/`` (each with a
loadable ``adapter/``), ``evals/`` (native evaluations at ``evaluation.steps``, :mod:`hpd.train.evaluation`).

Departures from the paper, all stated in the manifest: the R prompt wording is ours
(:data:`hpd.views.RECONSTRUCT_INSTRUCTION`); LoRA rank/alpha/dropout, grad clipping and weight decay
are not given by the paper (defaults r=16, alpha=32, dropout 0.05, clip 1.0, wd 0); the loss is the
token-mean over each update's global batch.
"""

from __future__ import annotations

import math
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

from hpd.runfolder import checksum, finish_manifest, new_manifest, read_manifest, records_checksum, write_json
from hpd.views import RECONSTRUCT_INSTRUCTION, Renderer, ViewExample, build_view, build_views, synthetic_records
from hpd.views.records import check_privilege, documents_at, validate_record

from .checkpoint import export_model, list_checkpoints, load_checkpoint, rng_state, save_checkpoint, set_rng_state
from .curves import write_curves
from .config import TrainConfig, load_config
from .data import ViewStream, collate, collate_padded, group_padded, pack
from .interrupt import DeferredStop
from .logger import MetricsLogger, read_csv
from . import memory
from .lr import make_scheduler
from .student import (batching_mode, load_lora_model, load_start_adapter, load_tokenizer, resolve_dtype,
                      resolve_model_path, row_loss_sum)
from .prefix import collate_prefix, group_prefix
from .ranks import accumulate, one_forward_mode, zero_loss


class TrainError(RuntimeError):
    """A user-facing error (bad config, data or output dir); the CLI prints it on one line."""


class NonFiniteLoss(TrainError):
    """An update's loss or gradient norm was NaN or infinite: the run stops before the optimizer step, so the
    weights of the last checkpoint (and of the updates since) stay finite. The first H200 run of
    ``benchmarks/gpu_check.py`` trained 170 updates on a NaN loss and saved a NaN adapter: nothing stopped it."""


def nonfinite_message(u: int, view: str, loss: float, grad_norm: float | None, lr: float,
                      last: dict[str, float], ckpt_root: Path) -> str:
    """The one-line error of :class:`NonFiniteLoss` (update, view, loss, grad norm, LR, last finite losses)."""
    before = ", ".join(f"{v} {x:.4g}" for v, x in sorted(last.items())) or "none"
    kept = list_checkpoints(ckpt_root)
    return (f"update {u + 1} (view {view}): loss {loss} and grad norm {grad_norm} at LR {lr:.3g}, not finite; "
            f"stopped before the optimizer step. Last finite loss per view: {before}. Newest checkpoint: "
            f"{kept[-1] if kept else 'none'}. Lower optim.lr or check the data of this batch")


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
    """The views' examples and length report; the R view reconstructs ``documents[data.r_target_level]``
    when that is set (privilege ablation), else each record's ``document``."""
    renderer = Renderer(tokenizer, enable_thinking=cfg.model.enable_thinking, module=renderer_module)
    kw = dict(max_length=cfg.data.max_length, length_policy=cfg.data.length_policy, target=cfg.data.target,
              progress=progress)
    level = cfg.data.r_target_level
    if level is None or "R" not in views:
        return build_views(records, renderer, views, **kw)
    examples, report = build_views(records, renderer, [v for v in views if v != "R"], **kw)
    examples["R"], _ = build_view(documents_at(records, level), renderer, "R", report=report, **kw)
    return examples, report


class Trainer:
    """One training run shaped as a recipe: :meth:`setup`, then :meth:`step` per optimizer update with
    :meth:`checkpoint` on the schedule, then :meth:`save`; :meth:`run` strings them together.

    The parts a later trainer (preference, RL) replaces are small: :meth:`load_data` (what an example is),
    :meth:`update_loss` (the loss of one update's batch) and :meth:`summary` (what ``metrics.json`` adds).
    Accelerate, the optimizer, exact resume, checkpoints, logging and the run-folder manifest stay shared."""

    def __init__(self, records: list[dict] | None, config, out_dir: str | Path, *, resume: bool = False,
                 renderer_module=None, command: str | None = None, data_path: str | None = None):
        self.cfg = _as_config(config)
        self.out = Path(out_dir)
        self.ckpt_root = self.out / "checkpoints"
        self.records, self.resume, self.renderer_module = records, resume, renderer_module
        self.command, self.data_path = command, data_path
        self.start = 0
        self.probe_initial = None
        self.resumed = False
        self.last_loss: dict[str, float] = {}
        self.t_run = 0.0

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        """Accelerator, data and views, model and optimizer, resume state, logger (in this order: the RNG
        draws of model init and data order depend on it)."""
        cfg = self.cfg
        existing = list_checkpoints(self.ckpt_root)
        if existing and not self.resume:
            raise TrainError(f"{self.out} already holds a run ({existing[-1].name}); pass --resume or choose a new --out")
        if ((self.out / "adapter").exists() or (self.out / "model").exists()) and (self.out / "metrics.json").exists() \
                and not self.resume:
            raise TrainError(f"{self.out} already holds a finished run; choose a new --out")
        self._setup_accelerator()
        _seed_all(cfg.seed)
        self.load_data()
        self._setup_model()
        self._restore()
        self.logger = MetricsLogger(self.out, start_update=self.start, tensorboard=cfg.logging.tensorboard,
                                    wandb=cfg.logging.wandb, wandb_project=cfg.logging.wandb_project, run_name=cfg.name,
                                    config=cfg.model_dump()) if self.main else None
        self.bar = None
        if self.main and cfg.logging.progress:
            from tqdm.auto import tqdm
            self.bar = tqdm(total=self.schedule.total, initial=self.start, desc=f"hpd train {cfg.name}", unit="upd",
                            dynamic_ncols=True)

    def _setup_accelerator(self) -> None:
        from accelerate import Accelerator
        from accelerate.state import AcceleratorState, GradientState

        self.dtype = resolve_dtype(self._run_precision())
        # AcceleratorState is a per-process singleton: let one process call train() several times (e.g. the
        # demo's SFT then HPD runs) with different precision. The process group (PartialState) is kept.
        AcceleratorState._reset_state()
        GradientState._reset_state()
        # cpu=True without CUDA: accelerate then maps a torchrun launch to MULTI_CPU (gloo) instead of ignoring it.
        self.accelerator = acc = Accelerator(mixed_precision="bf16" if self.dtype == torch.bfloat16 else "no",
                                             cpu=not torch.cuda.is_available())
        self.world, self.rank, self.main = acc.num_processes, acc.process_index, acc.is_main_process
        if self.cfg.batch.global_batch % self.world:
            raise TrainError(f"batch.global_batch={self.cfg.batch.global_batch} is not divisible by {self.world} processes")
        if isinstance(self.cfg, TrainConfig) and self.cfg.evaluation.steps:
            self._check_evaluation()
        if self.main:
            self.out.mkdir(parents=True, exist_ok=True)
        acc.wait_for_everyone()

    def _run_precision(self) -> str:
        """``model.precision``, with ``auto`` resolved once per run: a resumed run keeps the dtype its manifest
        says it trained in, so a run moved to a machine where ``auto`` means another dtype does not change
        precision halfway (a line says so). A bf16 run resumed where ``auto`` is fp32 (a CPU without AVX512-BF16,
        where a bf16 matmul ran at 1/70 of fp32's rate: docs/experiments/2026-12-04-issue35-study.md) stops with
        a one-line error instead: set ``model.precision`` to continue there knowingly."""
        asked = self.cfg.model.precision
        if asked != "auto" or not (self.resume and list_checkpoints(self.ckpt_root)):
            return asked
        started = (read_manifest(self.out) or {}).get("dtype")
        if started not in ("float32", "bfloat16"):
            return asked
        here = str(resolve_dtype("auto")).replace("torch.", "")
        if started == "bfloat16" and here == "float32":
            raise TrainError(f"{self.out} trained in bfloat16 and this device does not compute it natively (auto is "
                             "float32 here): resume it where auto is bfloat16, or set model.precision to bf16 (slow "
                             "here) or fp32 (a precision switch halfway) to continue here")
        if started != here:
            print(f"[hpd train] {self.out} trained in {started} before this resume; model.precision auto would be "
                  f"{here} on this machine; it keeps {started}", file=sys.stderr)
        return started

    def _check_evaluation(self) -> None:
        """``evaluation.steps`` needs one process and valid evaluation inputs: checked before the first update."""
        from .evaluation import select_tasks

        if self.world > 1:
            raise TrainError(f"evaluation.steps runs in single-process training only ({self.world} processes here); "
                             "keep the steps with checkpoint.eval_steps and run `hpd eval --adapter "
                             "<out>/checkpoints/update-XXXXXXXX/adapter` on them")
        try:
            select_tasks(self.cfg.evaluation)
        except ValueError as e:
            raise TrainError(str(e)) from None

    def load_data(self) -> None:
        """Records -> validated records -> the schedule's views -> tokenized examples (``self.examples``)."""
        cfg = self.cfg
        records = self.records
        if records is None:
            path = self.data_path or cfg.data.path
            if path:
                from hpd.views.records import load_records
                records = load_records(path)
                self.data_path = str(path)
            elif cfg.data.synthetic_tasks:
                records = synthetic_records(cfg.data.synthetic_tasks, seed=cfg.seed)
                self.data_path = f"synthetic:{cfg.data.synthetic_tasks}"
            else:
                raise TrainError("no training data: give records, --data FILE, data.path or data.synthetic_tasks")
        self.records = [validate_record(r, i) for i, r in enumerate(records)]
        if cfg.data.teacher_level is not None:
            check_privilege(self.records, cfg.data.teacher_level)
        self.schedule = cfg.schedule.build()
        self.views = self.schedule.views()
        self.model_path = resolve_model_path(cfg, self.out, self.main)
        self.accelerator.wait_for_everyone()
        self.tokenizer = load_tokenizer(self.model_path)
        self.examples, self.report = build_examples(self.records, cfg, self.tokenizer, self.views,
                                                    self.renderer_module, progress=self.main and cfg.logging.progress)
        if self.main:
            write_json(self.out / "length_report.json", self.report.to_dict())
            print(f"[hpd train] {self.report.summary()}", file=sys.stderr)
        empty = [v for v in self.views if not self.examples[v]]
        if empty:
            raise TrainError(f"views {empty} have no examples after the length policy ({self.report.summary()})")

    def start_adapter(self) -> str | None:
        """A trained adapter this run starts from and trains further (``model.adapter`` of DPO and the RL methods;
        e.g. an SFT run's ``<out>/adapter``); None: a fresh LoRA on ``model.path`` (or full fine-tuning)."""
        return getattr(self.cfg.model, "adapter", None)

    def load_model(self):
        """The model to train: :func:`load_lora_model`, or :func:`load_start_adapter` when :meth:`start_adapter`
        names one (a one-line :class:`TrainError` when it cannot be loaded)."""
        adapter = self.start_adapter()
        if not adapter:
            return load_lora_model(self.cfg, self.model_path, self.dtype)
        if not self.cfg.lora.enabled:
            raise TrainError("lora.enabled=false (full fine-tuning) cannot continue a LoRA adapter; "
                             "merge it into a model dir and pass that as model.path")
        try:
            return load_start_adapter(self.cfg, self.model_path, adapter, self.dtype)
        except (OSError, ValueError, KeyError) as exc:
            raise TrainError(f"cannot load model.adapter {adapter}: {exc}") from None

    def _setup_model(self) -> None:
        cfg = self.cfg
        model = self.load_model()
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=cfg.optim.lr, betas=tuple(cfg.optim.betas), eps=cfg.optim.eps,
                                      weight_decay=cfg.optim.weight_decay, foreach=False)
        self.scheduler = make_scheduler(optimizer, cfg.optim, cfg.total_updates)
        self.model, self.optimizer = self.accelerator.prepare(model, optimizer)
        self.model.train()
        self.device = self.accelerator.device
        try:
            self.mode = one_forward_mode(self.accelerator, batching_mode(cfg), cfg.batch.batching)
        except ValueError as e:
            raise TrainError(str(e)) from None
        self.budget = cfg.batch.micro_batch_tokens
        self.streams = {v: ViewStream(v, self.examples[v], cfg.seed, cfg.data.shuffle, cfg.data.group_episodes)
                        for v in self.views}

    def _restore(self) -> None:
        """Continue from the newest checkpoint (``resume``) and measure the initial probe losses."""
        ckpts = list_checkpoints(self.ckpt_root)
        if self.resume and ckpts:
            st = load_checkpoint(ckpts[-1], accelerator=self.accelerator, model=self.model, optimizer=self.optimizer,
                                 scheduler=self.scheduler)
            self.start = int(st["update"])
            for v, s in st["streams"].items():
                self.streams[v].load_state(s)
            self.probe_initial = st.get("probe_initial")
            self.resumed = True
            if self.main:
                print(f"[hpd train] resumed from {ckpts[-1].name}: update {self.start}, cycle position "
                      f"{st['cycle_position']}, streams {st['streams']}", file=sys.stderr)
        elif self.resume and self.main:
            print(f"[hpd train] --resume: no checkpoint in {self.ckpt_root}, starting fresh", file=sys.stderr)
        if self.probe_initial is None and self.cfg.logging.probe_examples:
            self.probe_initial = self.probe()
        if self.main:
            self.manifest = new_manifest(
                self.command, self.cfg.model_dump(mode="json"), seed=self.cfg.seed,
                inputs={"records": self._records_input(), "base_model": str(self.model_path)},
                n_records=len(self.records), dtype=str(self.dtype).replace("torch.", ""),
                schedule=self.schedule.describe(), updates_per_view=self.schedule.counts(), batching=self.mode,
                distributed={"type": str(self.accelerator.distributed_type), "world_size": self.world},
                length_report=self.report.to_dict(), resumed=self.resumed,
                views={"R_instruction": RECONSTRUCT_INSTRUCTION, "target_source": self.cfg.data.target,
                       "document_privilege": self._levels(), "R_target_level": self.cfg.data.r_target_level},
                departures_from_paper=DEPARTURES)
            write_json(self.out / "manifest.json", self.manifest)

    def _levels(self) -> list[str]:
        """The document levels the records carry (the teacher's level, as ``document_privilege``); a subclass whose
        records are not boundary records (DPO pairs) has none."""
        return sorted({str(r.get("document_privilege")) for r in self.records
                       if isinstance(r, dict) and r.get("document") is not None})

    def _records_input(self) -> dict:
        if self.data_path and Path(self.data_path).is_file():
            return {"path": self.data_path, "sha256": checksum(self.data_path)}
        return {"path": self.data_path or "records (in-memory)", "sha256": records_checksum(self.records)}

    def probe(self) -> dict[str, float]:
        return probe_losses(self.model, self.examples, self.cfg.logging.probe_examples, self.budget, self.device,
                            self.mode)

    # ------------------------------------------------------------------ one update
    def uncast_adapter_inputs(self):
        """The update's forwards without peft's cast of each LoRA layer's input to the adapter's fp32 (its
        ``_cast_input_dtype``): under bf16 autocast, the one place the trainers compute in bf16, autocast casts
        that input straight back to bf16 for the product. The round trip is exact (the loss and every gradient
        are the same bit for bit); skipping it made a padded SmolLM2 forward+backward 1.15x faster on the CPU,
        and a whole trie-batched update within the noise (docs/experiments/2026-12-05-precision-quiet.md). In
        fp32 there is no cast to skip."""
        from peft.helpers import disable_input_dtype_casting

        return disable_input_dtype_casting(self.model, active=self.dtype == torch.bfloat16)

    def update_loss(self, batch: list[ViewExample]) -> tuple[float, int]:
        """Forward + backward over one update's global batch (this process's share, packed into
        micro-batches, gradients synced on the last; under sharding every process runs the same count,
        :func:`hpd.train.ranks.accumulate`); returns (token-mean loss over all processes, n supervised)."""
        acc = self.accelerator
        n_sup = sum(len(e.completion_ids) for e in batch)
        rows = micro_batches(batch[self.rank::self.world], self.mode, self.budget)
        loss_acc = torch.zeros((), device=self.device)
        with self.uncast_adapter_inputs():
            for row in accumulate(acc, self.model, rows):
                if row is None:     # sharded: a process with fewer micro-batches matches the others' count
                    acc.backward(zero_loss(self.model, self.device))
                    continue
                ls = row_loss_sum(self.model, row.to(self.device))
                acc.backward(ls * (self.world / n_sup))
                loss_acc += ls.detach().float()
        return float(acc.reduce(loss_acc, reduction="sum")) / n_sup, n_sup

    def step(self, u: int) -> None:
        """Optimizer update ``u`` (0-based): the view the schedule gives, its global batch, clip, step, log."""
        cfg = self.cfg
        t0 = time.perf_counter()
        memory.reset_peak()
        phase, _ = self.schedule.locate(u)
        view = self.schedule.view_at(u)
        batch = self.streams[view].take(cfg.batch.global_batch)
        n_tok = sum(e.n_tokens for e in batch)
        loss, n_sup = self.update_loss(batch)
        gn = None
        if cfg.optim.max_grad_norm:
            gn = self.accelerator.clip_grad_norm_(self.model.parameters(), cfg.optim.max_grad_norm)
            gn = float(gn) if gn is not None else None
        lr = self.scheduler.get_last_lr()[0]        # the LR this update was taken at
        if not math.isfinite(loss) or (gn is not None and not math.isfinite(gn)):
            raise NonFiniteLoss(nonfinite_message(u, view, loss, gn, lr, self.last_loss, self.ckpt_root))
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        dt = time.perf_counter() - t0
        self.t_run += dt
        self.last_loss[view] = loss
        if not self.main:
            return
        if (u + 1) % cfg.logging.every == 0 or u + 1 == self.schedule.total:
            self.logger.log({"update": u, "phase": phase, "view": view, "loss": loss, "supervised_tokens": n_sup,
                             "tokens": n_tok, "examples": len(batch), "lr": lr,
                             "grad_norm": gn, "tokens_per_s": n_tok / dt, "elapsed_s": self.t_run,
                             "peak_gb": memory.peak_gb()})
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix({f"L{v}": f"{x:.3f}" for v, x in self.last_loss.items()} | {"tok/s": f"{n_tok / dt:.0f}"})

    def checkpoint(self, done: int) -> None:
        """Save everything exact resume needs after ``done`` updates (model, optimizer, scheduler, RNG, streams)."""
        total = self.schedule.total
        nxt_phase, nxt_pos = self.schedule.locate(done) if done < total else (len(self.schedule.phases), 0)
        save_checkpoint(self.ckpt_root, update=done, accelerator=self.accelerator, model=self.model,
                        optimizer=self.optimizer, scheduler=self.scheduler, keep=self.cfg.checkpoint.keep,
                        protect=self.extra_checkpoints(), export=(self.export_name, self.tokenizer),
                        state={"update": done, "phase": nxt_phase, "cycle_position": nxt_pos,
                               "next_view": self.schedule.view_at(done) if done < total else None,
                               "streams": {v: s.state() for v, s in self.streams.items()},
                               "probe_initial": self.probe_initial})

    def extra_checkpoints(self) -> set[int]:
        """Updates checkpointed besides every ``checkpoint.every``: :attr:`TrainConfig.saved_steps` (none for a
        method whose config is its own, e.g. RL)."""
        return self.cfg.saved_steps if isinstance(self.cfg, TrainConfig) else set()

    def after_checkpoint(self, done: int) -> None:
        """On the main process: evaluate every ``evaluation.steps`` entry up to ``done`` not evaluated yet
        (:mod:`hpd.train.evaluation`; training RNG untouched), then rewrite ``curves.json`` / ``curves.png``.
        Nothing for a method whose config is not a :class:`TrainConfig` (RL writes its own ``rl.csv``)."""
        if self.main and isinstance(self.cfg, TrainConfig):
            from . import evaluation

            for step in self.cfg.evaluation.steps:
                ckpt = self.ckpt_root / f"update-{step:08d}" / self.export_name
                if step <= done and ckpt.is_dir() and not evaluation.is_done(self.out, step):
                    saved = rng_state()
                    evaluation.evaluate_checkpoint(self.cfg.evaluation, self.model_path, ckpt, self.out, step,
                                                   seed=self.cfg.seed, dtype=self.cfg.model.precision)
                    set_rng_state(saved)
            write_curves(self.out, self.schedule, self.cfg.logging.curve_window_cycles, png=self.cfg.logging.curves_png)
        self.accelerator.wait_for_everyone()

    @property
    def export_name(self) -> str:
        """``adapter`` (PEFT LoRA), or ``model`` under full fine-tuning (the whole model)."""
        return "adapter" if self.cfg.lora.enabled else "model"

    # ------------------------------------------------------------------ the end
    def save(self) -> Path:
        """Final artefacts: the adapter (or whole model), tokenizer, ``metrics.json`` and the manifest."""
        cfg, acc = self.cfg, self.accelerator
        probe_final = self.probe() if cfg.logging.probe_examples else None
        adapter_dir = self.out / self.export_name
        acc.wait_for_everyone()
        export_model(acc, self.model, adapter_dir, self.tokenizer)
        if self.main:
            write_json(self.out / "metrics.json", self.summary(probe_final))
            outputs = [adapter_dir.name, "metrics.json", "curves.json"]
            outputs += ["curves.png"] if (self.out / "curves.png").is_file() else []
            write_json(self.out / "manifest.json", finish_manifest(self.manifest, outputs=outputs))
        acc.wait_for_everyone()
        return adapter_dir

    def summary(self, probe_final: dict | None) -> dict:
        """``metrics.json``: per-view first/last/final losses, probe losses, counts, throughput."""
        rows = read_csv(self.out / "metrics.csv")
        metrics = _summarise(rows, self.views)
        tps = [float(r["tokens_per_s"]) for r in rows]
        metrics.update({
            "updates": self.schedule.total, "updates_per_view": self.schedule.counts(),
            "probe_loss_initial": self.probe_initial, "probe_loss_final": probe_final,
            "probe_examples": self.cfg.logging.probe_examples,
            "n_examples": {v: len(self.examples[v]) for v in self.views},
            "tokens_per_s_median": float(np.median(tps)) if tps else None,
            "peak_gb": memory.run_peak(rows),
            "world_size": self.world,
        })
        return metrics

    def stop_requested(self, stop: DeferredStop) -> bool:
        """Whether a stop signal arrived on any process (one small all-reduce under several processes, so every
        process stops after the same update)."""
        if self.world == 1:
            return stop.requested()
        flag = torch.tensor([1.0 if stop.requested() else 0.0], device=self.device)
        return bool(self.accelerator.reduce(flag, reduction="sum").item() > 0)

    def interrupt(self, done: int) -> None:
        """A stop signal during the loop (:mod:`hpd.train.interrupt`): checkpoint after ``done`` updates (unless the
        schedule just did), mark the manifest stopped, then stop as a Ctrl-C; ``--resume`` continues exactly."""
        if not (self.ckpt_root / f"update-{done:08d}" / "state.json").is_file():
            self.checkpoint(done)
        if self.bar is not None:
            self.bar.close()
        if self.logger is not None:
            self.logger.close()
        if self.main:
            write_json(self.out / "manifest.json", finish_manifest(self.manifest, status="stopped"))
            print(f"[hpd train {self.cfg.name}] stopped after update {done} of {self.schedule.total}; checkpoint "
                  f"saved in {self.ckpt_root} (resume continues from it)", file=sys.stderr, flush=True)
        raise KeyboardInterrupt

    def _fail(self, exc: Exception) -> None:
        """Close the logs (the CSV keeps every update before the failure) and mark the manifest failed."""
        if self.bar is not None:
            self.bar.close()
        if self.logger is not None:
            self.logger.close()
        if self.main:
            write_json(self.out / "manifest.json", finish_manifest(self.manifest, status="failed", error=str(exc)))

    def run(self) -> Path | None:
        """setup -> step (+ checkpoint on the schedule) -> save; None when ``stop_after`` ended it early."""
        self.setup()
        total = self.schedule.total
        stop_at = min(total, self.start + self.cfg.stop_after) if self.cfg.stop_after else total
        with DeferredStop(f"hpd train {self.cfg.name}") as stop:
            for u in range(self.start, stop_at):
                try:
                    self.step(u)
                except NonFiniteLoss as exc:
                    self._fail(exc)
                    raise
                if (u + 1) % self.cfg.checkpoint.every == 0 or u + 1 == total or u + 1 in self.extra_checkpoints():
                    self.checkpoint(u + 1)
                    self.after_checkpoint(u + 1)
                if self.stop_requested(stop) and u + 1 < total:
                    self.interrupt(u + 1)
        if self.bar is not None:
            self.bar.close()
        if self.logger is not None:
            self.logger.close()
        if stop_at < total:
            if self.main:
                write_json(self.out / "manifest.json", finish_manifest(self.manifest, status="stopped"))
            self.accelerator.wait_for_everyone()
            return None
        return self.save()


def train(records: list[dict] | None, config, out_dir: str | Path, *, resume: bool = False,
          renderer_module=None, command: str | None = None, data_path: str | None = None) -> Path | None:
    """Train a LoRA adapter on the views of ``records`` per ``config``; returns ``out_dir/adapter`` (or
    ``out_dir/model``, a whole model directory, when ``lora.enabled`` is False: full fine-tuning).

    ``records``: boundary records (see :mod:`hpd.views.records`); ``None`` -> ``config.data.path`` or
    the synthetic set (``config.data.synthetic_tasks``). ``config``: a :class:`TrainConfig`, a dict or
    a path. ``resume=True`` continues from the newest checkpoint in ``out_dir`` (exactly: same
    losses as an uninterrupted run). Returns ``None`` when ``config.stop_after`` ended the run early.
    Runs unchanged under ``accelerate launch`` (one call per process). The recipe is :class:`Trainer`.
    """
    return Trainer(records, config, out_dir, resume=resume, renderer_module=renderer_module, command=command,
                   data_path=data_path).run()


DEPARTURES = [
    "R view prompt = native context + a fixed reconstruction instruction (our wording; the paper's is unpublished).",
    "LoRA r/alpha/dropout, grad clip (1.0) and weight decay (0.0) are our defaults; the paper does not state them.",
    "Loss = token-mean over the completion tokens of each update's global batch (TRL-style normalisation).",
    "Schedule: one optimizer update per view-batch; a cycle order fixed by smooth weighted round-robin for non-uniform weights.",
    "Over-long rows: oldest tool outputs replaced by a marker (or the row skipped), counted in length_report.json.",
]
