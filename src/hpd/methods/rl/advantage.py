"""Group-relative advantages: GRPO/GSPO's episode groups and GiGPO's episode + anchor-state step groups.

Plain Python on lists (the numbers are few; the tests recompute them by hand).

* :func:`group_normalize`: ``(x - mean_g) / (std_g + eps)`` within each group ``g`` (``use_std=False``:
  ``x - mean_g``). ``std`` is the unbiased sample std (``torch.std``, as in verl, verl-agent and TRL's
  ``nanstd``). A group of one gets advantage 0 (verl-agent ``step_norm_reward``: its mean is itself).
* :func:`grpo_advantages`: one scalar per episode, normalised over the ``G`` episodes of its task
  (DeepSeekMath sec. 4.1.2, outcome supervision; TRL ``scale_rewards="group"``); every token of every model
  turn of the episode gets it. ``scale`` follows TRL 1.16's ``scale_rewards``: ``group`` (the paper's), ``batch``
  (the group's mean subtracted, then divided by the std of the whole batch's rewards; PPO Lite) or ``none``
  (the group's mean subtracted only; Dr. GRPO, which argues the group std biases updates by question difficulty).
* :func:`gigpo_advantages` (Feng et al. 2025; verl-agent ``gigpo/core_gigpo.py``):
  1. episode level (Eq. 3): ``R_i = sum_t r_t`` normalised over the ``G`` trajectories of the task group, each
     trajectory counted once (the paper's formula; verl-agent's default ``compute_mean_std_cross_steps=True``
     counts each trajectory once per step instead, which weights long episodes more; we follow the paper);
  2. step returns (Eq. 5, verl-agent ``compute_step_discounted_returns``): ``R_t = r_t + gamma * R_{t+1}``;
  3. anchor groups (Eq. 6, ``build_step_group`` without similarity): the steps of one task group whose anchor
     state hash is identical, across trajectories and across time steps;
  4. step level (Eq. 7, ``step_norm_reward``): ``R_t`` normalised within its anchor group;
  5. combination (Eq. 8): ``A = A^E + omega * A^S``, broadcast over the step's tokens.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Hashable, Sequence


def _mean_std(xs: list[float]) -> tuple[float, float]:
    """Mean and unbiased sample std (1.0 for a single value: its deviation is 0 anyway)."""
    mean = sum(xs) / len(xs)
    return mean, math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 1.0


def group_normalize(values: Sequence[float], groups: Sequence[Hashable], *, eps: float = 1e-6,
                    use_std: bool = True) -> list[float]:
    """Normalise each value within its group (module doc)."""
    members: dict[Hashable, list[float]] = defaultdict(list)
    for v, g in zip(values, groups):
        members[g].append(float(v))
    stats = {g: _mean_std(xs) for g, xs in members.items()}
    return [(float(v) - stats[g][0]) / ((stats[g][1] + eps) if use_std else 1.0) for v, g in zip(values, groups)]


def grpo_advantages(rewards: Sequence[float], groups: Sequence[Hashable], *, eps: float = 1e-6,
                    scale: str = "group") -> list[float]:
    """One advantage per episode: its reward less its task group's mean, divided by the std ``scale`` names
    (module doc)."""
    if scale == "group":
        return group_normalize(rewards, groups, eps=eps, use_std=True)
    centred = group_normalize(rewards, groups, use_std=False)
    if scale == "none":
        return centred
    if scale != "batch":
        raise ValueError(f"scale must be group, batch or none, got {scale!r}")
    std = _mean_std([float(r) for r in rewards])[1] if rewards else 0.0   # one reward: centred to 0 anyway
    return [a / (std + eps) for a in centred]


def discounted_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """``R_t = r_t + gamma * R_{t+1}`` from the last step back (GiGPO Eq. 5)."""
    out, running = [0.0] * len(rewards), 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + gamma * running
        out[t] = running
    return out


def gigpo_advantages(groups: Sequence[Hashable], step_rewards: Sequence[Sequence[float]],
                     anchors: Sequence[Sequence[Hashable]], *, gamma: float = 0.95, omega: float = 1.0,
                     eps: float = 1e-6, use_std: bool = True) -> list[list[float]]:
    """Per episode ``i`` (task group ``groups[i]``), per step ``t``: ``A^E_i + omega * A^S_{i,t}`` (module doc).

    ``step_rewards[i][t]`` and ``anchors[i][t]`` (the hash of the state the step acted in) are per step."""
    episode = group_normalize([sum(r) for r in step_rewards], groups, eps=eps, use_std=use_std)
    returns = [discounted_returns(r, gamma) for r in step_rewards]
    flat_ret, flat_key, shape = [], [], []
    for i, (ret, anc) in enumerate(zip(returns, anchors)):
        if len(ret) != len(anc):
            raise ValueError(f"episode {i}: {len(ret)} step rewards but {len(anc)} anchors")
        flat_ret.extend(ret)
        flat_key.extend((groups[i], a) for a in anc)
        shape.append(len(ret))
    step = group_normalize(flat_ret, flat_key, eps=eps, use_std=use_std)
    out, k = [], 0
    for i, n in enumerate(shape):
        out.append([episode[i] + omega * step[k + t] for t in range(n)])
        k += n
    return out


def step_group_sizes(groups: Sequence[Hashable], anchors: Sequence[Sequence[Hashable]]) -> dict[int, int]:
    """How many anchor groups have each size (verl-agent's ``summarize_group_size``, for the log)."""
    count: dict[tuple, int] = defaultdict(int)
    for g, anc in zip(groups, anchors):
        for a in anc:
            count[(g, a)] += 1
    sizes: dict[int, int] = defaultdict(int)
    for n in count.values():
        sizes[n] += 1
    return dict(sorted(sizes.items()))
