"""Benchmark: time to load every TRAJECT-Bench task and replay every task's reference calls offline.

Usage: python benchmarks/load_replay.py [--data DIR] [--harness]

Prints one JSON object:
* ``baseline_json_load_s``: plain ``json.load`` of every raw task/tool file (the floor for any loader);
* ``load_s``: ``hpd.bench.load_bench`` (parse, canonicalise, resolve against the catalog);
* ``replay_s``: for every task, build its ``ReplayEnv`` (pool + index) and execute each scorable gold call
  (``ReplayEnv.execute``: schema check, exact/near lookup), checking every call is an exact match;
* ``load_plus_replay_s`` (target <= 30 s on the 2-core dev machine);
* with ``--harness``: ``harness_reference_eval_s``, the full ``hpd eval --policy reference`` path
  (episodes through ``hpd.harness.Harness`` + metrics);
* ``peak_rss_mb`` (``ru_maxrss``) and counts.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=None)
    ap.add_argument("--harness", action="store_true", help="also time the reference eval through the harness")
    a = ap.parse_args()

    from hpd.bench.loader import load_bench, resolve_data_dir

    d = resolve_data_dir(a.data)
    t0 = time.perf_counter()
    n_raw = 0
    for f in sorted(d.rglob("*.json")):
        with open(f, encoding="utf-8") as fh:
            obj = json.load(fh)
        n_raw += len(obj) if isinstance(obj, list) else 1
        del obj
    baseline = time.perf_counter() - t0

    t0 = time.perf_counter()
    bench = load_bench(d)
    load_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    n_calls = n_exact = 0
    for task in bench.tasks:
        env = bench.env(task)
        for s in task.scorable_steps:
            r = env.execute(env.pool.display(s.key), s.call()["arguments"])
            n_calls += 1
            n_exact += int(r["match"] == "exact" and r["text"] == s.output)
    replay_s = time.perf_counter() - t0

    out = {
        "data": str(d),
        "n_tasks": len(bench.tasks),
        "n_raw_entries": n_raw,
        "n_calls": n_calls,
        "n_exact": n_exact,
        "baseline_json_load_s": round(baseline, 3),
        "load_s": round(load_s, 3),
        "replay_s": round(replay_s, 3),
        "load_plus_replay_s": round(load_s + replay_s, 3),
        "target_s": 30,
    }
    if a.harness:
        from hpd.eval.reference import ReferencePolicy
        from hpd.eval.rollout import run_rollouts, summarize
        t0 = time.perf_counter()
        rows, _ = run_rollouts(bench, bench.tasks, ReferencePolicy(), batch_size=256, keep_messages=False)
        summary = summarize(rows)
        out["harness_reference_eval_s"] = round(time.perf_counter() - t0, 3)
        out["harness_reference_TS"] = summary["TS"]
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(out, indent=1))
    sys.exit(0 if n_exact == n_calls else 1)


if __name__ == "__main__":
    main()
