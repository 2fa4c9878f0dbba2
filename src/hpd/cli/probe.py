"""``hpd probe``: Figure 3's diagnostics (control entry, first-token entropy, reference-continuation
probability) of one or more model variants at every boundary of a replay folder.

Thin layer over :func:`hpd.probe.run_probe`, which writes ``<out>/probe.json``, ``<out>/rows.jsonl``,
``<out>/plots/*.png`` and ``<out>/manifest.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from hpd.cli.options import dtype_option


def probe_cmd(
    model: Path = typer.Option(..., "--model", help="local base model folder (Hugging Face layout)"),
    boundaries: Path = typer.Option(..., "--boundaries", help="a finished `hpd replay` output folder"),
    out: Path = typer.Option(..., "--out", help="output folder: probe.json, rows.jsonl, plots/, manifest.json"),
    adapter: Optional[Path] = typer.Option(None, "--adapter", help="PEFT adapter (or fine-tuned model) folder; "
                                           "a variant named after its run folder"),
    variant: Optional[List[str]] = typer.Option(None, "--variant", help="NAME=ADAPTER, repeatable; NAME= is "
                                                "the base model alone"),
    limit: Optional[int] = typer.Option(None, "--limit", help="only the first N boundaries"),
    device: Optional[str] = typer.Option(None, "--device", help="torch device (default: cuda if available, else cpu)"),
    dtype: str = dtype_option(),
    enable_thinking: bool = typer.Option(False, "--enable-thinking", help="render prompts with thinking on"),
) -> None:
    """Control entry, first-token entropy and reference-continuation probability per boundary and variant."""
    from hpd.probe import ProbeError, Variant, adapter_variant, parse_variant, run_probe

    if limit is not None and limit < 1:
        raise typer.BadParameter("--limit must be >= 1")
    if not (model / "config.json").is_file():
        raise typer.BadParameter(f"{model} is not a model directory (no config.json)")
    try:
        variants = [parse_variant(v) for v in variant or []]
    except ProbeError as e:
        raise typer.BadParameter(str(e)) from None
    if adapter is not None:
        variants.append(adapter_variant(adapter))
    variants = variants or [Variant("base", None)]
    try:
        doc = run_probe(boundaries, model, variants, out, limit=limit, device=device, dtype=dtype,
                        enable_thinking=enable_thinking, log=lambda s: typer.echo(s, err=True))
    except ProbeError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{'variant':<16}{'p_call':>8}{'p_finish':>9}{'entropy':>9}{'geo_mean':>9}{'entry_acc':>10}")
    for name, v in doc["variants"].items():
        s = v["summary"]
        typer.echo(f"{name:<16}{s['p_call']['mean']:>8.3f}{s['p_finish']['mean']:>9.3f}{s['entropy']['mean']:>9.3f}"
                   f"{s['geo_mean']['mean']:>9.3f}{s['entry_accuracy']:>10.3f}")
    typer.echo(f"wrote {out / 'probe.json'}")


def register(app: typer.Typer) -> None:
    app.command(name="probe")(probe_cmd)
