"""Run folders as table rows for ``hpd report``: one labelled folder gives one or more :class:`Row`.

A folder is read by what it holds: an evaluation through its stage's reader
(:func:`hpd.eval.variant.read_metrics`); a demo cell's ``results.json`` and a study's ``study.json`` through
:func:`read_results` and :func:`read_study` here (``hpd.demo`` and ``hpd.study`` sit above the report layer
and write these files under the names :data:`RESULTS_FILE` and :data:`STUDY_FILE`):

- an **evaluation** (``hpd eval``, :func:`hpd.eval.variant.evaluate_variant`): ``manifest.json`` with status
  ``complete`` + ``metrics.json`` -> one row. The label ``GROUP/ROW`` puts it in a group (e.g. ``HPD/715``
  for a seed of HPD, ``4B/HPD`` for a size); a plain label is the row. Without a label the row is the
  folder's name. When the evaluation names an ``--adapter``, the training run above it is read too
  (:func:`train_info`: its schedule and updates, the checkpoint step);
- a **demo cell** (``hpd demo``): ``results.json`` -> one row per variant (Base, SFT, HPD-T, HPD, ...), in
  the group given by the label;
- a **study** (``hpd demo --seed ...``, :mod:`hpd.study`): ``study.json`` -> one row per (variant, seed),
  grouped by variant (and defect rate when there are several), the row named ``seed N``.

Anything else is a :class:`RunProblem` with one line naming the label, the folder and what is missing:
no folder, not a run folder, a manifest that is not ``complete``, or a metric key missing from the file.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from hpd.runfolder import RunFolderError, finished_manifest, read_json, read_manifest

from .results import METRIC_KEYS

COUNT_KEYS = ("n_tasks", "n_boundaries")
RESULTS_FILE = "results.json"     # a demo cell's results (hpd.demo writes it)
STUDY_FILE = "study.json"         # a study's cells and summary (hpd.study writes it)


class RunProblem(ValueError):
    """A run folder that is missing or incomplete; ``str()`` is the one line ``hpd report`` prints."""


@dataclass
class Row:
    group: str
    row: str
    metrics: dict            # METRIC_KEYS (fractions or None) + COUNT_KEYS
    folder: str
    kind: str                # eval | demo | study
    info: dict = field(default_factory=dict)   # schedule, updates, checkpoint step, seed (when known)


def split_label(label: str) -> tuple[str, str]:
    group, sep, row = label.rpartition("/")
    return (group, row) if sep else ("", label)


def parse_run(text: str) -> tuple[str | None, Path]:
    """``LABEL=FOLDER`` or ``FOLDER``."""
    label, sep, folder = text.partition("=")
    return (label.strip() or None, Path(folder)) if sep else (None, Path(text))


def metric_values(m: dict, where: str) -> dict:
    """The table's metrics of one metric dict; a missing key is a :class:`RunProblem` naming ``where``."""
    missing = [k for k in METRIC_KEYS[:-1] if k not in m]
    if missing:
        raise RunProblem(f"{where}: no {', '.join(repr(k) for k in missing)} (not a finished evaluation)")
    return {**{k: (None if m.get(k) is None else float(m[k])) for k in METRIC_KEYS},
            **{k: m.get(k) for k in COUNT_KEYS}}


def mean_std(values: list[float]) -> dict:
    """Mean, sample standard deviation (``ddof=1``; 0 for one value) and count: a study's aggregate over seeds
    (``study.json``) and the ``mean ± std`` of ``hpd report``'s tables."""
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "n": len(values)}


def read_results(out: str | Path) -> dict:
    """A demo cell's ``results.json`` (:meth:`hpd.demo.Demo.results_doc`); a one-line ``RunFolderError`` when it
    is missing or broken, or when the cell's manifest says the run did not finish."""
    out = Path(out)
    finished_manifest(out, "demo run")
    return read_json(out / RESULTS_FILE, "demo results")


def read_study(root: str | Path) -> dict:
    """A finished study's document (``<root>/study.json``); one-line ``RunFolderError`` when absent or broken."""
    return read_json(Path(root) / STUDY_FILE, "study")


def _complete(folder: Path, label: str) -> dict | None:
    try:
        return finished_manifest(folder, "run")
    except RunFolderError as e:
        raise RunProblem(f"run {label!r}: {e}") from None


def _read(reader, folder: Path, label: str) -> dict:
    """``reader(folder)`` (the owning stage's reader), its one-line error as a :class:`RunProblem`."""
    try:
        return reader(folder)
    except RunFolderError as e:
        raise RunProblem(f"run {label!r}: {e}") from None


def schedule_text(phases: list[dict]) -> str:
    """``T:I:R 5:1:5 x 20000``; phases joined with `` -> ``."""
    parts = []
    for p in phases:
        views = p.get("views") or {}
        head = ":".join(views) + (" " + ":".join(str(w) for w in views.values()) if len(views) > 1 else "")
        parts.append(f"{head} x {p.get('updates')}")
    return " -> ".join(parts)


def train_info(adapter: str | None) -> dict:
    """Schedule, total updates and seed of the training run an adapter folder belongs to (the nearest
    folder above it, up to three levels, whose manifest has a ``schedule``), and the checkpoint step of a
    ``checkpoints/step-N/...`` (or ``update-N``) adapter. ``{}`` when nothing is found."""
    if not adapter:
        return {}
    p = Path(adapter)
    info: dict = {}
    steps = [m for q in (p, *p.parents[:2]) if (m := re.fullmatch(r"(?:step|update)-0*(\d+)", q.name))]
    if steps:
        info["checkpoint"] = int(steps[0].group(1))
    for q in list(p.parents)[:3]:
        try:
            man = read_manifest(q)
        except RunFolderError:
            man = None
        phases = ((man or {}).get("config") or {}).get("schedule", {}).get("phases") if man else None
        if phases:
            info.update(schedule=schedule_text(phases), updates=sum(int(x.get("updates", 0)) for x in phases),
                        train_seed=man["config"].get("seed"))
            break
    return info


def eval_rows(folder: Path, label: str | None) -> list[Row]:
    lab = label or folder.name
    man = _complete(folder, lab)
    if man is None:
        raise RunProblem(f"run {lab!r}: {folder} has metrics.json but no manifest.json (not an hpd eval folder)")
    from hpd.eval.variant import read_metrics

    m = metric_values(_read(read_metrics, folder, lab), str(folder / "metrics.json"))
    adapter = ((man.get("inputs") or {}).get("adapter") or {}).get("path")
    return [Row(*split_label(lab), m, str(folder), "eval", train_info(adapter))]


def demo_rows(folder: Path, label: str | None) -> list[Row]:
    lab = label or folder.name
    _complete(folder, lab)
    doc = _read(read_results, folder, lab)
    variants = doc.get("variants") or {}
    if not variants:
        raise RunProblem(f"run {lab!r}: {folder / RESULTS_FILE} lists no variants")
    return [Row(label or "", v, metric_values(m, f"{folder / RESULTS_FILE} variant {v!r}"), str(folder), "demo",
                {"seed": doc.get("seed")}) for v, m in variants.items()]


def study_rows(folder: Path, label: str | None) -> list[Row]:
    lab = label or folder.name
    _complete(folder, lab)
    doc = _read(read_study, folder, lab)
    rates = doc.get("defect_rates") or []
    rows = []
    for c in doc.get("cells") or []:
        for v, m in c["variants"].items():
            group = " ".join(x for x in (label, v) if x)
            if len(rates) > 1:
                group += f" @ defects {100 * float(c['defect_rate']):.0f}%"
            rows.append(Row(group, f"seed {c['seed']}", metric_values(m, f"{folder / STUDY_FILE} cell "
                            f"{c.get('folder')!r} variant {v!r}"), str(folder / c.get("folder", "")), "study",
                            {"seed": c["seed"]}))
    if not rows:
        raise RunProblem(f"run {lab!r}: {folder / STUDY_FILE} holds no cells")
    return rows


def load_run(label: str | None, folder: str | Path) -> list[Row]:
    """The rows of one run folder (module doc); :class:`RunProblem` when it is missing or incomplete."""
    folder = Path(folder)
    lab = label or folder.name
    if not folder.is_dir():
        raise RunProblem(f"run {lab!r}: no folder {folder}")
    for name, reader in ((STUDY_FILE, study_rows), (RESULTS_FILE, demo_rows), ("metrics.json", eval_rows)):
        if (folder / name).is_file():
            return reader(folder, label)
    _complete(folder, lab)   # a running or stopped run is "incomplete", not "not a run folder"
    raise RunProblem(f"run {lab!r}: {folder} is not a run folder (no metrics.json, results.json or study.json)")
