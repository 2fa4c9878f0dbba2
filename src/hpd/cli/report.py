"""``hpd report``: aggregate run folders (evaluations, demo cells, studies) into the paper's table layouts.

Thin layer over :func:`hpd.report.paper.write_report`, which writes ``<out>/tableN-<key>.md``,
``<out>/tableN-<key>.json``, ``<out>/plots/`` and ``<out>/manifest.json``. Every run folder that is
missing or incomplete is one line on stderr; the exit status is then 1 (the tables hold the other rows).
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer


def report_cmd(
    out: Path = typer.Option(..., "--out", help="output folder: tableN-<key>.md/.json, plots/, manifest.json"),
    table: Optional[str] = typer.Option(None, "--table", help="1|methods, 2|components, 5|seeds, "
                                        "6|checkpoints, 7|weights, 8|sizes"),
    run: Optional[List[str]] = typer.Option(None, "--run", help="LABEL=FOLDER or FOLDER, repeatable: an hpd eval "
                                            "folder, a demo folder (results.json) or a study (study.json); "
                                            "LABEL may be GROUP/ROW"),
    spec: Optional[Path] = typer.Option(None, "--spec", help="YAML/JSON file: tables: {TABLE: {LABEL: FOLDER}}"),
) -> None:
    """Aggregate run folders into the paper's tables: markdown, JSON and plots."""
    from hpd.report.paper import ReportError, read_spec, write_report
    from hpd.report.runs import parse_run

    if (spec is None) == (table is None):
        raise typer.BadParameter("give either --table with --run, or --spec")
    try:
        request = read_spec(spec) if spec else {table: [parse_run(r) for r in run or []]}
        summary = write_report(request, out)
    except ReportError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    for stem, s in summary.items():
        typer.echo(f"{stem}: {s['rows']} rows -> {out / (stem + '.md')}")
        for line in s["missing"]:
            typer.echo(f"missing: {line}", err=True)
    if any(s["missing"] for s in summary.values()):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command(name="report")(report_cmd)
