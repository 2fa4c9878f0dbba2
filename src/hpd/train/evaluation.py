"""Native evaluation of a checkpoint during training (``evaluation.steps`` in the train config).

After the checkpoint of a listed update is saved, the main process loads the base model with that
checkpoint's exported adapter (``checkpoints/update-XXXXXXXX/adapter``; the whole ``model/`` under full
fine-tuning) as a fresh policy and runs THE evaluation recipe, :func:`hpd.eval.variant.evaluate_variant`,
into ``<out>/evals/update-XXXXXXXX/`` (``metrics.json`` with TS, F1, Step-SR, RC, Exact, Action-Acc, a
manifest, the shard log). It is exactly ``hpd eval --model BASE --adapter <checkpoint>/adapter`` with the
config's settings, so a finished folder is reused on resume and a killed one resumes.

Only single-process runs evaluate in training: under several processes the others would wait at a
collective for the whole evaluation and hit the process-group timeout; there, run ``hpd eval --adapter``
on the kept checkpoints (``checkpoint.eval_steps``) instead.
"""

from __future__ import annotations

from pathlib import Path

from .checkpoint import PREFIX
from .config import EvaluationConfig


def eval_dir(out: Path, step: int) -> Path:
    return Path(out) / "evals" / f"{PREFIX}{step:08d}"


def is_done(out: Path, step: int) -> bool:
    from hpd.runfolder import RunFolderError, finished_manifest

    d = eval_dir(out, step)
    try:
        return (d / "metrics.json").is_file() and finished_manifest(d, "evaluation", required=True) is not None
    except RunFolderError:      # unfinished (or unreadable: the evaluation itself then says why)
        return False


def select_tasks(cfg: EvaluationConfig) -> tuple:
    """``(bench, tasks)`` the evaluation runs on; a one-line ``ValueError`` naming the bad ``evaluation.*`` field
    (the trainer checks this before the first update, not hours later)."""
    from hpd.bench.loader import load_bench
    from hpd.bench.split import SplitFileError, select

    try:
        bench = load_bench(cfg.data)
    except (FileNotFoundError, ValueError) as e:
        raise ValueError(f"evaluation.data: {e}") from None
    try:
        tasks = select(bench.tasks, cfg.split_file, cfg.split) if cfg.split_file else bench.tasks
    except SplitFileError as e:
        raise ValueError(f"evaluation.split_file: {e}") from None
    tasks = tasks[: cfg.limit] if cfg.limit else tasks
    if not tasks:
        raise ValueError("evaluation: no tasks selected (evaluation.split_file / split / limit)")
    return bench, tasks


def evaluate_checkpoint(cfg: EvaluationConfig, base_model: Path, exported: Path, out: Path, step: int,
                        seed: int = 0, dtype: str = "auto") -> dict:
    """Evaluate ``exported`` (an adapter dir on ``base_model``, or a whole model dir) natively, in ``dtype`` (the
    training's ``model.precision``); returns the summary that :func:`hpd.eval.variant.evaluate_variant` writes to
    ``<out>/evals/update-N/metrics.json``."""
    from hpd.eval.variant import evaluate_variant, make_episode_policy

    bench, tasks = select_tasks(cfg)
    is_adapter = (Path(exported) / "adapter_config.json").is_file()
    model, adapter = (str(base_model), str(exported)) if is_adapter else (str(exported), None)
    policy = make_episode_policy("model", model=model, adapter=adapter, backend=cfg.backend,
                                 max_new_tokens=cfg.max_new_tokens, seed=seed, dtype=dtype)
    try:
        return evaluate_variant(bench, tasks, policy, eval_dir(out, step), pool_k=cfg.pool_k,
                                max_turns=cfg.max_turns, split=cfg.split if cfg.split_file else None,
                                config={"step": step, "split_file": cfg.split_file, "limit": cfg.limit},
                                inputs={"model": model, "adapter": adapter},
                                command=f"hpd train (evaluation at update {step})")
    finally:
        policy.close()   # a vLLM engine (cfg.backend) stops here; hf's model goes with the reference
        del policy
        _free_cuda()


def _free_cuda() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()
