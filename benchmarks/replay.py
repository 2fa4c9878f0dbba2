"""Benchmark: boundaries per second for replay + compile over every available TRAJECT-Bench task.

Usage: python benchmarks/replay.py [--data DIR] [--limit N] [--workers N] [--out DIR]

Measured in one run, over the same tasks (load time excluded and reported apart):

* ``baseline_replay``: reference replay through ``hpd.harness.Harness`` + ``ReplayEnv`` with boundary
  capture (context + runtime-state snapshot) but NO document compile, one process;
* ``replay_compile``: the same plus AutoProbe compile + render + token length at all three privilege
  levels, one process (what ``hpd replay`` does per boundary, minus writing shards);
* ``replay_compile_parallel``: the same in ``--workers`` forked processes (default: CPU count);
* ``compile_share``: the fraction of single-process time spent on documents;
* every measurement also reports ``cpu_s`` / ``boundaries_per_cpu_s`` (process CPU time, children
  included), which stays meaningful when other jobs share the machine (``loadavg_at_start``);
* ``all_tasks_s``: wall seconds of the fastest replay + compile configuration; ``target_s`` 30;
  ``meets_target``.

Prints one JSON object (stable keys) and, with ``--out``, writes it to ``<out>/bench_replay.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

from hpd.bench.loader import load_bench
from hpd.boundary.replay import ReplayConfig, replay_task

TARGET_S = 30.0
_JOB = None


def _count(args) -> int:
    lo, hi, compile_docs = args
    bench, cfg, tasks = _JOB
    return sum(len(replay_task(t, bench, cfg, compile_docs=compile_docs)) for t in tasks[lo:hi])


def measure(tasks, bench, cfg, *, compile_docs: bool, workers: int = 1) -> dict:
    global _JOB
    _JOB = (bench, cfg, tasks)
    import resource

    t0 = time.perf_counter()
    c0 = time.process_time() + resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    if workers <= 1:
        n = _count((0, len(tasks), compile_docs))
    else:
        step = max(1, len(tasks) // (workers * 8))
        parts = [(i, min(i + step, len(tasks)), compile_docs) for i in range(0, len(tasks), step)]
        with mp.get_context("fork").Pool(workers) as pool:
            n = sum(pool.imap_unordered(_count, parts))
    dt = time.perf_counter() - t0
    cpu = time.process_time() + resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - c0
    return {"n_boundaries": n, "seconds": round(dt, 3), "boundaries_per_s": round(n / dt, 1), "workers": workers,
            "cpu_s": round(cpu, 3), "boundaries_per_cpu_s": round(n / cpu, 1) if cpu else None}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    bench = load_bench(a.data)
    load_s = time.perf_counter() - t0
    tasks = bench.tasks[: a.limit] if a.limit else bench.tasks
    cfg = ReplayConfig()
    base = measure(tasks, bench, cfg, compile_docs=False)
    full = measure(tasks, bench, cfg, compile_docs=True)
    res = {
        "n_tasks": len(tasks),
        "n_boundaries": full["n_boundaries"],
        "n_boundaries_d2": sum(t.n_boundaries for t in tasks),
        "load_s": round(load_s, 3),
        "baseline_replay": base,
        "replay_compile": full,
        "compile_share": round(1 - base["seconds"] / full["seconds"], 3) if full["seconds"] else None,
        "privileges": list(cfg.privileges),
        "cpu_count": os.cpu_count(),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    best = full
    if a.workers > 1:
        par = measure(tasks, bench, cfg, compile_docs=True, workers=a.workers)
        res["replay_compile_parallel"] = par
        best = par if par["seconds"] < full["seconds"] else full
    res.update({"boundaries_per_s": best["boundaries_per_s"], "all_tasks_s": best["seconds"], "target_s": TARGET_S,
                "meets_target": best["seconds"] <= TARGET_S})
    print(json.dumps(res, indent=1))
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "bench_replay.json").write_text(json.dumps(res, indent=1) + "\n")
    return res


if __name__ == "__main__":
    main(sys.argv[1:])
