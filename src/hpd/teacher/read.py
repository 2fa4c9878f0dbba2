"""Reading a finished ``hpd teach`` folder: the teach stage's own reader for later stages (DPO pairs, reports).

:func:`read_teach_run` returns a :class:`TeachRun`: the teacher records of ``shards/part-*.jsonl`` in boundary
order (every candidate with its verdict, the reference and the target; docs/data-contracts.md, "Teacher
records and targets"), the training records of ``targets.jsonl`` by boundary id, the manifest, and the
replay folder the run read its boundaries from (``inputs.boundaries.path``, when ``hpd teach`` recorded one).

It reads strictly: a missing folder or file, an unfinished run, a line that is not JSON or a record without
a field the contract names is a one-line :class:`TeachFolderError` that says the file, the record (1-based
line) and the field. Unlike :meth:`hpd.runfolder.ShardLog.read` it never repairs a file: a finished run's
shards end on a complete line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from hpd.runfolder import RunFolderError, ShardLog, finished_manifest


class TeachFolderError(ValueError):
    """A teach folder that is missing, unfinished or malformed (one line: file, record, field)."""


@dataclass
class TeachRun:
    folder: Path
    manifest: dict
    records: list[dict]                                   # teacher records, in boundary order
    training: dict[str, dict] = field(default_factory=dict)   # targets.jsonl rows by boundary id (uid)

    @property
    def boundaries_path(self) -> Path | None:
        """The replay folder ``hpd teach --boundaries`` read, when the manifest records one."""
        p = ((self.manifest.get("inputs") or {}).get("boundaries") or {}).get("path")
        return Path(p) if p else None

    @property
    def privilege(self) -> str | None:
        return (self.manifest.get("config") or {}).get("privilege")


def _fail(where: str, n: int, uid: str | None, msg: str) -> None:
    who = f" ({uid})" if uid else ""
    raise TeachFolderError(f"{where}: record {n}{who}: {msg}")


def _need(obj: dict, key: str, types: type | tuple, where: str, n: int, uid: str | None, path: str = "") -> object:
    name = f"{path}{key}"
    if not isinstance(obj, dict) or key not in obj:
        _fail(where, n, uid, f"field {name!r} is missing")
    if not isinstance(obj[key], types):
        _fail(where, n, uid, f"field {name!r} is {type(obj[key]).__name__}, not {_tname(types)}")
    return obj[key]


def _tname(types: type | tuple) -> str:
    ts = types if isinstance(types, tuple) else (types,)
    return " or ".join("null" if t is type(None) else t.__name__ for t in ts)


def _check_candidate(c: dict, i: int, where: str, n: int, uid: str) -> None:
    p = f"candidates[{i}]."
    if not isinstance(c, dict):
        _fail(where, n, uid, f"field 'candidates[{i}]' is not an object")
    for key, types in (("attempt", int), ("index", int), ("message", dict), ("verdict", dict)):
        _need(c, key, types, where, n, uid, p)
    _need(c["verdict"], "ok", bool, where, n, uid, p + "verdict.")
    reasons = _need(c["verdict"], "reasons", list, where, n, uid, p + "verdict.")
    if c["verdict"]["ok"] == bool(reasons):
        _fail(where, n, uid, f"field '{p}verdict.ok' is {c['verdict']['ok']} but reasons are {reasons}")


def check_record(rec: object, where: str, n: int) -> dict:
    """``rec`` if it is a teacher record as the contract defines it, else a one-line :class:`TeachFolderError`."""
    if not isinstance(rec, dict):
        _fail(where, n, None, "not a JSON object")
    uid = _need(rec, "boundary_id", str, where, n, None)
    _need(rec, "order", int, where, n, uid)
    _need(rec, "task_uid", str, where, n, uid)
    _need(rec, "reference", dict, where, n, uid)
    target = _need(rec, "target", (dict, type(None)), where, n, uid)
    if target is not None:
        _need(target, "message", dict, where, n, uid, "target.")
        _need(target, "source", str, where, n, uid, "target.")
    for i, c in enumerate(_need(rec, "candidates", list, where, n, uid)):
        _check_candidate(c, i, where, n, uid)
    return rec


def _read_shards(folder: Path) -> list[dict]:
    log = ShardLog(folder / "shards", key="boundary_id")
    parts = log.parts()
    if not parts:
        raise TeachFolderError(f"{folder / 'shards'}: no part-*.jsonl teacher records")
    seen: dict[str, dict] = {}
    for p in parts:
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as exc:
                raise TeachFolderError(f"{p}: record {n}: not JSON ({exc})") from None
            rec = check_record(rec, str(p), n)
            seen.setdefault(rec["boundary_id"], rec)     # first record per boundary wins (ShardLog semantics)
    return sorted(seen.values(), key=lambda r: r["order"])


def _read_targets(folder: Path, records: list[dict]) -> dict[str, dict]:
    from hpd.views.records import RecordError, load_records

    path = folder / "targets.jsonl"
    try:
        rows = load_records(path)
    except RecordError as exc:
        raise TeachFolderError(str(exc) if str(path) in str(exc) else f"{path}: {exc}") from None
    by_id = {r["uid"]: r for r in rows}
    for n, rec in enumerate(records, 1):
        if rec["target"] is not None and rec["boundary_id"] not in by_id:
            raise TeachFolderError(f"{path}: no training record for boundary {rec['boundary_id']!r}, which has a "
                                   "target in the shards")
    return by_id


def read_teach_run(folder: str | Path) -> TeachRun:
    """The finished teach run in ``folder`` (see the module docstring); one-line :class:`TeachFolderError` otherwise."""
    folder = Path(folder)
    if not folder.is_dir():
        raise TeachFolderError(f"teach folder not found: {folder}")
    try:
        man = finished_manifest(folder, "teach run", required=True, hint="resume `hpd teach` first")
    except (RunFolderError, ValueError) as exc:
        raise TeachFolderError(str(exc)) from None
    records = _read_shards(folder)
    n_man = man.get("n_boundaries")
    if isinstance(n_man, int) and n_man != len(records):
        raise TeachFolderError(f"{folder / 'shards'}: {len(records)} boundaries, the manifest says {n_man}")
    return TeachRun(folder=folder, manifest=man, records=records, training=_read_targets(folder, records))
