"""Benchmark of the teach stage: boundaries per second for harness verification alone and for the
tiny-model teacher (CPU), each with its comparison baseline measured in the same run.

* verification (ours): each boundary's live harness is restored once (one replay per task, a fork
  kept per boundary) and every candidate is verified on a fork of it (K=2 candidates = the
  reference action twice, so every candidate executes a full tool batch);
  baseline: re-drive the harness from the task start for every candidate (``hpd.boundary.restore``).
* tiny-model teacher (ours): ``teach`` with the hf backend, K=2, one attempt, all boundaries in one
  batched call; baseline: one boundary per teacher call (``batch_boundaries=1``).

Usage: ``python benchmarks/teach.py [--data DIR] [--out runs/benchmarks/teach] [--n-tasks 120] [--model DIR]
[--n-teacher 8] [--max-new-tokens 32]``. Writes ``<out>/bench_teach.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.environ.get("HPD_TRAJECT_DIR", str(REPO.parent / "shared" / "traject-bench" / "public_data")))
    ap.add_argument("--out", default=str(REPO / "runs" / "bench" / "teach"))
    ap.add_argument("--n-tasks", type=int, default=120)
    ap.add_argument("--model", default=None, help="tiny model folder (default: build one with hpd.policy.tiny)")
    ap.add_argument("--n-teacher", type=int, default=8, help="boundaries for the tiny-model teacher timing")
    ap.add_argument("--gen-batch", type=int, default=16,
                    help="sequences per forward pass of the tiny teacher (each prompt is prefilled on its own, "
                         "so memory grows with rows x prompt length, not with its square)")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--skip-teacher", action="store_true")
    a = ap.parse_args(argv)

    import hpd
    from hpd.bench.loader import load_bench
    from hpd.boundary import ReplayConfig, replay_task, restore
    from hpd.teacher.boundaries import items_from_boundaries
    from hpd.teacher.verify import verify

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if not Path(a.data).is_dir():
        print(f"data not found: {a.data}", file=sys.stderr)
        return 2
    bench = load_bench(a.data)
    tasks = bench.tasks[:: max(1, len(bench.tasks) // a.n_tasks)][: a.n_tasks]  # a spread over the load order
    cfg = ReplayConfig()
    t0 = time.perf_counter()
    bs = [b for t in tasks for b in replay_task(t, bench, cfg, keep_forks=True, compile_docs=False)]
    t_replay = time.perf_counter() - t0
    items = items_from_boundaries(bs)
    K = 2

    # --- verification alone, ours: one restored state per boundary, a fork per candidate
    t0 = time.perf_counter()
    n_ok = 0
    for it in items:
        base = it.restore()
        for _ in range(K):
            n_ok += verify(it.reference, it, base).ok
    t_ver = time.perf_counter() - t0
    # --- baseline: re-drive the harness from the start for every candidate
    t0 = time.perf_counter()
    n_ok_base = 0
    for b, it in zip(bs, items):
        for _ in range(K):
            n_ok_base += verify(it.reference, it, restore(b, bench, cfg)).ok
    t_base = time.perf_counter() - t0
    assert n_ok == n_ok_base, "baseline and ours must agree on every verdict"
    res = {
        "code_version": hpd.__version__, "pi_version": f"{hpd.PI_PACKAGE}@{hpd.PI_VERSION}", "data": a.data,
        "n_tasks": len(tasks), "n_boundaries": len(items), "K": K, "replay_seconds": round(t_replay, 3),
        "verification": {
            "boundaries_per_s": round(len(items) / t_ver, 2), "candidates_per_s": round(K * len(items) / t_ver, 2),
            "seconds": round(t_ver, 3), "verified_share": round(n_ok / (K * len(items)), 4),
            "baseline": "re-drive the harness from the task start per candidate (hpd.boundary.restore)",
            "baseline_boundaries_per_s": round(len(items) / t_base, 2), "baseline_seconds": round(t_base, 3),
            "speedup": round(t_base / t_ver, 2),
        },
    }
    print(json.dumps(res["verification"], indent=1))
    (out / "bench_teach.json").write_text(json.dumps(res, indent=2, sort_keys=True) + "\n")  # kept if the teacher part fails

    if not a.skip_teacher:
        from hpd.policy.backends.hf import HFPolicy
        from hpd.teacher.proposal import PolicyTeacher
        from hpd.teacher.run import TeachConfig, teach

        model = a.model
        if model is None:
            from hpd.policy.tiny import build_tiny
            model = str(build_tiny(out / "tiny-xs", "xs", seed=0))
        # the I view needs documents: compile them for the teacher's boundaries only
        sub = [b for t in tasks for b in replay_task(t, bench, cfg, keep_forks=True)][: a.n_teacher]
        sub_items = items_from_boundaries(sub)
        pol = HFPolicy(model, device="cpu", batch_size=a.gen_batch)
        teacher = PolicyTeacher(pol, pol.tokenizer, privilege="plan", max_new_tokens=a.max_new_tokens, name="hf-tiny")
        prompt_tokens = [len(pol.tokenizer(teacher.prompt(it))["input_ids"]) for it in sub_items]
        timings = {}
        for name, bb in (("batched", len(sub_items)), ("baseline_one_per_call", 1)):
            t0 = time.perf_counter()
            r = teach(sub_items, teacher, TeachConfig(k=K, attempts=1, batch_boundaries=bb))
            timings[name] = (time.perf_counter() - t0, r.diagnostics)
        tb, db = timings["batched"]
        tu, du = timings["baseline_one_per_call"]
        assert [x for x in db["coverage_by_attempt"]] == [x for x in du["coverage_by_attempt"]], "batching changed results"
        res["tiny_teacher"] = {
            "model": model, "n_boundaries": len(sub_items), "K": K, "attempts": 1, "max_new_tokens": a.max_new_tokens,
            "prompt_tokens_mean": round(sum(prompt_tokens) / len(prompt_tokens), 1), "prompt_tokens_max": max(prompt_tokens),
            "boundaries_per_s": round(len(sub_items) / tb, 3), "seconds": round(tb, 2),
            "baseline": "one boundary per teacher call (batch_boundaries=1)",
            "baseline_boundaries_per_s": round(len(sub_items) / tu, 3), "baseline_seconds": round(tu, 2),
            "speedup": round(tu / tb, 2), "first_attempt_acceptance": db["first_attempt_acceptance"],
        }
        print(json.dumps(res["tiny_teacher"], indent=1))
    res["time"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    (out / "bench_teach.json").write_text(json.dumps(res, indent=2, sort_keys=True) + "\n")
    print(f"wrote {out / 'bench_teach.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
