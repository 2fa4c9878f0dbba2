"""Sharded, resumable, deterministic storage of Boundary records.

Layout of an output folder::

    <out>/manifest.json                     command, config (+hash), code version, Pi version, data path
                                            and fingerprint, n_tasks, n_boundaries, shard list, status
    <out>/boundaries/shard-00000.jsonl      one Boundary record per line (``Boundary.to_record()``)
    <out>/boundaries/shard-00000.meta.json  per-shard summary (task uids, counts, diagnostics, sha256)

- **Shards** hold a fixed number of consecutive tasks (in load order), so shard i always holds the same
  tasks for the same data + selection; records are dumped with a fixed key order and no timestamps,
  so two runs write byte-identical shards.
- **Resume**: a shard counts as done when its ``.meta.json`` exists and names the same config hash
  and tasks; it is then skipped. A shard is written to ``*.tmp`` and renamed (the meta last), so a
  kill leaves at most a partial ``*.tmp`` that the next run rewrites.
- **Never mixed**: an existing ``manifest.json`` with another config hash, data fingerprint or task
  selection stops the run with a one-line error unless ``overwrite=True`` (which clears the folder's
  shards first).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Iterable, Iterator

from .model import Boundary

SHARD_DIR = "boundaries"


class StoreError(ValueError):
    """A one-line problem with an output folder (config mismatch, unreadable shard)."""


def dumps(rec: dict) -> str:
    return json.dumps(rec, ensure_ascii=False, separators=(",", ":"))


def shard_name(i: int) -> str:
    return f"shard-{i:05d}"


def data_fingerprint(data_dir: str | os.PathLike) -> str:
    """sha256 (16 hex) over the relative paths and bytes of every ``*.json`` file under the data folder."""
    root = Path(data_dir)
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.json")):
        h.update(f.relative_to(root).as_posix().encode())
        h.update(b"\0")
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()[:16]


def selection_hash(uids: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(uids).encode()).hexdigest()[:16]


def write_json(path: Path, obj) -> None:
    """Write JSON atomically (tmp + rename), keys in insertion order, 2-space indent."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


class ShardWriter:
    """Writes one shard: ``add(boundary)`` lines into ``*.tmp``; ``close(meta)`` renames and writes meta."""

    def __init__(self, out: Path, index: int):
        self.dir = Path(out) / SHARD_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / f"{shard_name(index)}.jsonl"
        self.tmp = self.dir / f"{shard_name(index)}.jsonl.tmp"
        self._fh = self.tmp.open("w", encoding="utf-8")
        self._h = hashlib.sha256()

    def add(self, b: Boundary) -> None:
        line = dumps(b.to_record()) + "\n"
        self._h.update(line.encode("utf-8"))
        self._fh.write(line)

    def close(self, meta: dict) -> dict:
        self._fh.close()
        os.replace(self.tmp, self.path)
        meta = {**meta, "file": self.path.name, "sha256": self._h.hexdigest()}
        write_json(self.dir / f"{self.path.stem}.meta.json", meta)
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
    """Refuse to mix runs: compare ``config_hash``/``data.fingerprint``/``selection`` with an existing manifest."""
    p = Path(out) / "manifest.json"
    if not p.is_file():
        return
    try:
        old = json.loads(p.read_text(encoding="utf-8"))
    except ValueError:
        old = {}
    diff = [k for k in ("config_hash", "selection") if old.get(k) != expect.get(k)]
    if (old.get("data") or {}).get("fingerprint") != (expect.get("data") or {}).get("fingerprint"):
        diff.append("data")
    if not diff:
        return
    if not overwrite:
        raise StoreError(f"{out} holds a replay with a different {', '.join(diff)}; use another --out or --overwrite")
    for f in (Path(out) / SHARD_DIR).glob("shard-*") if (Path(out) / SHARD_DIR).is_dir() else []:
        f.unlink()
