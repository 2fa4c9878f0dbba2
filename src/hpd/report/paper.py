"""``hpd report``: run folders -> the paper's tables (:mod:`hpd.report.tables`), in one run folder.

A request maps a table (key, number or ``tableN``) to labelled run folders ``(label or None, folder)``;
from the command line ``--table seeds --run HPD/715=runs/eval/hpd-715 ...``, or several tables at once
from a spec file (YAML or JSON, relative folders from the current directory)::

    tables:
      methods: {Base: runs/eval/base, SFT: runs/eval/sft, HPD: runs/eval/hpd}
      seeds: [runs/seeds]                       # a study folder, or LABEL=FOLDER strings

Every run that is missing or incomplete is one line in the table's ``missing`` list (JSON and markdown)
and in the returned summary; the other rows are still written. ``<out>/manifest.json`` lists the outputs
and the problems.
"""

from __future__ import annotations

from pathlib import Path

from hpd.runfolder import finish_manifest, new_manifest, write_json

from .runs import Row, RunProblem, load_run, parse_run
from .tables import table_spec, write_table


class ReportError(ValueError):
    """A one-line problem with the request itself (unknown table, unreadable spec file, no runs)."""


def collect(runs: list[tuple[str | None, Path]]) -> tuple[list[Row], list[str]]:
    """The rows of every run, and one line per run that is missing or incomplete."""
    rows: list[Row] = []
    problems: list[str] = []
    for label, folder in runs:
        try:
            rows += load_run(label, folder)
        except RunProblem as e:
            problems.append(str(e))
    return rows, problems


def _entries(value, where: str) -> list[tuple[str | None, Path]]:
    if isinstance(value, dict):
        return [(str(k), Path(str(v))) for k, v in value.items()]
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return [parse_run(x) for x in value]
    raise ReportError(f"{where}: expected a mapping LABEL: FOLDER or a list of FOLDER / LABEL=FOLDER strings")


def read_spec(path: str | Path) -> dict[str, list[tuple[str | None, Path]]]:
    """The tables a spec file asks for (module doc); one-line :class:`ReportError` when it is unusable."""
    import yaml

    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise ReportError(f"cannot read spec {p}: {str(e).splitlines()[0]}") from None
    tables = doc.get("tables") if isinstance(doc, dict) else None
    if not isinstance(tables, dict) or not tables:
        raise ReportError(f"{p}: expected a top-level 'tables:' mapping of table -> runs")
    return {str(k): _entries(v, f"{p}: tables.{k}") for k, v in tables.items()}


def write_report(request: dict[str, list[tuple[str | None, Path]]], out: str | Path) -> dict:
    """Write every requested table into ``out`` (module doc); returns ``{stem: {"rows", "missing"}}``."""
    try:
        specs = {table_spec(k): runs for k, runs in request.items()}
    except ValueError as e:
        raise ReportError(str(e)) from None
    if not any(specs.values()):
        raise ReportError("no runs given (--run LABEL=FOLDER, or a spec file)")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    man = new_manifest("hpd report", {s.stem: [[lab, str(f)] for lab, f in runs] for s, runs in specs.items()})
    write_json(out / "manifest.json", man)
    summary, files = {}, []
    for spec, runs in specs.items():
        rows, problems = collect(runs)
        files += write_table(spec, rows, problems, out)
        summary[spec.stem] = {"rows": len(rows), "missing": problems}
    write_json(out / "manifest.json", finish_manifest(
        man, outputs=files, missing=[p for s in summary.values() for p in s["missing"]]))
    return summary
