"""The Python harness against the real Pi with a real, trained model: the same greedy model on the same tasks,
once in ``hpd.harness`` and once in the pinned npm Pi through the bridge against ``hpd serve``
(``hpd eval --harness pi``). Prints one JSON object: whether the metrics are identical, which episodes' rows or
transcripts differ (compared by :func:`hpd.eval.pi_rollout.comparable_transcript`), both metric sets and both
wall times (the Python harness is the baseline).

    python benchmarks/pi_fidelity.py --model BASE [--adapter DIR] --data DATA --split-file split.json
        [--split test] [--limit 24] [--pool-k 3] [--max-turns 6] [--max-new-tokens 256] [--out runs/pi-fidelity]

Measured 2026-12-01 on this 2-core machine with SmolLM2-135M-Instruct + the 80-update SFT adapter of
``benchmarks/learning_curve.py --at 40,80,120 --global-batch 8 --train-sample 10000 --defect-rate 0.12`` on the
demo's 24 held-out built-in tasks (pool-k 3, 6 turns, 256 new tokens; the model calls real tools, retries,
and calls the distractor tool): identical metrics (TS 0.208, F1 0.460, Step-SR 0.492, RC 0.906, Exact 0, Action-Acc
0.462 in both), 0 differing episodes; Python harness 319 s, real Pi 506 s (4 Node workers). The test
``tests/eval/test_pi_fidelity.py`` makes the same check in CI with a scripted policy on 24 TRAJECT tasks.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

KEYS = ("TS", "F1", "Step-SR", "RC", "Exact", "Action-Acc")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--adapter", default=None)
    ap.add_argument("--data", required=True)
    ap.add_argument("--split-file", default=None)
    ap.add_argument("--split", default="test")
    ap.add_argument("--limit", type=int, default=24, help="tasks, taken alternately by kind as the demo takes them")
    ap.add_argument("--pool-k", type=int, default=3)
    ap.add_argument("--max-turns", type=int, default=6)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="runs/pi-fidelity")
    a = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))
    import torch

    torch.set_num_threads(a.threads)
    from hpd.bench.loader import load_bench
    from hpd.boundary.run import select_tasks
    from hpd.demo import held_out
    from hpd.eval.pi_rollout import PiHarnessPolicy, differing_episodes
    from hpd.eval.variant import evaluate_variant, make_episode_policy

    bench = load_bench(a.data)
    split = a.split if a.split_file else None
    tasks = held_out(select_tasks(bench, a.split_file, split), a.limit)   # alternately by kind, as the demo
    inner = make_episode_policy("model", model=a.model, adapter=a.adapter, temperature=0.0,
                                max_new_tokens=a.max_new_tokens, seed=0, batch_size=64)
    out = Path(a.out)
    t0 = time.perf_counter()
    py = evaluate_variant(bench, tasks, inner, out / "python", max_turns=a.max_turns, pool_k=a.pool_k, batch_size=64)
    t1 = time.perf_counter()
    pi_pol = PiHarnessPolicy(serve_policy=inner.policy, temperature=0.0, max_new_tokens=a.max_new_tokens,
                             workers=a.workers, inner=inner, sessions_dir=out / "pi" / "sessions")
    pi = evaluate_variant(bench, tasks, pi_pol, out / "pi", max_turns=a.max_turns, pool_k=a.pool_k)
    t2 = time.perf_counter()
    drop = ("rollout", "policy")
    print(json.dumps({
        "benchmark": "pi_fidelity", "n_tasks": len(tasks),
        "same_metrics": {k: v for k, v in py.items() if k not in drop} == {k: v for k, v in pi.items() if k not in drop},
        "differing_episodes": differing_episodes(out / "python", out / "pi"),
        "python": {k: py.get(k) for k in KEYS}, "pi": {k: pi.get(k) for k in KEYS},
        "baseline": "the Python harness, same model and tasks, same run",
        "python_s": round(t1 - t0, 1), "pi_s": round(t2 - t1, 1)}, indent=1))


if __name__ == "__main__":
    main()
