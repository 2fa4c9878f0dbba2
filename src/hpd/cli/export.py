"""``hpd export --model DIR [--adapter DIR] [--eval DIR] --out DIR``: a merged Hugging Face model with the
adapter beside it and a generated model card (:mod:`hpd.export`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from hpd.cli.options import dtype_option


def register(app: typer.Typer) -> None:
    @app.command("export")
    def export(
        model: Path = typer.Option(..., "--model", help="Base model folder (Hugging Face layout)."),
        adapter: Optional[Path] = typer.Option(None, "--adapter", help="PEFT LoRA adapter folder to merge."),
        out: Path = typer.Option(..., "--out", help="Output folder: merged model, adapter/, README.md, manifest.json."),
        eval_dir: Optional[Path] = typer.Option(None, "--eval", help="An hpd eval output folder (its metrics.json "
                                                                      "becomes the card's metric table)."),
        name: Optional[str] = typer.Option(None, "--name", help="Model name in the card (default: the --out folder name)."),
        license_id: Optional[str] = typer.Option(None, "--license", help="License id for the card (default: the "
                                                                          "base model card's, else 'other')."),
        dtype: str = dtype_option(note="The saved weights' dtype (the merge itself runs in float32)."),
    ) -> None:
        """Merge the adapter into the base model and write a Hugging Face model card."""
        from hpd.export import ExportError, export_model

        try:
            man = export_model(model, out, adapter=adapter, eval_dir=eval_dir, name=name, license=license_id,
                               dtype=dtype)
        except ExportError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2)
        typer.echo(f"wrote {out} ({', '.join(man['outputs'])})")
