"""Batched vs sequential episode throughput of the rollout engine on the tiny model (one run).

Same tasks, same model, same greedy decoding, two schedules of ``hpd.eval.rollout.advance``:
``batched`` = all ``--episodes`` episodes advance together (one ``generate`` call per wave);
``sequential`` = one episode at a time (one ``generate`` call per boundary). Prints one JSON object with
``ratio`` = batched episodes/s / sequential episodes/s (target >= 4 at 16 episodes) and writes it, plus
``manifest.json``, to ``--out`` when given. Both use the backend's default pad-free prefill
(``HFPolicy(prefill="separate")``); ``ratio_padded_prefill`` repeats the batched run with one left-padded
prefill (``prefill="padded"``) against the same sequential baseline, to show what that choice buys.

    python benchmarks/rollout.py [--data DIR] [--model DIR | --size xs|s] [--episodes 16] [--max-new-tokens 128] [--out DIR]

Data: TRAJECT-Bench at ``--data`` / ``$HPD_TRAJECT_DIR`` / ``../shared/traject-bench/public_data``; if
none is found, the built-in benchmark is generated into a temp folder. Model: ``--model``, else a tiny
model (``--size xs`` by default, random weights, seed 0, tokenizer trained on the benchmark text as
``hpd model tiny --data`` does) is built into a temp folder. A random model rarely calls a
tool, so most episodes are one turn of ``--max-new-tokens`` tokens: the figure is decode-heavy
throughput of the engine, not of a trained agent.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _bench_data(data: str | None, tmp: Path):
    from hpd.bench.loader import load_bench, resolve_data_dir

    try:
        return load_bench(resolve_data_dir(data)), "traject"
    except (FileNotFoundError, ValueError):
        if data:
            raise
        from hpd.bench.builtin import generate

        return load_bench(generate(tmp / "builtin", seed=0, n_per_domain=8)), "builtin"


def _run(bench, tasks, policy, batch_size: int, max_turns: int, pool_k: int) -> dict:
    from hpd.eval.rollout import advance, start_episode

    ends: dict[str, int] = {}
    before = dict(policy.stats)

    def done(st):
        ends[st.harness.end_reason] = ends.get(st.harness.end_reason, 0) + 1

    starts = [(lambda t=t: start_episode(t, bench, env_kwargs={"k": pool_k}, max_turns=max_turns)) for t in tasks]
    t0 = time.perf_counter()
    c = advance(starts, policy, batch_size=batch_size, on_done=done)
    dt = time.perf_counter() - t0
    toks = policy.stats["generated_tokens"] - before["generated_tokens"]
    calls = policy.stats["policy_calls"] - before["policy_calls"]
    return {"seconds": round(dt, 3), "episodes": c["episodes"], "boundaries": c["boundaries"], "waves": c["waves"],
            "policy_calls": calls, "generated_tokens": toks, "episodes_per_s": round(c["episodes"] / dt, 4),
            "tokens_per_s": round(toks / dt, 1), "end_reasons": ends}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--model", default=None)
    ap.add_argument("--size", default="xs", choices=["xs", "s"])
    ap.add_argument("--episodes", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--max-turns", type=int, default=3)
    ap.add_argument("--pool-k", type=int, default=5)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    if a.episodes < 1 or a.max_new_tokens < 1:
        ap.error("--episodes and --max-new-tokens must be >= 1")

    import torch

    from hpd.eval.rollout import ModelEpisodePolicy
    from hpd.policy.backends.hf import HFPolicy
    from hpd.policy.tiny import build_tiny

    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        bench, source = _bench_data(a.data, tmp)
        model = a.model or str(build_tiny(tmp / "tiny", size=a.size, seed=0, data_dir=bench.data_dir))
        tasks = bench.tasks[: a.episodes]
        hf = HFPolicy(model, batch_size=a.episodes)
        pol = ModelEpisodePolicy(hf, temperature=0.0, max_new_tokens=a.max_new_tokens)
        _run(bench, tasks[:2], pol, 2, 1, a.pool_k)  # warm-up (first-call overheads), not measured
        batched = _run(bench, tasks, pol, len(tasks), a.max_turns, a.pool_k)
        sequential = _run(bench, tasks, pol, 1, a.max_turns, a.pool_k)
        # the same batched run, same weights, with one left-padded prefill (the earlier engine)
        padded = HFPolicy(model, batch_size=a.episodes, model=hf.model, tokenizer=hf.tokenizer, prefill="padded")
        pol_padded = ModelEpisodePolicy(padded, temperature=0.0, max_new_tokens=a.max_new_tokens)
        batched_padded = _run(bench, tasks, pol_padded, len(tasks), a.max_turns, a.pool_k)
    result = {
        "ratio": round(batched["episodes_per_s"] / sequential["episodes_per_s"], 3),
        "batched": batched, "sequential": sequential,
        "ratio_padded_prefill": round(batched_padded["episodes_per_s"] / sequential["episodes_per_s"], 3),
        "batched_padded_prefill": batched_padded,
        "config": {"episodes": len(tasks), "max_new_tokens": a.max_new_tokens, "max_turns": a.max_turns,
                   "pool_k": a.pool_k, "model": a.model or f"tiny-{a.size} seed 0 (random weights, tokenizer trained on the data)",
                   "data": source, "decoding": "greedy", "torch_threads": torch.get_num_threads(),
                   "device": hf.device},
    }
    print(json.dumps(result, indent=2))
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "rollout.json").write_text(json.dumps(result, indent=2) + "\n")
        from hpd.bench.loader import data_checksum
        from hpd.runfolder import finish_manifest, new_manifest, write_json
        man = new_manifest("benchmarks/rollout.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                           result["config"], inputs={"data": data_checksum(bench.data_dir)}, seed=0)
        write_json(out / "manifest.json", finish_manifest(man))
    return result


if __name__ == "__main__":
    main()
