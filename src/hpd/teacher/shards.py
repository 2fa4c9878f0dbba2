"""Append-only, restartable shard store for the teach stage.

Layout of ``<out>``::

    manifest.json          # command, config + config_hash, code/Pi version, seed, status, counts
    shards/part-00000.jsonl  # one JSON record per finished boundary (one line each)
    shards/part-00001.jsonl  # a resumed run appends to a NEW part file; old parts are never rewritten

Durability: each batch of finished boundaries is written, flushed and ``fsync``-ed together. A
SIGKILL can leave at most a partial last line in the newest part; on open it is truncated away
(the boundary is simply redone). Duplicates cannot occur because finished ids are skipped, and
reading keeps the first record per id. A resume with a different ``config_hash`` is refused (we
never silently mix results from two configs).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable


class ConfigMismatch(RuntimeError):
    pass


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(str(d), os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(path: Path, obj) -> None:
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as f:
        json.dump(obj, f, indent=2, sort_keys=True, default=str)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


class ShardStore:
    def __init__(self, out_dir: str | Path, *, key: str = "boundary_id"):
        self.out = Path(out_dir)
        self.dir = self.out / "shards"
        self.key = key
        self._fh = None

    # -- reading ----------------------------------------------------------------------------
    def parts(self) -> list[Path]:
        return sorted(self.dir.glob("part-*.jsonl")) if self.dir.is_dir() else []

    def _repair(self) -> None:
        """Truncate a partial trailing line (a write cut by SIGKILL) in every part."""
        for p in self.parts():
            data = p.read_bytes()
            if data and not data.endswith(b"\n"):
                cut = data.rfind(b"\n") + 1
                with p.open("r+b") as f:
                    f.truncate(cut)
                    f.flush()
                    os.fsync(f.fileno())

    def records(self) -> dict[str, dict]:
        """id -> record (first record wins), over all parts in order. Partial/corrupt lines are
        skipped (only the last line of a part can be partial, and it is repaired on open)."""
        out: dict[str, dict] = {}
        for p in self.parts():
            with p.open("rb") as f:
                for line in f:
                    if not line.endswith(b"\n"):
                        break
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    k = rec.get(self.key)
                    if k is not None and k not in out:
                        out[k] = rec
        return out

    # -- writing ----------------------------------------------------------------------------
    def open(self, manifest: dict, *, overwrite: bool = False) -> dict[str, dict]:
        """Check/write the manifest, repair parts, open a fresh part; returns finished records."""
        self.out.mkdir(parents=True, exist_ok=True)
        mpath = self.out / "manifest.json"
        if mpath.exists() and not overwrite:
            try:
                old = json.loads(mpath.read_text())
            except json.JSONDecodeError:
                old = {}
            if old.get("config_hash") and old.get("config_hash") != manifest.get("config_hash"):
                raise ConfigMismatch(
                    f"{self.out} holds a teach run with a different config (hash {old.get('config_hash')} != "
                    f"{manifest.get('config_hash')}); use a new --out or --overwrite")
        if overwrite:
            for p in self.parts():
                p.unlink()
            for name in ("targets.jsonl", "diagnostics.json"):
                (self.out / name).unlink(missing_ok=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._repair()
        done = self.records()
        parts = self.parts()
        nxt = (int(parts[-1].stem.split("-")[1]) + 1) if parts else 0
        write_json_atomic(mpath, {**manifest, "status": "running", "n_done_at_open": len(done)})
        self._path = self.dir / f"part-{nxt:05d}.jsonl"
        self._fh = None
        return done

    def append(self, records: Iterable[dict]) -> None:
        lines = [json.dumps(r, sort_keys=True, ensure_ascii=False, default=str) + "\n" for r in records]
        if not lines:
            return
        if self._fh is None:
            self._fh = open(self._path, "a", encoding="utf-8")
            _fsync_dir(self.dir)
        self._fh.write("".join(lines))
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
