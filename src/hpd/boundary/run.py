"""The replay stage end to end: select tasks, replay + compile per shard, manifest, diagnostics; and the
way later stages open a finished replay folder.

:func:`run_replay` is what ``hpd replay`` calls. Outputs (under ``out``): shards and their summaries
(:mod:`hpd.boundary.store`), ``replay_stats.json`` (:mod:`hpd.boundary.stats`) and ``manifest.json``
(:mod:`hpd.runfolder`). The inspector is written by the command layer (``hpd replay``, ``hpd demo``).

:func:`open_run` is how a later stage reads a replay folder: its manifest, its :class:`ReplayConfig`,
its boundaries and a :class:`~hpd.boundary.replay.Restorer` that parks live harnesses at them.

Task selection: every task of the data folder in load order, restricted to one part of a split file
(:func:`hpd.bench.split.read_split`) when one is given, then -- with ``sample`` -- a seeded random subset
of ``sample`` tasks (kept in load order, so every category can appear; load order groups tasks by
category), then the first ``limit`` tasks.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from hpd.runfolder import (RunFolderError, config_hash, finish_manifest, finished_manifest, new_manifest, prepare_out,
                           read_manifest, write_json)

from .replay import ReplayConfig, Restorer, replay_task
from .stats import aggregate, shard_summary
from .store import ShardWriter, StoreError, check_manifest, load_boundaries, read_meta

DEFAULT_SHARD_TASKS = 250


def select_tasks(bench, split_file=None, split=None, limit=None, sample=None, seed=0) -> list:
    from hpd.bench.split import SplitFileError, select

    tasks = list(bench.tasks)
    if split_file:
        try:
            tasks = select(tasks, split_file, split)
        except SplitFileError as e:
            raise StoreError(str(e)) from None
    if sample is not None:
        if sample < 1:
            raise StoreError("--sample must be >= 1")
        keep = sorted(random.Random(seed).sample(range(len(tasks)), min(sample, len(tasks))))
        tasks = [tasks[i] for i in keep]
    if limit is not None:
        if limit < 1:
            raise StoreError("--limit must be >= 1")
        tasks = tasks[:limit]
    if not tasks:
        raise StoreError("no tasks selected")
    return tasks


def run_replay(
    data,
    out,
    config: ReplayConfig | None = None,
    *,
    split_file=None,
    split: str | None = None,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    shard_tasks: int = DEFAULT_SHARD_TASKS,
    tokenizer=None,
    tokenizer_path: str | None = None,
    overwrite: bool = False,
    progress: Callable[[str], None] | None = None,
    bench=None,
    workers: int = 1,
    command: str = "hpd replay",
    skip_bad: bool = False,
    strict_catalog: bool = False,
) -> dict:
    """Replay every selected task into ``out``; returns ``{"manifest", "stats"}``. Resumable (see store).

    ``workers > 1`` replays shards in that many forked processes (each writes its own shard; the
    output is identical to a single-process run). ``skip_bad`` / ``strict_catalog``: how the data is
    loaded when ``bench`` is not given (:func:`hpd.bench.loader.load_bench`); skipped entries are listed in
    the manifest (``bad_entries``).
    """
    from hpd.bench.loader import data_checksum, load_bench
    from hpd.document.schema import DOC_VERSION

    config = config or ReplayConfig()
    out = prepare_out(out)
    bench = bench or load_bench(data, skip_bad=skip_bad, strict_catalog=strict_catalog)
    tasks = select_tasks(bench, split_file, split, limit, sample, seed)
    manifest = new_manifest(
        command, config.to_record(), seed=seed if sample is not None else None,
        inputs={"data": data_checksum(bench.data_dir), "split_file": split_file, "tokenizer": tokenizer_path},
        selection=config_hash([t.uid for t in tasks]), split=split, limit=limit, sample=sample,
        privileges=list(config.privileges), doc_version=DOC_VERSION, shard_tasks=shard_tasks,
        bad_entries=[e.to_record() for e in bench.bad])
    check_manifest(out, manifest, overwrite)
    write_json(out / "manifest.json", manifest)
    n_shards = (len(tasks) + shard_tasks - 1) // shard_tasks
    chunks = [tasks[si * shard_tasks:(si + 1) * shard_tasks] for si in range(n_shards)]
    metas = _replay_shards(out, chunks, config, bench, tokenizer, workers, progress)
    stats = aggregate(metas)
    stats.update({"privileges": list(config.privileges), "config_hash": config.hash()})
    write_json(out / "replay_stats.json", stats)
    finish_manifest(
        manifest, n_tasks=stats["n_tasks"], n_boundaries=stats["n_boundaries"],
        n_boundaries_d2=stats["n_boundaries_d2"], n_shards=n_shards,
        shards=[{"file": m["file"], "sha256": m["sha256"], "n_tasks": m["n_tasks"], "n_boundaries": m["n_boundaries"]}
                for m in metas])
    write_json(out / "manifest.json", manifest)
    return {"manifest": manifest, "stats": stats}


_JOB = None  # (bench, config, chunks, out, tokenizer) for the shard workers (inherited through fork)


def _replay_shards(out: Path, chunks: list, config: ReplayConfig, bench, tokenizer, workers: int,
                   progress: Callable[[str], None] | None) -> list[dict]:
    """Replay every shard not done before (same config hash and tasks), in ``workers`` forked processes
    when there are several; returns every shard's summary, in shard order."""
    n_shards = len(chunks)
    metas: list = [None] * n_shards
    todo = []
    for si, chunk in enumerate(chunks):
        meta = read_meta(out, si)
        if meta is not None and meta.get("config_hash") == config.hash() and meta.get("tasks") == [t.uid for t in chunk]:
            metas[si] = meta
            if progress:
                progress(f"shard {si + 1}/{n_shards}: done before, skipped")
        else:
            todo.append(si)

    def _done(si: int, meta: dict) -> None:
        metas[si] = meta
        if progress:
            progress(f"shard {si + 1}/{n_shards}: {meta['n_tasks']} tasks, {meta['n_boundaries']} boundaries")

    global _JOB
    _JOB = (bench, config, chunks, out, tokenizer)
    try:
        if workers > 1 and len(todo) > 1:
            import multiprocessing as mp

            with mp.get_context("fork").Pool(min(workers, len(todo))) as pool:
                for si, meta in pool.imap_unordered(_do_shard, todo):
                    _done(si, meta)
        else:
            for si in todo:
                _done(*_do_shard(si))
    finally:
        _JOB = None
    return metas


def _do_shard(si: int) -> tuple[int, dict]:
    """Replay + compile one shard and write it (tmp + rename); returns its summary."""
    bench, config, chunks, out, tokenizer = _JOB
    chunk = chunks[si]
    w = ShardWriter(out, si)
    per_task = []
    for t in chunk:
        bs = replay_task(t, bench, config, tokenizer=tokenizer)
        for b in bs:
            w.add(b)
        per_task.append(bs)
    return si, w.close({"config_hash": config.hash(), **shard_summary(chunk, per_task)})


@dataclass
class ReplayRun:
    """A finished ``hpd replay`` folder as later stages see it (:func:`open_run`)."""

    out: Path
    manifest: dict
    config: ReplayConfig

    @property
    def data_dir(self) -> Path | None:
        p = ((self.manifest.get("inputs") or {}).get("data") or {}).get("path")
        return Path(p) if p else None

    def boundaries(self) -> list:
        """Every stored :class:`~hpd.boundary.record.Boundary`, in shard then line order."""
        return load_boundaries(self.out)

    def restorer(self, bench=None, data=None) -> Restorer:
        """Parks live harnesses at this run's boundaries; the data is ``bench``, else ``data``, else the run's."""
        return Restorer(self.config, bench=bench, data_dir=Path(data) if data else self.data_dir)


def open_run(out, *, privilege: str | None = None, complete: bool = True) -> ReplayRun:
    """A replay folder with its config; one-line :class:`StoreError` when it is not a (finished) replay or
    lacks documents at ``privilege``."""
    out = Path(out)
    try:
        man = None if not out.is_dir() else finished_manifest(out, "replay") if complete else read_manifest(out)
    except RunFolderError as e:
        raise StoreError(str(e)) from None
    if man is None:
        raise StoreError(f"{out}: not a replay output folder (run `hpd replay --out {out}` first)")
    try:
        config = ReplayConfig.from_record(man["config"])
    except (KeyError, TypeError, ValueError) as e:
        raise StoreError(f"{out / 'manifest.json'}: unreadable replay manifest ({e})") from None
    if privilege is not None and privilege not in config.privileges:
        raise StoreError(f"{out}: documents were compiled for {list(config.privileges)}, not {privilege!r}")
    return ReplayRun(out, man, config)


def load_run_config(out) -> ReplayConfig:
    """The :class:`ReplayConfig` a replay output folder was made with (for :func:`hpd.boundary.restore`)."""
    return open_run(out, complete=False).config
