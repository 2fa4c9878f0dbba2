"""`hpd train --config FILE [--data RECORDS] --out DIR [--resume] [KEY=VALUE ...]` (logic: :mod:`hpd.train`,
:mod:`hpd.methods`). The same command is ``python -m hpd.train`` (``hpd/train/__main__.py``, for
``accelerate launch -m hpd.train``), which registers it through :func:`register_train`."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Optional

import typer

from hpd.cli.options import dtype_option


def load_or_exit(loader, config: Path, overrides: list[str] | None, what: str, update: dict | None = None):
    """``loader(config, overrides, update)``, or a one-line ``--config`` error naming the file and the bad fields."""
    from pydantic import ValidationError

    try:
        return loader(config, overrides or [], update)
    except FileNotFoundError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config")
    except ValidationError as exc:
        errs = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise typer.BadParameter(f"invalid {what} {config}: {errs}", param_hint="--config")
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise typer.BadParameter(f"{config}: {exc}", param_hint="--config")


def train_command(config: Path, out: Path, resume: bool, data: Path | None, overrides: list[str] | None,
                  update: dict | None = None) -> None:
    from hpd.train.config import load_config
    from hpd.views.records import RecordError

    cfg = load_or_exit(load_config, config, overrides, "config", update)
    if data is not None and not data.is_file():
        raise typer.BadParameter(f"records file not found: {data}", param_hint="--data")
    from hpd.train.trainer import train

    _run_and_report(lambda command: train(None, cfg, out, resume=resume, data_path=str(data) if data else None,
                                          command=command),
                    (RecordError,), f"hpd train --config {config} --out {out} --resume", out)


def method_command(method: str, config: Path, out: Path, resume: bool, overrides: list[str] | None,
                   update: dict | None = None) -> None:
    """``hpd train --method dpo|grpo|gspo|gigpo``: the method's own config and trainer (:mod:`hpd.methods`)."""
    from hpd.methods import method_module

    try:
        mod = method_module(method)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--method")
    cfg = load_or_exit(mod.load_config, config, overrides, f"{method} config", update)
    _run_and_report(lambda command: mod.run(cfg, out, resume=resume, command=command), (ValueError,),
                    f"hpd train --method {method} --config {config} --out {out} --resume", out, label=method)


def _run_and_report(run, errors: tuple, resume_cmd: str, out: Path, label: str | None = None) -> None:
    """``run(command)``; a one-line error (exit 2) for bad input; then, on rank 0, where the result is (under
    ``label``, default "adapter" or "model"), or how to resume a run that ``stop_after`` ended early."""
    import os

    from hpd.train.trainer import TrainError

    try:
        adapter = run(" ".join(shlex.quote(a) for a in ["hpd", *sys.argv[1:]]))
    except (TrainError, FileNotFoundError, *errors) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    except KeyboardInterrupt:     # Ctrl-C / SIGTERM: the trainer saved a checkpoint at the update it finished
        typer.echo(f"interrupted; resume with: {resume_cmd}", err=True)
        raise typer.Exit(130)
    if int(os.environ.get("RANK", "0")) != 0:
        return
    if adapter is None:
        typer.echo(f"stopped early (stop_after); resume with: {resume_cmd}")
    else:
        kind = label or ("adapter" if (Path(adapter) / "adapter_config.json").is_file() else "model")
        typer.echo(f"{kind}: {adapter}\nmetrics: {out / 'metrics.json'}\nmanifest: {out / 'manifest.json'}")


def register_train(app: typer.Typer) -> None:
    @app.command("train")
    def train_cmd(
        config: Path = typer.Option(..., "--config", "-c", help="Train config (YAML/TOML; see configs/)."),
        out: Path = typer.Option(..., "--out", "-o", help="Output dir: adapter/, manifest.json, metrics.json, checkpoints/."),
        resume: bool = typer.Option(False, "--resume", help="Continue exactly from the newest checkpoint in --out."),
        data: Path = typer.Option(None, "--data", help="JSONL of boundary records (overrides data.path)."),
        overrides: list[str] = typer.Argument(None, help="Config overrides KEY=VALUE, e.g. optim.lr=1e-4 seed=1."),
        method: str = typer.Option("hpd", "--method", "-m", help="sft | hpd: the three-view trainer (SFT = its T view "
                                   "on reference actions); dpo | grpo | gspo | gigpo: the paper's baselines "
                                   "(hpd.methods; each has its own config, see configs/methods/)."),
        dtype: Optional[str] = dtype_option(None, "Default: the config's model.precision; given, it overrides it "
                                                  "(every method; bf16 = bf16 base weights + autocast, LoRA and "
                                                  "AdamW state fp32)."),
    ) -> None:
        """Train a student: the three-view (T/I/R) LoRA trainer, or a baseline with --method.
        Works under `accelerate launch -m hpd.train ...`."""
        from hpd.methods import TRAINER_METHODS
        from hpd.policy.dtype import precision_name

        # --dtype wins over the config (and over a model.precision=... override): written over both
        update = {"model": {"precision": precision_name(dtype)}} if dtype is not None else None
        if method in TRAINER_METHODS:
            train_command(config, out, resume, data, overrides, update)
        elif data is not None:
            raise typer.BadParameter(f"--data is for --method sft|hpd; {method} reads its data from the config "
                                     "(data.teach for dpo, data.path for grpo/gspo/gigpo)", param_hint="--data")
        else:
            method_command(method, config, out, resume, overrides, update)


def register(app: typer.Typer) -> None:
    register_train(app)
