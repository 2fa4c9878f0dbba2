"""The paper's Table 1 baselines inside one ``hpd demo`` cell (``hpd demo --baselines``).

Each baseline is trained by its own method module (:mod:`hpd.methods`) from the config shipped for the
model's kind (``configs/methods/<method>-tiny-cpu.yaml`` or ``-smollm2.yaml``: the single source of each
method's hyperparameters and of their sources), with the cell's paths, seed and budget written over it (a nested
mapping built from the cell's typed config, :func:`update`, validated once with the file):

* DPO: pairs from the cell's teach folder (verified candidates against the ones the harness rejected),
  starting from the base model like SFT and HPD, or with ``dpo_start="sft"`` (``hpd demo --dpo-start sft``) from
  the cell's SFT adapter, which is then its reference (the DPO paper's recipe);
* GRPO, GSPO, GiGPO: online RL in the harness on the cell's training tasks, starting from the cell's SFT
  model (the usual RL recipe), with the demo's tool pool, turn budget and per-turn token limit. Their rollouts
  sample on the engine the cell generates with (``engine``: ``hpd.demo.resolve_backend``, vLLM for a real model
  where it runs; ``rollout.engine``), as its teacher and evaluations do.

Budget: the same number of optimizer updates as SFT / HPD (``DemoConfig.updates``) unless
``baseline_updates`` says otherwise (a named departure, recorded in the manifest). An RL update is one
rollout batch (tasks x group), so equal updates are not equal compute; the report lists the time of each.
"""

from __future__ import annotations

from pathlib import Path

BASELINES = {"DPO": "dpo", "GRPO": "grpo", "GSPO": "gspo", "GiGPO": "gigpo"}   # table row -> method


def shipped_config(method: str, kind: str) -> Path:
    """The config shipped for ``method`` on a ``kind`` ("tiny" | "real") model (:mod:`hpd.resources`)."""
    from hpd.resources import shipped_config as shipped

    return shipped("methods", f"{method}-{'tiny-cpu' if kind == 'tiny' else 'smollm2'}.yaml")


def _model(base: Path, start: Path | None) -> dict:
    """Where a run starts: the base model, or a trained SFT (an adapter on ``base``, or a whole model)."""
    if start is None:
        return {"path": str(base)}
    if (Path(start) / "adapter_config.json").is_file():
        return {"path": str(base), "adapter": str(start)}
    return {"path": str(start), "adapter": None}


def update(method: str, cfg, *, base: Path, sft: Path | None, data_dir: Path, split_file: Path,
           teach_dir: Path, boundaries_dir: Path, engine: str = "hf") -> dict:
    """What one demo cell writes over the shipped config (a nested mapping, :func:`hpd.train.config.merge`): its
    paths, seed, budget, LoRA and dtype, from the cell's :class:`hpd.demo.DemoConfig`, and the RL rollouts'
    ``engine`` (the cell's resolved generation engine, ``hf`` or ``vllm``)."""
    from hpd.policy.dtype import precision_name

    lora: dict = {"enabled": not cfg.full_finetune}
    if not cfg.full_finetune:
        lora.update(r=cfg.lora_r, alpha=cfg.lora_alpha)
    common = {"name": method, "seed": cfg.seed, "updates": cfg.baseline_updates or cfg.updates, "lora": lora}
    precision = {"precision": precision_name(getattr(cfg, "dtype", "auto"))}
    if method == "dpo":
        start = sft if getattr(cfg, "dpo_start", "base") == "sft" else None
        return {**common, "model": {**precision, **_model(base, start)},
                "data": {"teach": str(teach_dir), "boundaries": str(boundaries_dir), "held_out_tasks": 0,
                         "max_length": cfg.max_length},
                "batch": {"global_batch": cfg.global_batch}}
    turns = cfg.eval_turns or cfg.max_turns or 8
    return {**common, "model": {**precision, **_model(base, sft)},
            "data": {"path": str(data_dir), "split_file": str(split_file), "split": "train", "limit": None,
                     "pool_k": cfg.pool_k, "max_turns": turns},
            "rollout": {"max_new_tokens": cfg.max_new_tokens, "engine": engine}}


def method_config(method: str, cfg, *, kind: str, **paths):
    """The method's validated config: the shipped one with the cell's :func:`update` written over it."""
    from hpd.methods import method_module

    return method_module(method).load_config(shipped_config(method, kind), update=update(method, cfg, **paths))


def train_baseline(name: str, cfg, out: Path, *, kind: str, command: str, **paths) -> Path:
    """Train the baseline ``name`` (a key of :data:`BASELINES`) into ``out``; resumes an unfinished run."""
    from hpd.methods import method_module
    from hpd.train.checkpoint import resume_or_clear

    method = BASELINES[name]
    mcfg = method_config(method, cfg, kind=kind, **paths)
    resume = resume_or_clear(out)
    trained = method_module(method).run(mcfg, out, resume=resume, command=command)
    if trained is None:
        raise RuntimeError(f"{name}: the run in {out} stopped early")
    return Path(trained)
