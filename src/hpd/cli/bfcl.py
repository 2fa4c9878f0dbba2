"""``hpd bfcl``: BFCL v4 on a local model (or an OpenAI-compatible endpoint), offline, scored by bfcl-eval's checkers.

Thin layer over :func:`hpd.bfcl.run_bfcl`: it checks the options, builds the policy and prints the table. Bad input
(a missing model folder, an unknown category, a folder of another run) is one line on stderr and exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from hpd.cli.options import dtype_option


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(2)


def _check_model(model: Path, backend: str) -> None:
    if not model.is_dir():
        _fail(f"--model {model} is not a folder")
    need = "tokenizer_config.json" if backend == "openai" else "config.json"
    if not (model / need).is_file():
        _fail(f"--model {model} is not a model folder (no {need})")


def bfcl_cmd(
    model: Path = typer.Option(..., "--model", help="local Hugging Face model folder (for --backend openai: its "
                                                    "tokenizer, used to render the prompts)"),
    out: Path = typer.Option(..., "--out", help="run folder: metrics.json, results.md, plots/, result/, score/"),
    adapter: Optional[Path] = typer.Option(None, "--adapter", help="PEFT LoRA adapter folder on top of --model"),
    backend: str = typer.Option("auto", "--backend", help="auto | hf | vllm | openai. auto: openai with --base-url, "
                                "hf for the tiny model or without vLLM, else vllm (adapters merged on the CPU)"),
    categories: str = typer.Option("offline", "--categories",
                                   help="comma list of BFCL categories or groups (default: every offline category)"),
    sample: Optional[int] = typer.Option(None, "--sample", help="a seeded sample of N entries per category"),
    seed: int = typer.Option(0, "--seed", help="sample seed (and sampling seed when --temperature > 0)"),
    max_new_tokens: int = typer.Option(512, "--max-new-tokens", help="tokens per model reply"),
    temperature: float = typer.Option(0.0, "--temperature", help="0 = greedy"),
    thinking: bool = typer.Option(False, "--thinking/--no-thinking", help="Qwen3 thinking mode in the prompt"),
    batch_size: int = typer.Option(32, "--batch-size", help="entries in flight (one generate call per wave)"),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="--backend openai: the endpoint, e.g. "
                                                                     "http://127.0.0.1:8000/v1"),
    served_model: Optional[str] = typer.Option(None, "--served-model", help="--backend openai: model name to send"),
    sandbox_timeout: float = typer.Option(60.0, "--sandbox-timeout", help="seconds per sandboxed execution request"),
    crosscheck: bool = typer.Option(False, "--crosscheck", help="also score with bfcl-eval's own evaluation and "
                                                                "compare (crosscheck.json)"),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace a BFCL run of another config in --out"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="progress bar on stderr"),
    dtype: str = dtype_option(note="--backend hf and vllm."),
) -> None:
    """Evaluate a model on BFCL v4 (offline categories); print per-category accuracy and BFCL's aggregates."""
    from hpd.bfcl import data

    if backend not in ("auto", "hf", "vllm", "openai"):
        _fail(f"unknown --backend {backend!r}; choose auto, hf, vllm or openai")
    if backend == "auto":
        from hpd.policy.backends import resolve_backend

        backend = "openai" if base_url is not None else resolve_backend("auto", str(model))
    _check_model(model, backend)
    if adapter is not None and not adapter.is_dir():
        _fail(f"--adapter {adapter} is not a folder")
    if sample is not None and sample < 1:
        _fail("--sample must be >= 1")
    if max_new_tokens < 1 or batch_size < 1 or temperature < 0 or sandbox_timeout <= 0:
        _fail("--max-new-tokens and --batch-size must be >= 1, --temperature >= 0, --sandbox-timeout > 0")
    if out.exists() and not out.is_dir():
        _fail(f"--out {out} exists and is not a folder")
    try:
        data.parse_categories(categories)
    except data.CategoryError as e:
        _fail(str(e))
    run(model, out, adapter=adapter, backend=backend, categories=categories, sample=sample, seed=seed,
        max_new_tokens=max_new_tokens, temperature=temperature, thinking=thinking, batch_size=batch_size,
        base_url=base_url, served_model=served_model, sandbox_timeout=sandbox_timeout, crosscheck=crosscheck,
        overwrite=overwrite, progress=progress, dtype=dtype)


def run(model: Path, out: Path, *, adapter, backend, categories, sample, seed, max_new_tokens, temperature, thinking,
        batch_size, base_url, served_model, sandbox_timeout, crosscheck, overwrite, progress, dtype="auto") -> None:
    from hpd.bfcl import BFCLError, GenConfig, lib, run_bfcl
    from hpd.bfcl.lib import BFCLUnavailable
    from hpd.bfcl.pipeline import make_policy
    from hpd.bfcl.report import console
    from hpd.runfolder import RunFolderError

    try:
        lib.load()                       # before loading a model: bfcl-eval missing is a one-line error too
    except BFCLUnavailable as e:
        _fail(str(e))
    try:
        policy = make_policy(backend, str(model), adapter=str(adapter) if adapter else None, base_url=base_url,
                             served_model=served_model, batch_size=batch_size, dtype=dtype)
    except BFCLError as e:
        _fail(str(e))
    except Exception as e:  # unreadable model folder, missing vllm, ...
        _fail(f"cannot load model {model}: {type(e).__name__}: {e}".splitlines()[0])
    describe = {"model": str(model), "adapter": str(adapter) if adapter else None, "backend": backend,
                "base_url": base_url, "served_model": served_model}
    if isinstance(getattr(policy, "dtype", None), str):   # what the model computes in (hf, vllm)
        describe["dtype"] = policy.dtype
    gen = GenConfig(max_new_tokens=max_new_tokens, temperature=temperature, seed=seed, enable_thinking=thinking,
                    batch_size=batch_size)
    try:
        metrics = run_bfcl(out, policy, categories=categories, sample=sample, seed=seed, gen=gen, describe=describe,
                           progress=progress, sandbox_timeout=sandbox_timeout, crosscheck=crosscheck,
                           overwrite=overwrite, command="hpd bfcl",
                           inputs={"model": model, "adapter": adapter})
    except (BFCLError, BFCLUnavailable, RunFolderError) as e:
        _fail(str(e))
    finally:
        policy.close()
    typer.echo(console(metrics))
    typer.echo(f"wrote {out / 'metrics.json'}")


def register(app: typer.Typer) -> None:
    app.command(name="bfcl")(bfcl_cmd)
