"""GSPO (Zheng et al. 2025, "Group Sequence Policy Optimization") in hpd's harness: ``hpd train --method gspo``.

Advantages are GRPO's (group-normalised episode reward). The importance ratio is the sequence's, length-normalised:
``s_i = (pi(y_i | x) / pi_old(y_i | x))^(1/|y_i|) = exp(1/|y_i| sum_t log(pi(y_t) / pi_old(y_t)))`` (the paper's s_i),
clipped as a whole, ``L = -1/N sum_i min(s_i A_i, clip(s_i, 1 - eps_low, 1 + eps_high) A_i)`` (Eq. 5), i.e. TRL's
``GRPOTrainer`` with ``importance_sampling_level="sequence"``, ``loss_type="grpo"``
(:func:`hpd.methods.rl.loss.sequence_clip_loss`; the rest is :mod:`hpd.methods.rl.core`).

Defaults and their sources: clip range (3e-4, 4e-4) and each rollout batch split into 4 mini-batches (GSPO v2
sec. 5.1; TRL's paper index: ``epsilon=3e-4, epsilon_high=4e-4, steps_per_generation=4``), KL off (GSPO sets no
KL; TRL ``beta=0.0``), group size 8 (TRL). The paper does not state its learning rate; lr 1e-6 is GRPO's
(DeepSeekMath), the baseline GSPO is compared with. With more than one mini-batch, the later ones are off-policy,
which is where the sequence ratio and its tight clip act (with one, the ratio is 1 and GSPO's gradient equals a
length-normalised policy gradient).

Departures (also in the manifest): a sequence ``y_i`` is one model turn of a multi-turn episode (the paper's
responses are single completions; its ``x`` is here the turn's full prompt, history included), so an episode
contributes one ratio per turn; the reward is hpd's; the normalisation epsilon is 1e-6.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import torch
from pydantic import Field

from .config import AlgoSettings, RLConfig, load
from .core import RLTrainer, train_method
from .loss import sequence_clip_loss


class GSPOAlgo(AlgoSettings):
    """GSPO's defaults (GSPO v2 sec. 5.1; TRL paper index)."""

    clip_low: float = Field(3e-4, gt=0.0, description="Left clip range of the sequence ratio (GSPO sec. 5.1).")
    clip_high: float = Field(4e-4, gt=0.0, description="Right clip range of the sequence ratio (GSPO sec. 5.1).")
    minibatches: int = Field(4, gt=0, description="Each rollout batch split into 4 mini-batches (GSPO sec. 5.1).")


class Config(RLConfig):
    """GSPO's settings: :class:`~hpd.methods.rl.config.RLConfig` with GSPO's defaults (module doc)."""

    name: str = "gspo"
    method: Literal["gspo"] = Field("gspo", description="Fixed: this module's method.")
    algo: GSPOAlgo = GSPOAlgo()


class GSPOTrainer(RLTrainer):
    """The shared recipe with GSPO's sequence-level ratio and clipping."""

    method = "gspo"
    departures = ["GSPO: a sequence y_i is one model turn (its prompt holds the episode's history)."]

    def sequence_loss(self, logp: torch.Tensor, old: torch.Tensor, adv: float) -> tuple[torch.Tensor, dict]:
        return sequence_clip_loss(logp, old, adv, self.cfg.algo.clip_low, self.cfg.algo.clip_high)


def load_config(path: str | Path, overrides: list[str] | None = None, update: dict | None = None) -> Config:
    """``Config`` from a YAML/TOML file + ``KEY=VALUE`` overrides + ``update`` (pydantic errors on bad input)."""
    return load(Config, path, overrides, update)


def run(cfg: Config, out: str | Path, *, resume: bool = False, command: str | None = None) -> Path | None:
    """Train; returns ``out/adapter`` (``out/model`` under full fine-tuning), None if ``stop_after`` ended it."""
    return train_method(GSPOTrainer, cfg, out, resume=resume, command=command)
