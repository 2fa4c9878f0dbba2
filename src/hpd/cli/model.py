"""``hpd model``: local models. ``hpd model tiny --out DIR --size {xs,s} --seed N [--data PATH]``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import typer

sub = typer.Typer(help="Local models (the tiny Qwen3 factory).", no_args_is_help=True)


@sub.command("tiny")
def tiny(
    out: Path = typer.Option(..., "--out", help="Output folder (a normal Hugging Face model directory)."),
    size: str = typer.Option("xs", "--size", help="xs (~0.2-0.4M params) or s (~4M params)."),
    seed: int = typer.Option(0, "--seed", help="Weight seed; same seed -> identical model files."),
    data: Optional[Path] = typer.Option(None, "--data", help="Folder of .json/.jsonl files whose text also trains the tokenizer."),
) -> None:
    """Build a tiny Qwen3 model: a tokenizer trained here + random weights (seconds, no download)."""
    from hpd.policy.tiny import SIZES, build_tiny

    if size not in SIZES:
        raise typer.BadParameter(f"unknown size {size!r}; choose one of {', '.join(sorted(SIZES))}", param_hint="--size")
    if data is not None and not data.is_dir():
        raise typer.BadParameter(f"{data} is not a folder", param_hint="--data")
    if out.exists() and not out.is_dir():
        raise typer.BadParameter(f"{out} exists and is not a folder", param_hint="--out")
    t0 = time.time()
    try:
        path = build_tiny(out, size=size, seed=seed, data_dir=data)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    meta = json.loads((path / "hpd_tiny.json").read_text())["hpd_tiny"]
    _manifest(path, {"size": size, "seed": seed, "data": str(data) if data else None}, seed, data)
    typer.echo(json.dumps({"out": str(path), "size": size, "seed": seed, "n_params": meta["n_params"],
                           "vocab": meta["vocab_total"], "seconds": round(time.time() - t0, 2)}))


def _manifest(out: Path, config: dict, seed: int, data: Optional[Path]) -> None:
    """``manifest.json`` (the one non-deterministic file: it records the time)."""
    from hpd import PI_PACKAGE, PI_VERSION, __version__

    (out / "manifest.json").write_text(json.dumps({
        "command": "hpd model tiny", "config": config, "hpd_version": __version__,
        "pi": f"{PI_PACKAGE}@{PI_VERSION}", "data": str(data) if data else None, "seed": seed,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }, indent=2) + "\n")


def register(app: typer.Typer) -> None:
    app.add_typer(sub, name="model")
