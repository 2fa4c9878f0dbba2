"""Gradient accumulation with matched collectives across processes.

Under sharding (FSDP2 ``fully_shard``, DeepSpeed ZeRO-3) every forward pass all-gathers the parameters and every
backward pass gathers them again and reduce-scatters the gradients, so every process must run the SAME number
of forward/backward passes per optimizer update, or the processes issue unmatched collectives and hang. Each
process packs its own share of an update into a token-budgeted number of micro-batches, which differs between
processes whenever their shares differ in length.

:func:`accumulate` is the micro-batch loop of every trainer (three-view, DPO, RL): it yields this process's
micro-batches under the right synchronisation (``no_sync`` on all but the last, the accumulation boundary set on
the last) and, under sharding, first all-reduces (max) the micro-batch count and then yields ``None`` for each
missing one; the caller backpropagates :func:`zero_loss` for those, a forward+backward over two tokens whose loss
is multiplied by 0 (zero gradients, the same collectives). In one process, or under DDP (one gradient all-reduce
per update whatever the count), nothing is added and the loop is the one the trainers always ran.

:func:`one_forward_mode` keeps every micro-batch ONE forward pass under sharding: ``prefix`` batching runs one
forward per node of a micro-batch's prefix trie, a count that depends on the data.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TypeVar

import torch

T = TypeVar("T")


def sharded(accelerator) -> bool:
    """True when the model's parameters are sharded over processes (FSDP, DeepSpeed)."""
    from accelerate.utils import DistributedType

    return accelerator.distributed_type in (DistributedType.FSDP, DistributedType.DEEPSPEED)


def set_sync(accelerator, flag: bool) -> None:
    """Mark whether the next backward ends the accumulation (the switch accelerate's own ``accumulate()`` flips;
    DeepSpeed reads it to place the accumulation boundary)."""
    accelerator.gradient_state._set_sync_gradients(flag)


def matched_count(accelerator, n: int) -> int:
    """The micro-batch count every process runs: ``n``, or under sharding the max of ``n`` over processes."""
    if accelerator.num_processes == 1 or not sharded(accelerator):
        return n
    t = torch.tensor([n], dtype=torch.long, device=accelerator.device)
    return int(accelerator.reduce(t, reduction="max").item())


def accumulate(accelerator, model, items: list[T]) -> Iterator[T | None]:
    """Yield each of ``items`` (this process's micro-batches) inside its synchronisation context, then ``None``
    until :func:`matched_count` micro-batches have run; gradients are synced on the last one. The caller runs
    forward + backward on each item, and ``accelerator.backward(zero_loss(model, device))`` on each ``None``."""
    total = matched_count(accelerator, len(items))
    for i in range(total):
        last = i == total - 1
        set_sync(accelerator, last)
        with (accelerator.no_sync(model) if not last else contextlib.nullcontext()):
            yield items[i] if i < len(items) else None
    set_sync(accelerator, True)


def zero_loss(model, device) -> torch.Tensor:
    """A loss of exactly 0 that runs the model forward on two tokens: its backward writes zero gradients and
    issues the same collectives as a real micro-batch (the padding of :func:`accumulate`)."""
    ids = torch.zeros((1, 2), dtype=torch.long, device=device)
    pos = torch.arange(2, device=device).unsqueeze(0)
    out = model(input_ids=ids, position_ids=pos, use_cache=False, logits_to_keep=1)
    return out.logits.float().sum() * 0.0


def one_forward_mode(accelerator, mode: str, requested: str) -> str:
    """The batching mode to run: ``mode``, except under sharding, where ``prefix`` (several forward passes per
    micro-batch, data-dependent) becomes ``padded`` when it was chosen by ``auto``; asked for by name it is an
    error (ValueError)."""
    if mode != "prefix" or not sharded(accelerator):
        return mode
    if requested == "prefix":
        raise ValueError("batch.batching=prefix runs a data-dependent number of forward passes per micro-batch, "
                         "which hangs sharded training (FSDP / DeepSpeed); use batching: padded, packed or auto")
    return "padded"


def fsdp_on_cpu_processes() -> None:
    """Let accelerate's state take FSDP on CPU (gloo) processes, as it does on GPUs (accelerate's state.py builds
    the FSDP type and plugin from the ``FSDP_*`` environment only for GPU-type devices): the CPU test and the GPU
    check's dry run run the sharded path the GPU configs use. Patches ``AcceleratorState.__init__`` once."""
    import os

    from accelerate.state import AcceleratorState
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

    init = AcceleratorState.__init__
    if getattr(init, "_hpd_fsdp_on_cpu", False):
        return

    def patched(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if self.distributed_type == DistributedType.MULTI_CPU and os.environ.get("ACCELERATE_USE_FSDP") == "true":
            self.distributed_type = DistributedType.FSDP
            self.fsdp_plugin = kwargs.get("fsdp_plugin") or FullyShardedDataParallelPlugin()

    patched._hpd_fsdp_on_cpu = True
    AcceleratorState.__init__ = patched
