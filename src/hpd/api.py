"""hpd's front door for Python (notebooks, scripts): the pipeline's stages as functions over run folders.

``import hpd.api as hpd`` (or ``from hpd import api``); each function is a thin wrapper over the library function
the matching ``hpd`` command calls, writes the same run folder and returns what that function returns::

    hpd.demo("runs/demo", model="tiny")                              # every stage on the built-in benchmark
    hpd.replay("runs/demo/data", "runs/bds", limit=50)               # boundaries + control documents
    hpd.teach("runs/bds", "runs/teach", teacher="hf", model="base/") # verified teacher targets
    hpd.train("configs/tiny-cpu.yaml", "runs/teach", "runs/train")   # the three-view LoRA student
    hpd.evaluate("base/", "runs/demo/data", "runs/eval", adapter="runs/train/adapter")
    hpd.report("runs/report", {"HPD": "runs/eval"})                  # the paper's table layout
    hpd.metrics("runs/eval")                                         # a finished evaluation's metrics

(README.md, "Python API".)

``import hpd`` itself stays light (the version and Pi constants): this module sits on the top floor of the
layers (docs/architecture.md) and imports each stage only when its function runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

PathLike = str | os.PathLike

__all__ = ["replay", "teach", "train", "evaluate", "report", "demo", "metrics"]


def replay(data: PathLike | None, out: PathLike, *, split_file: PathLike | None = None, split: str | None = None,
           limit: int | None = None, sample: int | None = None, seed: int = 0, pool_k: int | None = 20,
           max_turns: int | str | None = "auto", privileges: Sequence[str] = ("runtime", "plan", "oracle"),
           workers: int = 1, overwrite: bool = False, progress=None) -> dict:
    """``hpd replay``: drive each task's reference through the harness into ``out`` (boundary shards with their
    control documents); ``data``: a TRAJECT-Bench-shaped folder (None: ``$HPD_TRAJECT_DIR``). Returns
    ``{"manifest", "stats"}`` (:func:`hpd.boundary.run_replay`)."""
    from hpd.boundary import ReplayConfig, run_replay

    cfg = ReplayConfig(pool_k=pool_k, max_turns=max_turns, privileges=tuple(privileges))
    return run_replay(data, out, cfg, split_file=split_file, split=split, limit=limit, sample=sample, seed=seed,
                      workers=workers, overwrite=overwrite, progress=progress, command="hpd.api.replay")


def teach(boundaries: PathLike, out: PathLike, *, teacher: str = "auto", model: PathLike | None = None,
          privilege: str = "plan", k: int = 2, attempts: int = 5, seed: int = 0,
          split_file: PathLike | None = None, split: str = "train", limit: int | None = None,
          max_new_tokens: int = 256, overwrite: bool = False, **teacher_options: Any):
    """``hpd teach``: ``k`` proposals per attempt from ``teacher`` (auto | hf | vllm | openai | oracle | reference
    ...; ``auto``: :func:`hpd.teacher.factory.resolve_teacher`; :func:`hpd.teacher.factory.build_teacher`, which
    takes ``teacher_options`` such as ``dtype``), each verified on
    a fork of the harness at the boundaries of the replay folder ``boundaries``; writes ``out`` (targets.jsonl,
    diagnostics) and returns the :class:`hpd.teacher.run.TeachResult`."""
    from hpd.teacher.boundaries import load_items
    from hpd.teacher.factory import build_teacher, resolve_teacher
    from hpd.teacher.run import TeachConfig
    from hpd.teacher.run import teach as run_teach

    if teacher == "oracle":
        privilege = "oracle"        # the oracle teacher reads the oracle-level document by definition
    items, info = load_items(boundaries, split=split_file, split_name=split, limit=limit, privilege=privilege)
    teacher = resolve_teacher(teacher, str(model) if model else None)
    t = build_teacher(teacher, model=str(model) if model else None, privilege=privilege,
                      max_new_tokens=max_new_tokens, **teacher_options)
    manifest = {"command": "hpd.api.teach", "seed": seed, "teacher": teacher, "boundaries_info": info,
                "result_fields": {"model": str(model) if model else None, "split": split if split_file else None,
                                  "limit": limit}}
    return run_teach(items, t, TeachConfig(k=k, attempts=attempts, privilege=privilege, seed=seed), out,
                     manifest=manifest, overwrite=overwrite)


def train(config: Any, data: PathLike | list[dict] | None, out: PathLike, *, method: str = "hpd",
          overrides: Sequence[str] = (), resume: bool = False) -> Path | None:
    """``hpd train``: ``config`` (a file such as ``configs/tiny-cpu.yaml``, a :class:`hpd.train.config.TrainConfig`
    or a dict; ``overrides``: ``KEY=VALUE`` texts as on the command line) trained on ``data`` (a teach folder, its
    ``targets.jsonl``, a list of records, or None: the config's ``data``) into ``out``. ``method`` ``sft`` | ``hpd``
    is the three-view trainer; ``dpo`` | ``grpo`` | ``gspo`` | ``gigpo`` a baseline (:mod:`hpd.methods`: its data
    comes from its config). Returns the adapter (or whole model) folder."""
    from hpd.methods import TRAINER_METHODS, method_module

    if overrides and not isinstance(config, (str, os.PathLike)):
        raise ValueError("overrides are KEY=VALUE texts for a config file; change a config object in code instead")
    if method not in TRAINER_METHODS:
        if data is not None:
            raise ValueError(f"{method} reads its data from its config (data.teach / data.path); give data=None")
        mod = method_module(method)
        cfg = mod.load_config(config, list(overrides)) if isinstance(config, (str, os.PathLike)) else config
        return mod.run(cfg, out, resume=resume, command="hpd.api.train")
    from hpd.train.config import load_config
    from hpd.train.trainer import train as run_train

    if isinstance(config, (str, os.PathLike)):
        config = load_config(config, list(overrides))
    records, data_path = (data, None) if isinstance(data, list) else (None, data)
    if data_path is not None and Path(data_path).is_dir():
        data_path = Path(data_path) / "targets.jsonl"
    return run_train(records, config, out, resume=resume, data_path=str(data_path) if data_path else None,
                     command="hpd.api.train")


def evaluate(model: PathLike | None, data: PathLike | None, out: PathLike, *, adapter: PathLike | None = None,
             split_file: PathLike | None = None, split: str | None = None, limit: int | None = None,
             pool_k: int = 20, max_turns: int = 15, max_new_tokens: int = 256, temperature: float = 0.0,
             seed: int = 0, backend: str = "hf", dtype: str = "auto", overwrite: bool = False) -> dict:
    """``hpd eval``: native rollouts of ``model`` (a model folder, with a PEFT ``adapter``; ``"reference"`` or None:
    the gold actions) in the harness on the tasks of ``data`` (``split`` of ``split_file``, the first ``limit``),
    with Action-Acc; writes ``out`` (metrics.json, tasks.jsonl) and returns the metrics
    (:func:`hpd.eval.variant.evaluate_variant`)."""
    from hpd.bench.loader import load_bench
    from hpd.bench.split import select
    from hpd.eval.variant import evaluate_variant, make_episode_policy
    from hpd.runfolder import prepare_out

    if (split is None) != (split_file is None):
        raise ValueError("split and split_file go together")
    bench = load_bench(data)
    tasks = select(bench.tasks, split_file, split) if split_file is not None else bench.tasks
    tasks = tasks[:limit] if limit is not None else tasks
    if model is None or str(model) == "reference":
        policy = make_episode_policy("reference")
    else:
        policy = make_episode_policy("model", model=str(model), adapter=str(adapter) if adapter else None,
                                     backend=backend, temperature=temperature, max_new_tokens=max_new_tokens,
                                     seed=seed, dtype=dtype)
    try:   # the backend stops however the run ends, as in `hpd eval`
        prepare_out(out)
        return evaluate_variant(bench, tasks, policy, out, pool_k=pool_k, max_turns=max_turns, split=split,
                                config={"split": split, "split_file": str(split_file) if split_file else None,
                                        "limit": limit},
                                inputs={"split_file": split_file, "model": model, "adapter": adapter},
                                command="hpd.api.evaluate", overwrite=overwrite)
    finally:
        policy.close()


def report(out: PathLike, runs: Mapping[str, PathLike] | Sequence[PathLike], *, table: str = "methods") -> dict:
    """``hpd report``: the paper's ``table`` (1 | methods, 2 | components, 5 | seeds, 6 | checkpoints, 7 | weights,
    8 | sizes) from finished run folders (evaluations, demo cells, studies), ``runs`` as ``{label: folder}`` or a
    list of folders; writes ``out`` (tableN-<key>.md/.json, plots) and returns ``{table file: {"rows",
    "missing"}}`` (:func:`hpd.report.paper.write_report`)."""
    from hpd.report.paper import write_report

    pairs = list(runs.items()) if isinstance(runs, Mapping) else [(None, f) for f in runs]
    return write_report({table: [(label, Path(f)) for label, f in pairs]}, out)


def demo(out: PathLike = "runs/demo", model: str | None = None, **options: Any) -> dict:
    """``hpd demo``: every stage on the built-in benchmark (or ``data=``) in the run folder ``out``, with
    ``model``'s defaults (:data:`hpd.demo.MODEL_DEFAULTS`; default :data:`hpd.demo.DEFAULT_MODEL`) and any
    :class:`hpd.demo.DemoConfig` field as an option; returns ``results.json``'s document. A killed demo resumes."""
    from hpd.demo import DEFAULT_MODEL, Demo, config_for_model

    return Demo(config_for_model(model or DEFAULT_MODEL, out=Path(out), **options)).run()


def metrics(folder: PathLike) -> dict:
    """The metrics of a finished evaluation folder (``metrics.json``; :func:`hpd.eval.read.read_metrics`)."""
    from hpd.eval.read import read_metrics

    return read_metrics(folder)
