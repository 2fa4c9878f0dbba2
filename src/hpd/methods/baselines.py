"""The paper's Table 1 baselines inside one ``hpd demo`` cell (``hpd demo --baselines``).

Each baseline is trained by its own method module (:mod:`hpd.methods`) from the config shipped for the
model's kind (``configs/methods/<method>-tiny-cpu.yaml`` or ``-smollm2.yaml``: the single source of each
method's hyperparameters and of their sources), with the cell's paths, seed and budget written over it:

* DPO: pairs from the cell's teach folder (verified candidates against the ones the harness rejected),
  starting from the base model like SFT and HPD;
* GRPO, GSPO, GiGPO: online RL in the harness on the cell's training tasks, starting from the cell's SFT
  model (the usual RL recipe), with the demo's tool pool, turn budget and per-turn token limit.

Budget: the same number of optimizer updates as SFT / HPD (``DemoConfig.updates``) unless
``baseline_updates`` says otherwise (a named departure, recorded in the manifest). An RL update is one
rollout batch (tasks x group), so equal updates are not equal compute; the report lists the time of each.
"""

from __future__ import annotations

from pathlib import Path

BASELINES = {"DPO": "dpo", "GRPO": "grpo", "GSPO": "gspo", "GiGPO": "gigpo"}   # table row -> method
CONFIGS_DIR = Path(__file__).resolve().parents[3] / "configs" / "methods"


def shipped_config(method: str, kind: str) -> Path:
    """The config shipped for ``method`` on a ``kind`` ("tiny" | "real") model."""
    f = CONFIGS_DIR / f"{method}-{'tiny-cpu' if kind == 'tiny' else 'smollm2'}.yaml"
    if not f.is_file():
        raise FileNotFoundError(f"{f}: the {method} config for the {kind} model is missing")
    return f


def _model(base: Path, start: Path | None) -> list[str]:
    """Where a run starts: the base model, or a trained SFT (an adapter on ``base``, or a whole model)."""
    if start is None:
        return [f"model.path={base}"]
    if (Path(start) / "adapter_config.json").is_file():
        return [f"model.path={base}", f"model.adapter={start}"]
    return [f"model.path={start}", "model.adapter=null"]


def overrides(method: str, cfg, *, base: Path, sft: Path | None, data_dir: Path, split_file: Path,
              teach_dir: Path, boundaries_dir: Path) -> list[str]:
    """KEY=VALUE overrides that put one demo cell's paths, seed, budget and dtype on the shipped config."""
    from hpd.policy.dtype import precision_name

    lora = "false" if cfg.full_finetune else "true"
    common = [f"name={method}", f"seed={cfg.seed}", f"updates={cfg.baseline_updates or cfg.updates}",
              f"lora.enabled={lora}", f"model.precision={precision_name(getattr(cfg, 'dtype', 'auto'))}"]
    if not cfg.full_finetune:
        common += [f"lora.r={cfg.lora_r}", f"lora.alpha={cfg.lora_alpha}"]
    if method == "dpo":
        return common + _model(base, None) + [
            f"data.teach={teach_dir}", f"data.boundaries={boundaries_dir}", "data.held_out_tasks=0",
            f"data.max_length={cfg.max_length}", f"batch.global_batch={cfg.global_batch}"]
    turns = cfg.eval_turns or cfg.max_turns or 8
    return common + _model(base, sft) + [
        f"data.path={data_dir}", f"data.split_file={split_file}", "data.split=train", "data.limit=null",
        f"data.pool_k={cfg.pool_k}", f"data.max_turns={turns}", f"rollout.max_new_tokens={cfg.max_new_tokens}"]


def train_baseline(name: str, cfg, out: Path, *, kind: str, command: str, **paths) -> Path:
    """Train the baseline ``name`` (a key of :data:`BASELINES`) into ``out``; resumes an unfinished run."""
    from hpd.methods import method_module
    from hpd.train.checkpoint import resume_or_clear

    method = BASELINES[name]
    mod = method_module(method)
    mcfg = mod.load_config(shipped_config(method, kind), overrides(method, cfg, **paths))
    resume = resume_or_clear(out)
    trained = mod.run(mcfg, out, resume=resume, command=command)
    if trained is None:
        raise RuntimeError(f"{name}: the run in {out} stopped early")
    return Path(trained)
