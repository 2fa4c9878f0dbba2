"""The learning-rate schedule shared by every hpd trainer (three-view, DPO, RL): an optional linear warm-up,
then a constant LR (the paper's) or a decay to ``min_lr_ratio`` of it (a CPU-budget departure, docs/demo.md).

Built on :class:`torch.optim.lr_scheduler.LambdaLR`, so the scheduler's state is saved and restored with every
checkpoint and a resumed run follows the same curve."""

from __future__ import annotations

import math

import torch


def lr_factor(step: int, warmup: int, total: int, decay: str = "constant", floor: float = 0.0) -> float:
    """The multiplier of the base LR at optimizer step ``step`` (0-based, the step about to be taken).

    Warm-up: ``(step + 1) / warmup`` for the first ``warmup`` steps. After it, ``constant`` keeps 1.0; ``linear``
    and ``cosine`` go from 1.0 at the first step after warm-up towards ``floor``, which they would reach one step
    after the last (``total``), as transformers' ``get_{linear,cosine}_schedule_with_warmup`` do, so no step is
    taken at a zero LR."""
    if warmup and step < warmup:
        return (step + 1) / warmup
    if decay == "constant":
        return 1.0
    span = max(1, total - warmup)
    frac = min(1.0, max(0.0, (step - warmup) / span))
    shape = 1.0 - frac if decay == "linear" else 0.5 * (1.0 + math.cos(math.pi * frac))
    return floor + (1.0 - floor) * shape


def make_scheduler(optimizer, optim, total: int) -> torch.optim.lr_scheduler.LambdaLR:
    """The scheduler of ``optim`` (an :class:`hpd.train.config.OptimConfig`) over ``total`` optimizer steps."""
    warm, decay, floor = optim.warmup_updates, optim.decay, optim.min_lr_ratio
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, warm, total, decay, floor))
