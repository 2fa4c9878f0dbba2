"""The three-view LoRA trainer (T/I/R views, exact cycle schedule, exact resume, accelerate).

Entry point: :func:`train` (``train(records, config, out_dir, resume=False) -> adapter dir``);
config model :class:`TrainConfig` / :func:`load_config`; schedule :class:`Schedule` / :func:`cycle`.
"""

from .config import TrainConfig, apply_overrides, load_config
from .schedule import Phase, Schedule, cycle


def train(*args, **kwargs):
    """See :func:`hpd.train.trainer.train` (imported lazily: it pulls torch/transformers/accelerate)."""
    from .trainer import train as _train
    return _train(*args, **kwargs)


__all__ = ["train", "TrainConfig", "load_config", "apply_overrides", "Schedule", "Phase", "cycle"]
