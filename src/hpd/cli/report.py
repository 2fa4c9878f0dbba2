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
    study: Optional[Path] = typer.Option(None, "--study", help="A results registry study (results/<study>): mean ± "
                                         "std over seeds, paired per-task differences to SFT with bootstrap "
                                         "intervals, McNemar on TS, the sweep and main-table plots "
                                         "(study_report.json/.md, plots/)"),
    resamples: int = typer.Option(10_000, "--resamples", help="--study: bootstrap resamples over tasks"),
    boot_seed: int = typer.Option(0, "--bootstrap-seed", help="--study: seed of the bootstrap"),
    readme: Optional[Path] = typer.Option(None, "--readme", help="--study: also write the study's headline table "
                                          "between this file's <!-- results:<study>:begin --> and "
                                          "<!-- results:<study>:end --> markers, or the unnamed <!-- results:begin "
                                          "--> ... <!-- results:end --> when it has none for the study (a study "
                                          "in several harnesses gets its Figure 4 table; a test checks every "
                                          "block equals the registry)"),
) -> None:
    """Aggregate run folders into the paper's tables: markdown, JSON and plots."""
    from hpd.report.paper import ReportError, read_spec, write_report
    from hpd.report.runs import parse_run

    if study is not None:
        if spec is not None or table is not None or run:
            raise typer.BadParameter("--study stands alone (no --table, --run or --spec)")
        if readme is not None:
            _readme(readme, study)
        _study_report(study, out, resamples, boot_seed)
        return
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


def _readme(readme: Path, study: Path) -> None:
    from hpd.report.headline import HeadlineError, update_readme

    try:
        update_readme(readme, study)
    except (HeadlineError, OSError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"wrote the headline table of {study} into {readme}")


def _study_report(study: Path, out: Path, resamples: int, seed: int) -> None:
    from hpd.report.registry import RegistryError
    from hpd.report.studystats import StudyReportError, write_study_report

    if resamples < 1:
        raise typer.BadParameter("--resamples must be >= 1")
    try:
        doc = write_study_report(study, out, resamples=resamples, seed=seed)
    except (StudyReportError, RegistryError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    typer.echo((out / "study_report.md").read_text(encoding="utf-8"))
    typer.echo(f"{len(doc['cells'])} cells -> {out / 'study_report.json'}, {out / 'study_report.md'}")


def register(app: typer.Typer) -> None:
    app.command(name="report")(report_cmd)
