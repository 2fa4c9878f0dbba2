"""The study's results registry: every finished evaluation of a study, kept in the repository.

Long study runs live outside the repository (their run folders hold weights and checkpoints, and the work tree
is wiped between sessions); what the analysis needs of each finished variant is copied here, into
``results/<study>/``, the moment its evaluation finishes, so it is committed and never run again.

Layout (docs/data-contracts.md, "Results registry")::

    <registry>/<study>/<arm>/defects-<r>/seed-<s>/<variant>/
        metrics.json     the variant's metrics (hpd demo's row: TS F1 Step-SR RC Exact Action-Acc,
                         Action-Acc_calls, n_tasks, n_boundaries; plus the evaluation's other keys)
        tasks.jsonl      slim per-task rows (TASK_FIELDS of hpd eval's tasks.jsonl; BFCL_FIELDS for BFCL)
        manifest.json    the run-folder manifest schema (hpd.runfolder) + git, dtype, machine, timings
        teacher.json     (HPD and HPD-T only) what the cell's teacher did: its Table 3 diagnostics, the teacher
                         choice and the defect accounting (which defective references it replaced, which fell
                         back), as the demo's results.json has them (:data:`TEACHER_KEYS`)

A *cell id* is the path under ``<study>``: ``<arm>/defects-<r>/seed-<s>/<variant>`` (:func:`cell_id`). An
*arm* is one configuration of the study's demo (``main``; ``oracle-teacher``, ...): the cells of an arm differ
only in defect rate, seed and variant. No weights are kept.

``manifest.json`` has ``config`` (everything that decides the variant's result) and its ``config_hash``; a
demo run with ``--registry`` skips a variant whose cell holds the same hash (:meth:`Registry.lookup`), and
refuses one whose cell holds another. :func:`write_cell` writes the three files into a temporary folder beside
the cell (each file through :mod:`hpd.runfolder`'s atomic writers) and renames it into place.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpd.runfolder import (RunFolderError, finish_manifest, finished_manifest, new_manifest, read_json, write_json,
                           write_jsonl)

#: what each registry cell holds
CELL_FILES = ("metrics.json", "tasks.jsonl", "manifest.json")
#: the optional file of a cell whose variant trained on teacher targets, and its keys
TEACHER_FILE = "teacher.json"
TEACHER_KEYS = ("teacher", "teacher_choice", "defects")
#: the variants whose training targets come from the teacher (their cells carry :data:`TEACHER_FILE`)
TEACHER_VARIANTS = ("HPD-T", "HPD")
#: the per-task fields kept from hpd eval's ``tasks.jsonl`` (docs/data-contracts.md, "Evaluation rows"):
#: TS, F1, Exact, Step-SR and its counts (matched / n_scorable), RC's counts (valid_turns / turns)
TASK_FIELDS = ("uid", "kind", "domain", "difficulty", "TS", "F1", "Exact", "Step-SR", "matched", "n_scorable",
               "n_calls", "valid_turns", "turns", "finished", "protocol_failure", "end_reason")
#: the per-entry fields kept from a BFCL run's ``entries.jsonl``
BFCL_FIELDS = ("id", "category", "valid", "error_type")
#: the metrics a demo reads back from a registry cell (hpd.demo's row of one variant)
ROW_KEYS = ("TS", "F1", "Step-SR", "RC", "Exact", "Action-Acc", "Action-Acc_calls", "n_tasks", "n_boundaries")
_CELL = re.compile(r"(?P<arm>[\w.+-]+)/defects-(?P<rate>\d+\.\d+)/seed-(?P<seed>-?\d+)/(?P<variant>[\w.+-]+)")
_NAME = re.compile(r"[\w.+-]+")


class RegistryError(RunFolderError):
    """A one-line problem with a registry cell (another config in it, a broken cell, a bad name)."""


def cell_id(arm: str, rate: float, seed: int, variant: str) -> str:
    """``<arm>/defects-<r>/seed-<s>/<variant>``, the rate with two decimals as the study's run folders have it."""
    for what, name in (("arm", arm), ("variant", variant)):
        if not _NAME.fullmatch(name):
            raise RegistryError(f"registry {what} {name!r}: use letters, digits, '.', '+', '-' and '_'")
    return f"{arm}/defects-{float(rate):.2f}/seed-{int(seed)}/{variant}"


def parse_cell(cell: str) -> dict:
    """``{"arm", "defect_rate", "seed", "variant"}`` of a cell id; :class:`RegistryError` when it is not one."""
    m = _CELL.fullmatch(cell.strip("/"))
    if not m:
        raise RegistryError(f"{cell!r} is not a registry cell (<arm>/defects-<r>/seed-<s>/<variant>)")
    return {"arm": m["arm"], "defect_rate": float(m["rate"]), "seed": int(m["seed"]), "variant": m["variant"]}


# ------------------------------------------------------------------------------------------ provenance
def git_info(where: str | os.PathLike | None = None) -> dict:
    """``{"commit", "dirty"}`` of the checkout holding ``where`` (default: this package); nulls outside git."""
    cwd = Path(where) if where else Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=30, check=True).stdout.strip() != ""
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit or None, "dirty": dirty}


def cpu_info(cpuinfo: str | os.PathLike = "/proc/cpuinfo") -> dict:
    """CPU model and logical cores from ``/proc/cpuinfo`` (``os.cpu_count`` and ``platform`` elsewhere)."""
    model, cores = None, 0
    try:
        for line in Path(cpuinfo).read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "processor":
                cores += 1
            elif key.strip() in ("model name", "Model") and model is None:
                model = value.strip()
    except OSError:
        pass
    return {"cpu_model": model or platform.processor() or None, "cpu_cores": cores or os.cpu_count()}


def machine_info() -> dict:
    """Where a cell ran: CPU model and cores, the usable cores, Python, torch and the GPU (when torch sees one)."""
    info: dict[str, Any] = {**cpu_info(), "usable_cores": len(os.sched_getaffinity(0))
                            if hasattr(os, "sched_getaffinity") else os.cpu_count(),
                            "python": platform.python_version(), "platform": platform.platform(),
                            "torch": None, "gpu": None}
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except Exception:  # no torch: the cell still records the rest
        pass
    return info


# ------------------------------------------------------------------------------------------ writing
def slim_rows(run_folder: Path) -> list[dict]:
    """The per-task rows the analysis needs: :data:`TASK_FIELDS` of ``tasks.jsonl`` (an hpd evaluation), else
    :data:`BFCL_FIELDS` of ``entries.jsonl`` (a BFCL run); ``[]`` when the folder has neither."""
    for name, fields in (("tasks.jsonl", TASK_FIELDS), ("entries.jsonl", BFCL_FIELDS)):
        f = Path(run_folder) / name
        if f.is_file():
            rows = []
            for line in f.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    r = json.loads(line)
                    rows.append({k: r[k] for k in fields if k in r})
            return rows
    return []


def _swap_in(tmp: Path, dest: Path) -> None:
    """Rename the finished folder ``tmp`` to ``dest``; an older ``dest`` is moved aside first, then removed."""
    old = None
    if dest.exists():
        old = dest.with_name(f".{dest.name}.old-{uuid.uuid4().hex[:8]}")
        dest.rename(old)
    tmp.rename(dest)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write_cell(registry_root: str | os.PathLike, study: str, cell: str, run_folder: str | os.PathLike, *,
               config: dict, command: str, metrics: dict | None = None, dtype: str | None = None,
               wall_s: float | None = None, seed: int | None = None, timings: dict | None = None,
               rows: list[dict] | None = None, extra: dict | None = None, teacher: dict | None = None) -> Path:
    """Copy a finished variant's results from ``run_folder`` (its evaluation folder) into
    ``<registry_root>/<study>/<cell>/`` atomically; returns that folder.

    ``metrics``: the row to keep (default: ``run_folder/metrics.json``; a given row is laid over the file's
    keys); ``config``: what decides the result (its hash is the cell's identity); ``command``: the command that
    reproduces it; ``wall_s``: the seconds the variant cost (its training and evaluation); ``rows``: per-task rows
    (default: :func:`slim_rows` of ``run_folder``); ``teacher``: the cell's :data:`TEACHER_FILE` (none when
    None)."""
    run_folder = Path(run_folder)
    if not _NAME.fullmatch(study):
        raise RegistryError(f"study name {study!r}: use letters, digits, '.', '+', '-' and '_'")
    dest = Path(registry_root) / study / cell
    on_disk = read_json(run_folder / "metrics.json", "evaluation metrics") \
        if (run_folder / "metrics.json").is_file() else {}
    if metrics is None and not on_disk:
        raise RegistryError(f"{run_folder} has no metrics.json: not a finished evaluation")
    doc = {**on_disk, **(metrics or {})}
    man = new_manifest(command, config, inputs={"run_folder": {"path": str(run_folder), "sha256": None}},
                       seed=seed, study=study, cell=cell, git=git_info(), dtype=dtype, machine=machine_info(),
                       timings=dict(timings or {}), **(extra or {}))
    man = finish_manifest(man)
    man["wall_s"] = None if wall_s is None else round(float(wall_s), 3)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    tmp.mkdir()
    try:
        write_json(tmp / "metrics.json", doc)
        write_jsonl(tmp / "tasks.jsonl", slim_rows(run_folder) if rows is None else rows)
        if teacher is not None:
            write_json(tmp / TEACHER_FILE, teacher_doc(teacher))
        write_json(tmp / "manifest.json", man)
        _swap_in(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def teacher_doc(doc: dict) -> dict:
    """The :data:`TEACHER_KEYS` of a demo's results document (or of a teacher doc); a one-line
    :class:`RegistryError` when it has no teacher diagnostics."""
    if not isinstance(doc, dict) or not isinstance(doc.get("teacher"), dict):
        raise RegistryError("no teacher diagnostics to register (the results hold no 'teacher' object)")
    return {k: doc.get(k) for k in TEACHER_KEYS}


def attach_teacher(folder: str | os.PathLike, doc: dict) -> Path:
    """Write :data:`TEACHER_FILE` into the finished registry cell ``folder`` (for cells registered before cells
    carried it); its other files are not touched."""
    read_cell(folder)
    return write_json(Path(folder) / TEACHER_FILE, teacher_doc(doc))


def attach_teachers(study_dir: str | os.PathLike, run_root: str | os.PathLike | None = None) -> list[tuple[str, str]]:
    """Give every :data:`TEACHER_VARIANTS` cell of a study folder that lacks :data:`TEACHER_FILE` the one its run
    folder's ``results.json`` holds (the cell manifest's ``run_folder``; under ``run_root`` instead, by its last
    three parts, when given: a moved run tree). The file must list the cell's variant among its ``variants``: a
    demo writes it, atomically, only when a run's evaluations have ended (the cell's manifest may already say
    ``running`` again, for the cell's next variant). Returns ``(cell id, what happened)`` per such cell."""
    out = []
    for cid, folder in list_cells(study_dir).items():
        variant = parse_cell(cid)["variant"]
        if variant not in TEACHER_VARIANTS or (folder / TEACHER_FILE).is_file():
            continue
        run = Path(read_cell(folder)["manifest"].get("run_folder") or "")
        if run_root is not None and run.parts:
            run = Path(run_root).joinpath(*run.parts[-3:])
        try:
            doc = read_json(run / "results.json", "demo results")
            if variant not in (doc.get("variants") or {}):
                raise RegistryError(f"{run / 'results.json'} holds no finished {variant} (its variants: "
                                    f"{', '.join(doc.get('variants') or {}) or 'none'})")
            write_json(folder / TEACHER_FILE, teacher_doc(doc))   # the cell was read above
            out.append((cid, f"attached from {run / 'results.json'}"))
        except (RunFolderError, RegistryError) as e:
            out.append((cid, f"not attached: {e}"))
    return out


# ------------------------------------------------------------------------------------------ reading
def read_cell(folder: str | os.PathLike) -> dict:
    """``{"metrics", "manifest"}`` of a registry cell folder; one-line :class:`RegistryError` when broken."""
    folder = Path(folder)
    try:
        man = finished_manifest(folder, "registry cell", required=True)
        metrics = read_json(folder / "metrics.json", "registry metrics")
    except RunFolderError as e:
        raise RegistryError(str(e)) from None
    if "config_hash" not in man:
        raise RegistryError(f"{folder} is not a finished registry cell (its manifest has no config_hash)")
    return {"metrics": metrics, "manifest": man}


def read_teacher(folder: str | os.PathLike) -> dict | None:
    """A registry cell's :data:`TEACHER_FILE` (None when it has none); one-line :class:`RegistryError` when broken."""
    f = Path(folder) / TEACHER_FILE
    if not f.is_file():
        return None
    try:
        return read_json(f, "registry teacher record")
    except RunFolderError as e:
        raise RegistryError(str(e)) from None


def read_tasks(folder: str | os.PathLike) -> list[dict]:
    """The slim per-task rows of a registry cell (``[]`` when it has none)."""
    f = Path(folder) / "tasks.jsonl"
    if not f.is_file():
        return []
    return [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]


def list_cells(study_dir: str | os.PathLike) -> dict[str, Path]:
    """Every finished-looking cell of a study folder: ``{cell id: folder}``, sorted; temporary and set-aside
    folders (``.name.tmp-*``, ``.name.old-*``) are not cells."""
    root = Path(study_dir)
    out = {}
    for man in sorted(root.glob("*/defects-*/seed-*/*/manifest.json")):
        rel = man.parent.relative_to(root).as_posix()
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        try:
            parse_cell(rel)
        except RegistryError:
            continue
        out[rel] = man.parent
    return out


def load_study(study_dir: str | os.PathLike) -> dict[str, dict]:
    """Every cell of a study folder: ``{cell id: {"arm", "defect_rate", "seed", "variant", "metrics", "manifest",
    "teacher", "folder"}}`` (``teacher``: :func:`read_teacher`)."""
    out = {}
    for cid, folder in list_cells(study_dir).items():
        got = read_cell(folder)
        out[cid] = {**parse_cell(cid), **got, "teacher": read_teacher(folder), "folder": folder}
    return out


#: the order of variants in a study's tables
VARIANT_ORDER = ("Base", "SFT", "DPO", "GRPO", "GSPO", "GiGPO", "HPD-T", "HPD")


def variant_rank(v: str) -> int:
    return VARIANT_ORDER.index(v) if v in VARIANT_ORDER else len(VARIANT_ORDER)


def agent_cells(cells: dict[str, dict]) -> list[dict]:
    """The agent-evaluation cells of :func:`load_study`: their metrics hold TS and their rows are tasks (a BFCL
    cell's are BFCL entries)."""
    return [c for c in cells.values() if "TS" in c["metrics"]]


def variant_groups(cells: dict[str, dict]) -> dict[tuple[str, float, str], list[dict]]:
    """The :func:`agent_cells` of :func:`load_study` by ``(arm, defect rate, variant)``, arm ``main`` first, then
    by arm, rate and :data:`VARIANT_ORDER`; each group's cells by seed."""
    groups: dict[tuple, list[dict]] = {}
    for c in agent_cells(cells):
        groups.setdefault((c["arm"], c["defect_rate"], c["variant"]), []).append(c)
    keys = sorted(groups, key=lambda k: (k[0] != "main", k[0], k[1], variant_rank(k[2])))
    return {k: sorted(groups[k], key=lambda c: c["seed"]) for k in keys}


@dataclass
class Registry:
    """Where a demo's finished variants go: ``<root>/<study>/<arm>/defects-<r>/seed-<s>/<variant>/``.
    ``command`` is the command recorded as the one that reproduces a cell (default: the process's own);
    ``label`` says what the arm is (written to each cell's manifest, shown by the study report)."""

    root: Path
    study: str
    arm: str = "main"
    command: str | None = None
    label: str | None = None       # what the arm is, for reports (e.g. "upper bound (oracle teacher)")

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        for what, name in (("study", self.study), ("arm", self.arm)):
            if not _NAME.fullmatch(name or ""):
                raise RegistryError(f"registry {what} {name!r}: use letters, digits, '.', '+', '-' and '_'")

    def cell(self, rate: float, seed: int, variant: str) -> str:
        return cell_id(self.arm, rate, seed, variant)

    def folder(self, cell: str) -> Path:
        return self.root / self.study / cell

    def lookup(self, cell: str, config_hash: str) -> dict | None:
        """The metrics row of ``cell`` when the registry holds it with this ``config_hash`` (None when absent);
        one-line :class:`RegistryError` when it holds another config."""
        folder = self.folder(cell)
        if not (folder / "manifest.json").is_file():
            return None
        got = read_cell(folder)
        have = got["manifest"]["config_hash"]
        if have != config_hash:
            raise RegistryError(f"{folder} holds another config of {cell} (config hash {have}, this run "
                                f"{config_hash}); give this run another --study or --arm, or remove that cell")
        return {k: got["metrics"][k] for k in ROW_KEYS if k in got["metrics"]}

    def write(self, cell: str, run_folder: str | os.PathLike, **kw: Any) -> Path:
        import sys

        kw.setdefault("command", self.command or " ".join(["hpd", *sys.argv[1:]]))
        kw["extra"] = {"arm": self.arm, "label": self.label, **(kw.get("extra") or {})}
        return write_cell(self.root, self.study, cell, run_folder, **kw)
