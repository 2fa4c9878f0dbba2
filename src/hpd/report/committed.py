"""The study results committed to the repository (``results/<study>/``, :mod:`hpd.report.registry`), as a
section of a demo's report: what the study measured, beside what this run measured.

:func:`committed_results` reads every study folder under the registry root and keeps, per study, the main
table of ``hpd report --study`` (:func:`hpd.report.studystats.summarize` at
:func:`hpd.report.studystats.main_rate`: mean ± sample std over seeds per arm and variant) and where it comes
from: the git commits and the dates (``started``) in its cells' manifests. The demo keeps the document in
``results.json["committed"]`` and :mod:`hpd.report.results` renders it in ``results.md`` and ``report.html``; a
root without study cells is one line there, "no committed study results in results/".

The root (:func:`results_root`): ``HPD_RESULTS_DIR`` when set, else ``results/`` of the checkout this package
runs from (the folder holding ``pyproject.toml`` above ``src/hpd``), else ``results/`` in the working folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from .registry import RegistryError, list_cells

#: environment variable naming the registry root (configurable root)
ENV = "HPD_RESULTS_DIR"


def results_root(explicit: str | os.PathLike | None = None) -> Path:
    """``explicit``, else ``$HPD_RESULTS_DIR``, else the checkout's ``results/`` (module doc), else ``./results``."""
    if explicit is not None:
        return Path(explicit)
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    from hpd.resources import checkout

    return (checkout() or Path.cwd()) / "results"


def study_entry(study_dir: Path) -> dict:
    """One study's main table and provenance (``error``: one line, when a cell is broken)."""
    from .studystats import load_study, main_rate, summarize

    try:
        cells = load_study(study_dir)
    except RegistryError as e:
        return {"study": study_dir.name, "error": str(e)}
    summary = summarize(cells)
    rate = main_rate(summary)
    mans = [c["manifest"] for c in cells.values()]
    commits = sorted({(m.get("git") or {}).get("commit") for m in mans} - {None})
    dates = sorted(m["started"] for m in mans if m.get("started"))
    return {"study": study_dir.name, "folder": str(study_dir), "n_cells": len(cells), "main_rate": rate,
            "rows": [r for r in summary if r["defect_rate"] == rate],
            "commits": commits, "dirty": any((m.get("git") or {}).get("dirty") for m in mans),
            "first": dates[0] if dates else None, "last": dates[-1] if dates else None}


def committed_results(root: str | os.PathLike | None = None) -> dict:
    """``{"root", "studies": [study_entry, ...]}`` of every study folder under ``root`` (:func:`results_root`)
    that holds registry cells, by name."""
    root = results_root(root)
    studies = []
    if root.is_dir():
        for d in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if list_cells(d):
                studies.append(study_entry(d))
    return {"root": str(root), "studies": studies}
