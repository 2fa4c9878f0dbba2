"""Native evaluation with the prefix cache (``HFPolicy(prefix_cache_gib=1.0)``, the default) against one-pass
prefill of every prompt (``prefix_cache_gib=None``): the demo's evaluation call shape on SmolLM2-135M-Instruct.

The demo's held-out tasks (``hpd.demo.Demo.prepare`` into ``--work``: data, split, SmolLM2 from its wheel), a
model (``--adapter``: a trained LoRA adapter, whose episodes take several turns; the base model answers in one
turn, where there is nothing to reuse) evaluated natively twice through :func:`hpd.eval.variant.evaluate_variant`
with the demo's settings (greedy, 6 turns, 256 new tokens, pool-k 3). Turn ``t + 1`` of an episode repeats turn
``t``'s prompt, so with the cache only the new blocks are prefilled. Prints one JSON object: wall seconds of
each run, ``ratio`` = uncached / cached seconds, prompt tokens prefilled and reused, and ``same_transcripts``
(episodes whose transcripts agree; blocked prefill differs from one pass by float summation order, which may
flip a near-tie). Writes it to ``<out>/bench_prefix_cache.json`` with a manifest when ``--out`` is given.

    python benchmarks/prefix_cache.py --adapter DIR [--work /tmp/hpd-bench-prefix] [--tasks 24] [--threads 2]
        [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _evaluate(demo, bench, tasks, base: Path, adapter: str | None, out: Path, cache_gib: float | None):
    from hpd.eval.rollout import ModelEpisodePolicy
    from hpd.eval.variant import evaluate_variant
    from hpd.policy.backends.hf import HFPolicy

    pol = HFPolicy(str(base), adapter=adapter, batch_size=64, prefix_cache_gib=cache_gib)
    episode_policy = ModelEpisodePolicy(pol, temperature=0.0, max_new_tokens=demo.cfg.max_new_tokens)
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    summary = evaluate_variant(bench, tasks, episode_policy, out, pool_k=demo.cfg.pool_k,
                               max_turns=demo.cfg.eval_turns, batch_size=64, action_batch_size=64)
    return time.perf_counter() - t0, summary, pol


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default="/tmp/hpd-bench-prefix")
    ap.add_argument("--adapter", default=None, help="a LoRA adapter on SmolLM2 (e.g. a demo's train/sft/adapter)")
    ap.add_argument("--tasks", type=int, default=24, help="held-out tasks (the demo's 24 by default)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    from hpd.demo import Demo, config_for_model, setup_threads
    from hpd.eval.variant import transcripts

    setup_threads()
    work = Path(a.work)
    demo = Demo(config_for_model("smollm2", out=work, test_limit=a.tasks), log=lambda s: None)
    bench, tasks, base, _bds = demo.prepare()
    runs = {}
    for name, gib in (("cached", 1.0), ("uncached", None)):
        sec, summary, pol = _evaluate(demo, bench, tasks, base, a.adapter, work / f"eval-{name}", gib)
        st = pol.prefix_cache.stats if pol.prefix_cache is not None else {}
        runs[name] = {"seconds": round(sec, 1), "TS": summary["TS"], "RC": summary["RC"],
                      "prefilled_tokens": st.get("computed_tokens"), "reused_tokens": st.get("reused_tokens")}
    uids = [t.uid for t in tasks]
    ta, tb = (transcripts(work / f"eval-{n}", uids) for n in ("cached", "uncached"))
    same = sum(x.get("messages") == y.get("messages") for x, y in zip(ta, tb))
    res = {"benchmark": "prefix_cache", "model": str(base), "adapter": a.adapter, "tasks": len(tasks),
           "threads": a.threads, "baseline": "one-pass prefill of every prompt (prefix_cache_gib=None)",
           "ratio": round(runs["uncached"]["seconds"] / runs["cached"]["seconds"], 3), "runs": runs,
           "same_transcripts": f"{same}/{len(tasks)}"}
    print(json.dumps(res, indent=1))
    if a.out:
        from hpd.runfolder import finish_manifest, new_manifest, write_json

        out = Path(a.out)
        write_json(out / "bench_prefix_cache.json", res)
        write_json(out / "manifest.json", finish_manifest(new_manifest("benchmarks/prefix_cache.py", vars(a)),
                                                          outputs=["bench_prefix_cache.json"]))


if __name__ == "__main__":
    main()
