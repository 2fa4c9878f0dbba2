"""Resumable checkpoints: ``<out>/checkpoints/update-XXXXXXXX/``.

Contents (single process / DDP): ``trainable.pt`` (the LoRA parameters by name), ``optimizer.pt``,
``scheduler.pt``, ``rng-<rank>.pt`` (python, numpy, torch CPU and CUDA generator states of each
process) and ``state.json`` (completed updates, cycle position, per-view stream positions, world
size, initial probe losses). With ``export`` (the three-view trainer), it also holds a loadable
``adapter/`` (PEFT adapter + tokenizer; ``model/`` under full fine-tuning) that ``hpd eval --model BASE
--adapter <out>/checkpoints/update-XXXXXXXX/adapter`` evaluates. Under FSDP / DeepSpeed the model and optimizer shards are saved with
``accelerator.save_state`` into ``accelerate/`` instead (not exercised on this CPU-only machine).
A checkpoint is written to a temp dir and renamed, so a kill mid-save never leaves a half checkpoint
that resume would pick up. ``state.json`` is the completeness marker.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import torch

from .ranks import sharded

PREFIX = "update-"


def rng_state() -> dict:
    st = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        st["cuda"] = torch.cuda.get_rng_state_all()
    return st


def set_rng_state(st: dict) -> None:
    random.setstate(st["python"])
    np.random.set_state(st["numpy"])
    torch.set_rng_state(st["torch"])
    if "cuda" in st and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(st["cuda"])


def list_checkpoints(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.name.startswith(PREFIX) and (p / "state.json").is_file())


def resume_or_clear(out: Path) -> bool:
    """For a caller that reruns a stage into ``out``: True when ``out`` holds a finished checkpoint to resume
    from; otherwise whatever an unfinished run left in ``out`` is removed and False is returned."""
    out = Path(out)
    if list_checkpoints(out / "checkpoints"):
        return True
    shutil.rmtree(out, ignore_errors=True)
    return False


def checkpoint_step(ckpt: Path) -> int:
    """The update count of a checkpoint folder ``update-XXXXXXXX``."""
    return int(Path(ckpt).name[len(PREFIX):])


def export_model(accelerator, model, dest: Path, tokenizer=None) -> None:
    """``save_pretrained`` of the (unwrapped) model into ``dest`` on the main process, gathering the full state
    dict first under FSDP / DeepSpeed (a collective: every process calls this)."""
    from accelerate.utils import DistributedType

    unwrapped = accelerator.unwrap_model(model)
    if accelerator.distributed_type in (DistributedType.FSDP, DistributedType.DEEPSPEED):
        sd = accelerator.get_state_dict(model)
        if accelerator.is_main_process:
            unwrapped.save_pretrained(str(dest), state_dict=sd)
    elif accelerator.is_main_process:
        unwrapped.save_pretrained(str(dest))
    if accelerator.is_main_process and tokenizer is not None:
        tokenizer.save_pretrained(str(dest))


def save_checkpoint(root: Path, *, update: int, accelerator, model, optimizer, scheduler, state: dict,
                    keep: int, protect: set[int] = frozenset(), export: tuple[str, object] | None = None) -> Path:
    """Write checkpoint ``update`` (atomically), then delete all but the newest ``keep`` except the updates in
    ``protect``. ``export = (name, tokenizer)`` also writes the loadable model as ``<checkpoint>/<name>``."""
    final = root / f"{PREFIX}{update:08d}"
    tmp = root / f".tmp-{PREFIX}{update:08d}"
    if accelerator.is_main_process:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    accelerator.wait_for_everyone()
    if sharded(accelerator):
        accelerator.save_state(str(tmp / "accelerate"))
    elif accelerator.is_main_process:
        unwrapped = accelerator.unwrap_model(model)
        trainable = {n: p.detach().cpu().clone() for n, p in unwrapped.named_parameters() if p.requires_grad}
        torch.save(trainable, tmp / "trainable.pt")
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    if export is not None:
        export_model(accelerator, model, tmp / export[0], export[1])
    if accelerator.is_main_process:
        torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
    torch.save(rng_state(), tmp / f"rng-{accelerator.process_index}.pt")
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        (tmp / "state.json").write_text(json.dumps(dict(state, world_size=accelerator.num_processes), indent=1))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        for old in list_checkpoints(root)[:-keep]:
            if checkpoint_step(old) not in protect:
                shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return final


def load_checkpoint(ckpt: Path, *, accelerator, model, optimizer, scheduler) -> dict:
    """Restore everything saved by :func:`save_checkpoint`; returns the ``state.json`` dict."""
    state = json.loads((ckpt / "state.json").read_text())
    if state.get("world_size") != accelerator.num_processes:
        raise ValueError(f"{ckpt} was written by {state.get('world_size')} processes, this run has "
                         f"{accelerator.num_processes}: exact resume needs the same number")
    if sharded(accelerator):
        accelerator.load_state(str(ckpt / "accelerate"))
    else:
        unwrapped = accelerator.unwrap_model(model)
        trainable = torch.load(ckpt / "trainable.pt", map_location="cpu")
        params = dict(unwrapped.named_parameters())
        missing = [n for n, p in params.items() if p.requires_grad and n not in trainable]
        if missing:
            raise ValueError(f"{ckpt}: checkpoint lacks trainable parameters {missing[:3]}... (different LoRA config?)")
        with torch.no_grad():
            for n, t in trainable.items():
                params[n].copy_(t)
        optimizer.load_state_dict(torch.load(ckpt / "optimizer.pt", map_location="cpu", weights_only=False))
    scheduler.load_state_dict(torch.load(ckpt / "scheduler.pt", weights_only=False))
    set_rng_state(torch.load(ckpt / f"rng-{accelerator.process_index}.pt", weights_only=False))
    return state
