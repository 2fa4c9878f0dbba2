"""The replay stage end to end: select tasks, replay + compile per shard, manifest, diagnostics, inspector.

:func:`run_replay` is what ``hpd replay`` calls. Outputs (under ``out``): shards and their summaries
(:mod:`hpd.boundary.store`), ``replay_stats.json`` (:mod:`hpd.boundary.stats`), ``manifest.json`` and
``inspector.html`` (:mod:`hpd.report.inspector`).

Task selection: every task of the data folder in load order, restricted to a split file's uids when
one is given (a JSON list of uids, a JSON object ``{split name: [uids]}`` -- pick with ``split`` --,
or a text file with one uid per line), then -- with ``sample`` -- a seeded random subset of ``sample``
tasks (kept in load order, so every category can appear; load order groups tasks by category), then
the first ``limit`` tasks.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Callable

import hpd
from hpd import PI_PACKAGE, PI_VERSION

from .replay import ReplayConfig, replay_task
from .stats import aggregate, shard_summary
from .store import ShardWriter, StoreError, check_manifest, data_fingerprint, read_meta, selection_hash, write_json

DEFAULT_SHARD_TASKS = 250


def read_split_file(path: str | Path, split: str | None) -> list[str]:
    """Task uids from a split file (see module docstring); one-line :class:`StoreError` on bad input."""
    p = Path(path)
    if not p.is_file():
        raise StoreError(f"split file not found: {p}")
    raw = p.read_text(encoding="utf-8")
    try:
        obj = json.loads(raw)
    except ValueError:
        return [ln.strip() for ln in raw.splitlines() if ln.strip() and not ln.startswith("#")]
    if isinstance(obj, list):
        return [str(u) for u in obj]
    if isinstance(obj, dict):
        holder = obj.get("splits") if isinstance(obj.get("splits"), dict) else obj
        lists = {k: v for k, v in holder.items() if isinstance(v, list)}
        if split is None:
            if len(lists) == 1:
                return [str(u) for u in next(iter(lists.values()))]
            raise StoreError(f"split file {p} holds several splits {sorted(lists)}; choose one with --split")
        if split not in lists:
            raise StoreError(f"split {split!r} not in {p} (has {sorted(lists)})")
        return [str(u) for u in lists[split]]
    raise StoreError(f"split file {p}: expected a JSON list or object of uid lists")


def select_tasks(bench, split_file=None, split=None, limit=None, sample=None, seed=0) -> list:
    tasks = list(bench.tasks)
    if split_file:
        want = set(read_split_file(split_file, split))
        missing = want - {t.uid for t in tasks}
        if missing:
            raise StoreError(f"{len(missing)} uid(s) of the split file are not in the data, e.g. {sorted(missing)[0]}")
        tasks = [t for t in tasks if t.uid in want]
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
    inspector: bool = True,
    inspector_tasks: int | None = 500,
    inspector_privilege: str | None = None,
    progress: Callable[[str], None] | None = None,
    bench=None,
    workers: int = 1,
) -> dict:
    """Replay every selected task into ``out``; returns ``{"manifest", "stats"}``. Resumable (see store).

    ``workers > 1`` replays shards in that many forked processes (each writes its own shard; the
    output is identical to a single-process run).
    """
    from hpd.bench.loader import load_bench

    config = config or ReplayConfig()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    bench = bench or load_bench(data)
    tasks = select_tasks(bench, split_file, split, limit, sample, seed)
    uids = [t.uid for t in tasks]
    manifest = {
        "command": "replay",
        "config": config.to_record(),
        "config_hash": config.hash(),
        "code_version": hpd.__version__,
        "pi": {"package": PI_PACKAGE, "version": PI_VERSION},
        "data": {"path": str(bench.data_dir), "fingerprint": data_fingerprint(bench.data_dir)},
        "selection": selection_hash(uids),
        "split_file": str(split_file) if split_file else None,
        "split": split,
        "limit": limit,
        "sample": sample,
        "seed": seed if sample is not None else None,
        "tokenizer": tokenizer_path,
        "privileges": list(config.privileges),
        "doc_version": manifest_doc_version(),
        "shard_tasks": shard_tasks,
        "status": "running",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    check_manifest(out, manifest, overwrite)
    write_json(out / "manifest.json", manifest)
    t0 = time.perf_counter()
    n_shards = (len(tasks) + shard_tasks - 1) // shard_tasks
    chunks = [tasks[si * shard_tasks:(si + 1) * shard_tasks] for si in range(n_shards)]
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
    stats = aggregate(metas)
    stats.update({"privileges": list(config.privileges), "config_hash": config.hash()})
    write_json(out / "replay_stats.json", stats)
    manifest.update({
        "status": "complete",
        "n_tasks": stats["n_tasks"],
        "n_boundaries": stats["n_boundaries"],
        "n_boundaries_d2": stats["n_boundaries_d2"],
        "n_shards": n_shards,
        "shards": [{"file": m["file"], "sha256": m["sha256"], "n_tasks": m["n_tasks"],
                    "n_boundaries": m["n_boundaries"]} for m in metas],
        "seconds": round(time.perf_counter() - t0, 3),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
    })
    if inspector:
        from hpd.report.inspector import write_inspector

        path = write_inspector(out, out / "inspector.html", max_tasks=inspector_tasks,
                               privilege=inspector_privilege, bench=bench)
        manifest["inspector"] = path.name
    write_json(out / "manifest.json", manifest)
    return {"manifest": manifest, "stats": stats}


_JOB = None  # (bench, config, chunks, out, tokenizer) for the shard workers (inherited through fork)


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


def manifest_doc_version() -> int:
    from hpd.document.model import DOC_VERSION

    return DOC_VERSION


def load_run_config(out) -> ReplayConfig:
    """The :class:`ReplayConfig` a replay output folder was made with (for :func:`hpd.boundary.restore`)."""
    p = Path(out) / "manifest.json"
    if not p.is_file():
        raise StoreError(f"no manifest.json in {out}")
    return ReplayConfig.from_record(json.loads(p.read_text(encoding="utf-8"))["config"])
