"""The long fuzz run of issue 19: N generated model outputs (default 10,000) through parser -> harness ->
verification (:mod:`hpd.teacher.fuzz`), at boundaries replayed from the built-in benchmark (or ``--data``, a
TRAJECT-Bench ``public_data`` folder). Not a speed target: the figure is the number of exceptions (must be 0).

Usage: ``python benchmarks/fuzz.py [--n 10000] [--seed 0] [--n-tasks 40] [--data DIR] [--out runs/bench/fuzz]``.
Writes ``<out>/fuzz.jsonl`` (one record per case: a verdict or an error), ``<out>/fuzz.json`` (the summary)
and ``<out>/manifest.json``; prints the summary. Exit status 1 when any case raised.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-tasks", type=int, default=40, help="tasks replayed for boundaries (plus every task with an unscorable step)")
    ap.add_argument("--data", default=None, help="TRAJECT-Bench public_data (default: the built-in benchmark, generated here)")
    ap.add_argument("--out", default=str(REPO / "runs" / "bench" / "fuzz"))
    a = ap.parse_args(argv)

    from hpd.bench.builtin import generate
    from hpd.bench.loader import load_bench
    from hpd.runfolder import finish_manifest, new_manifest, write_json, write_jsonl
    from hpd.teacher.fuzz import replay_items, run_fuzz, summarize

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    data = Path(a.data) if a.data else generate(Path(tempfile.mkdtemp()) / "public_data", seed=0, n_per_domain=10)
    config = {"n": a.n, "seed": a.seed, "n_tasks": a.n_tasks, "data": "builtin(seed=0, n_per_domain=10)" if not a.data else str(data)}
    man = new_manifest("python benchmarks/fuzz.py", config, seed=a.seed)
    items = replay_items(load_bench(data), a.n_tasks)
    t0 = time.perf_counter()
    records = list(run_fuzz(items, a.n, seed=a.seed))
    summary = {**summarize(records), "n_boundaries": len(items), "seconds": round(time.perf_counter() - t0, 1)}
    write_jsonl(out / "fuzz.jsonl", records)
    write_json(out / "fuzz.json", summary)
    write_json(out / "manifest.json", finish_manifest(man, exceptions=summary["exceptions"]))
    print(json.dumps(summary, ensure_ascii=False))
    return 1 if summary["exceptions"] else 0


if __name__ == "__main__":
    sys.exit(main())
