"""GRPO (Shao et al. 2024, DeepSeekMath sec. 4.1) in hpd's harness: ``hpd train --method grpo``.

For each training task, ``G`` episodes are sampled by the current policy; each episode's reward is normalised
within its group, ``A_i = (R_i - mean(R)) / (std(R) + eps)`` (outcome supervision, sec. 4.1.2), and every token
the policy generated in that episode gets ``A_i``. The objective is PPO's clipped surrogate with a per-token ratio
``r_t = pi(y_t | x, y_<t) / pi_old(y_t | x, y_<t)``,
``L = -1/N sum_seq 1/|y| sum_t min(r_t A, clip(r_t, 1 - eps, 1 + eps) A) [+ beta * KL_k3]``,
as TRL's ``GRPOTrainer`` computes it with ``loss_type="grpo"``, ``importance_sampling_level="token"``
(:func:`hpd.methods.rl.loss.token_clip_loss`; the rest is :mod:`hpd.methods.rl.core`).

Defaults and their sources: clip eps 0.2 (TRL ``GRPOConfig.epsilon``; PPO's value), one policy update per
exploration stage (DeepSeekMath; TRL ``num_iterations=1``, so the ratio is 1 at the update and the gradient is
the plain group-baselined policy gradient), lr 1e-6 (DeepSeekMath), group size 8 (TRL ``num_generations``),
KL off (TRL ``beta=0.0``; DeepSeekMath used 0.04: set ``algo.beta=0.04``), temperature 1 (TRL).

Departures from the paper (also in the manifest): an episode is multi-turn, so each model turn is one sequence
``o_i`` of the ``1/G sum_i 1/|o_i|`` average (the paper's outputs are single completions); the reward is hpd's
(:mod:`hpd.methods.rl.rollout`); epsilon in the normalisation is 1e-6 (verl's; TRL 1e-4; the paper names none);
LoRA instead of full fine-tuning on real models (the tiny CPU config fine-tunes fully). TRL's ``GRPOTrainer`` is not
used: it cannot drive hpd's Pi harness with hpd's renderer (:mod:`hpd.methods.rl.core`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from .config import AlgoSettings, RLConfig, load
from .core import RLTrainer, train_method


class GRPOAlgo(AlgoSettings):
    """GRPO's defaults: clip 0.2 (TRL ``epsilon``), one update per rollout batch (DeepSeekMath; TRL
    ``num_iterations=1``)."""


class Config(RLConfig):
    """GRPO's settings: :class:`~hpd.methods.rl.config.RLConfig` with GRPO's defaults (module doc)."""

    name: str = "grpo"
    method: Literal["grpo"] = Field("grpo", description="Fixed: this module's method.")
    algo: GRPOAlgo = GRPOAlgo()


class GRPOTrainer(RLTrainer):
    """The shared recipe as is: group-normalised episode advantages, token-level clipped ratios."""

    method = "grpo"
    departures = ["GRPO: each model turn is one output o_i of the 1/G sum_i 1/|o_i| sum_t average."]


def load_config(path: str | Path, overrides: list[str] | None = None, update: dict | None = None) -> Config:
    """``Config`` from a YAML/TOML file + ``KEY=VALUE`` overrides + ``update`` (pydantic errors on bad input)."""
    return load(Config, path, overrides, update)


def run(cfg: Config, out: str | Path, *, resume: bool = False, command: str | None = None) -> Path | None:
    """Train; returns ``out/adapter`` (``out/model`` under full fine-tuning), None if ``stop_after`` ended it."""
    return train_method(GRPOTrainer, cfg, out, resume=resume, command=command)
