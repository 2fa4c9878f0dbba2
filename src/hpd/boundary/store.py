"""Sharded, resumable, deterministic storage of Boundary records.

Layout of an output folder::

    <out>/manifest.json                     the run-folder manifest (hpd.runfolder) + selection, n_tasks,
                                            n_boundaries, shard list
    <out>/boundaries/shard-00000.jsonl      one Boundary record per line (``Boundary.to_record()``)
    <out>/boundaries/shard-00000.meta.json  per-shard summary (task uids, counts, diagnostics, sha256)

- **Shards** hold a fixed number of consecutive tasks (in load order), so shard i always holds the same
  tasks for the same data + selection; records are dumped with a fixed key order and no timestamps,
  so two runs write byte-identical shards.
- **Resume**: a shard counts as done when its ``.meta.json`` exists and names the same config hash
  and tasks; it is then skipped. A shard is written to a temporary file and renamed (the meta last), so a
  kill leaves at most a partial temporary file (of the lines or of the meta), which the next run of that shard
  deletes.
- **Never mixed**: an existing ``manifest.json`` with another config hash, data checksum or task
  selection stops the run with a one-line error unless ``overwrite=True`` (which clears the folder's
  shards first).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

from hpd.runfolder import AtomicLines, RunFolderError, check_run, clear_temporaries, dumps, write_json

from .record import Boundary

SHARD_DIR = "boundaries"
#: What a replay folder must agree on to be resumed: the config, the data and the task selection.
RUN_KEYS = ("config_hash", "selection", "inputs.data.sha256")


class StoreError(RunFolderError):
    """A one-line problem with an output folder (config mismatch, unreadable shard)."""


def shard_name(i: int) -> str:
    return f"shard-{i:05d}"


class ShardWriter:
    """Writes one shard: ``add(boundary)`` lines into a temporary file; ``close(meta)`` renames and writes meta."""

    def __init__(self, out: Path, index: int):
        self.dir = Path(out) / SHARD_DIR
        self.meta_path = self.dir / f"{shard_name(index)}.meta.json"
        clear_temporaries(self.meta_path)     # a kill inside the last run's meta write left its temporary file
        self._lines = AtomicLines(self.dir / f"{shard_name(index)}.jsonl", clear_stale=True)
        self.path = self._lines.path

    def add(self, b: Boundary) -> None:
        self._lines.write(dumps(b.to_record(), indent=None) + "\n")

    def close(self, meta: dict) -> dict:
        self._lines.commit()
        meta = {**meta, "file": self.path.name, "sha256": self._lines.sha256}
        write_json(self.meta_path, meta)
        return meta


def read_meta(out: Path, index: int) -> dict | None:
    p = Path(out) / SHARD_DIR / f"{shard_name(index)}.meta.json"
    if not p.is_file() or not (Path(out) / SHARD_DIR / f"{shard_name(index)}.jsonl").is_file():
        return None
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except ValueError:
        return None


def shard_files(out: str | os.PathLike) -> list[Path]:
    d = Path(out) / SHARD_DIR
    return sorted(d.glob("shard-*.jsonl")) if d.is_dir() else []


def iter_records(out: str | os.PathLike) -> Iterator[dict]:
    """Every stored boundary record, in shard then line order."""
    for f in shard_files(out):
        with f.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except ValueError:
                        raise StoreError(f"{f}:{n}: not valid JSON") from None


def load_boundaries(out: str | os.PathLike) -> list[Boundary]:
    """All stored boundaries of a replay output folder (``Boundary.from_record``)."""
    if not shard_files(out):
        raise StoreError(f"no boundary shards under {Path(out) / SHARD_DIR}")
    return [Boundary.from_record(r) for r in iter_records(out)]


def check_manifest(out: Path, expect: dict, overwrite: bool) -> None:
    """Refuse to mix runs (:data:`RUN_KEYS` differ from an existing manifest); ``overwrite`` clears the shards."""
    try:
        diff = check_run(out, expect, what="a replay", keys=RUN_KEYS, overwrite=overwrite)
    except RunFolderError as e:
        raise StoreError(str(e)) from None
    if not diff:
        return
    for f in (Path(out) / SHARD_DIR).glob("shard-*") if (Path(out) / SHARD_DIR).is_dir() else []:
        f.unlink()
