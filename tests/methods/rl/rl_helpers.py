"""Helpers of the RL tests: the before/after mean reward and the smoke runs' config."""

from __future__ import annotations

EVAL_SAMPLES = 32      # temperature-1 episodes per task for a before/after mean reward (4 tasks: 128 episodes)
EVAL_KW = {"max_new_tokens": 48, "env_kwargs": {"k": 5}, "max_turns": 4}


def reward_of(model_dir, bench, seed: int = 0) -> dict:
    """Mean reward / TS / RC of ``EVAL_SAMPLES`` temperature-1 episodes per task (default reward weights)."""
    from hpd.methods.rl.config import RewardSettings
    from hpd.methods.rl.rollout import mean_reward
    from hpd.policy.backends.hf import HFPolicy

    return mean_reward(bench, bench.tasks, HFPolicy(str(model_dir)), weights=RewardSettings(), samples=EVAL_SAMPLES,
                       seed=seed, **EVAL_KW)


def smoke_config(method: str, start, keys_dir, **over):
    """The smoke runs' config: full fine-tuning of the tiny start, 4 tasks x 8 episodes per update."""
    from hpd.methods import method_module

    raw = {
        "model": {"path": str(start), "precision": "fp32"},
        "lora": {"enabled": False},
        "optim": {"lr": 3e-4},
        "data": {"path": str(keys_dir), "split_file": str(keys_dir / "split.json"), "pool_k": 5, "max_turns": 4},
        "rollout": {"max_new_tokens": 48},
        "batch": {"tasks": 4, "group_size": 8, "micro_batch_tokens": 4096},
        "updates": 16,
        "checkpoint": {"every": 8},
        "logging": {"progress": False, "tensorboard": False},
    }
    for k, v in over.items():
        node = raw
        *path, last = k.split("__")
        for p in path:
            node = node.setdefault(p, {})
        node[last] = v
    return method_module(method).Config.model_validate(raw)
