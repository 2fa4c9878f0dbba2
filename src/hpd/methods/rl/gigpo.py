"""GiGPO (Feng et al. 2025, "Group-in-Group Policy Optimization for LLM Agent Training") in hpd's harness:
``hpd train --method gigpo``. Follows verl-agent's ``gigpo/core_gigpo.py`` (``compute_gigpo_outcome_advantage``,
``episode_norm_reward``, ``build_step_group``, ``step_norm_reward``, ``compute_step_discounted_returns``).

Two levels of groups over the ``G`` episodes of one task (:func:`hpd.methods.rl.advantage.gigpo_advantages`):

1. episode groups (Eq. 3): ``A^E_i = (R_i - mean R) / F_norm``, ``R_i = sum_t r_t``;
2. step groups (Eq. 6): the steps, across the group's episodes and across time, taken in the SAME harness state.
   The anchor is the exact hash of the canonical state (:func:`hpd.methods.rl.rollout.anchor_hash`: the distinct
   successful tool results so far), so every episode's first step shares the initial state, and two episodes that
   obtained the same results (in any order, with any failed calls in between) share a later one;
3. step advantages (Eq. 7): the discounted return ``R_t = r_t + gamma R_{t+1}`` (Eq. 5) normalised within its step
   group (a group of one: 0);
4. ``A_{i,t} = A^E_i + omega * A^S_{i,t}`` (Eq. 8) on every token of step ``t``; the loss is GRPO's token-level
   clipped surrogate (verl-agent trains GiGPO with verl's PPO loss).

Defaults and their sources: gamma 0.95, omega 1.0, ``F_norm`` = std (``mode=mean_std_norm``) and group size 8
(verl-agent ``examples/gigpo_trainer/run_alfworld.sh``; ``norm: mean`` is verl-agent's ``mean_norm``), epsilon 1e-6
(``core_gigpo.py``), lr 1e-6 (same script), clip 0.2 (verl's PPO default), one update per rollout batch, KL off
(verl-agent's script uses a KL loss of 0.01: set ``algo.beta=0.01`` for it; it is off here like the other methods).

Departures (also in the manifest): the per-step reward is hpd's (compliance share per turn, outcome on the last
turn; :func:`hpd.methods.rl.rollout.episode_reward`) instead of an environment reward; episode statistics count each
trajectory once (the paper's Eq. 3; verl-agent's default ``compute_mean_std_cross_steps=True`` counts it once per
step); the anchor is hpd's canonical tool-result state (verl-agent's is the environment's text observation), with no
similarity-based grouping; each model turn's prompt is the whole history (verl-agent keeps a short history window).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from . import advantage as A
from .config import AlgoSettings, RLConfig, _Strict, load
from .core import RLTrainer, train_method
from .rollout import Episode


class GiGPOSettings(_Strict):
    gamma: float = Field(0.95, ge=0.0, le=1.0, description="Discount of the step returns (verl-agent algorithm.gamma).")
    omega: float = Field(1.0, ge=0.0, description="Weight of the step advantage (verl-agent gigpo.step_advantage_w).")
    norm: Literal["mean_std", "mean"] = Field("mean_std", description="F_norm: std (verl-agent mode=mean_std_norm, "
                                              "run_alfworld.sh) or 1 (mean_norm).")


class GiGPOAlgo(AlgoSettings):
    """GiGPO's defaults: verl's PPO clip 0.2, one update per rollout batch."""

    scale_rewards: Literal["group"] = Field("group", description="Fixed for GiGPO: its normalisation is gigpo.norm "
                                            "(both levels).")


class Config(RLConfig):
    """GiGPO's settings: :class:`~hpd.methods.rl.config.RLConfig` + ``gigpo`` (module doc)."""

    name: str = "gigpo"
    method: Literal["gigpo"] = Field("gigpo", description="Fixed: this module's method.")
    algo: GiGPOAlgo = GiGPOAlgo()
    gigpo: GiGPOSettings = GiGPOSettings()


class GiGPOTrainer(RLTrainer):
    """The shared recipe with GiGPO's two-level advantages."""

    method = "gigpo"
    departures = [
        "GiGPO: step rewards are hpd's (per-turn compliance share, outcome on the last turn); episode statistics "
        "count each trajectory once (paper Eq. 3, not verl-agent's per-step default); the anchor is hpd's canonical "
        "state (distinct successful tool results), exact hash only.",
    ]

    def advantages(self, episodes: list[Episode]) -> list[list[float]]:
        g = self.cfg.gigpo
        groups, anchors = [e.slot for e in episodes], [[t.anchor for t in e.turns] for e in episodes]
        self.step_groups = A.step_group_sizes(groups, anchors)
        return A.gigpo_advantages(groups, [e.step_rewards for e in episodes], anchors, gamma=g.gamma, omega=g.omega,
                                  eps=self.cfg.algo.adv_eps, use_std=g.norm == "mean_std")


def load_config(path: str | Path, overrides: list[str] | None = None, update: dict | None = None) -> Config:
    """``Config`` from a YAML/TOML file + ``KEY=VALUE`` overrides + ``update`` (pydantic errors on bad input)."""
    return load(Config, path, overrides, update)


def run(cfg: Config, out: str | Path, *, resume: bool = False, command: str | None = None) -> Path | None:
    """Train; returns ``out/adapter`` (``out/model`` under full fine-tuning), None if ``stop_after`` ended it."""
    return train_method(GiGPOTrainer, cfg, out, resume=resume, command=command)
