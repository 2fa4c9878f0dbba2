"""RL rollout throughput: one update's groups through the batched engine vs one episode at a time (one run).

What an RL update of ``hpd train --method grpo|gspo|gigpo`` samples: ``--tasks`` training tasks x ``--group`` episodes
each, at temperature 1 over the full vocabulary, every turn seeded by (seed, update, slot, rollout, turn) and
recorded with its exact prompt ids, sampled ids, log-probs and GiGPO anchor
(:func:`hpd.methods.rl.rollout.run_groups` with :class:`~hpd.methods.rl.rollout.RecordingPolicy`). Two schedules of
the same episodes: ``batched`` = all ``tasks x group`` episodes advance together (``episodes_in_flight`` = all of
them; the ``G`` rollouts of a task share one prefill of their common prompt), ``sequential`` = one episode at a time
(``episodes_in_flight=1``). Prints one JSON object with ``ratio`` = batched episodes/s / sequential episodes/s,
``ratio_cpu_time`` (the same in this process's CPU time, which does not move with the machine's load at one
thread) and ``same_outputs`` (episodes whose sampled ids are identical in both runs: the per-turn seeds make a
sample independent of its batch, up to float noise); with ``--out`` it also writes ``rl_rollout.json`` and
``manifest.json``.

    python benchmarks/rl_rollout.py [--data DIR|builtin] [--model DIR | --size xs|s] [--tasks 4] [--group 8]
                                    [--max-new-tokens 64] [--max-turns 3] [--pool-k 5] [--threads N] [--out DIR]

Data: a TRAJECT-Bench-shaped folder, else (default, or ``--data builtin``) the built-in benchmark generated into a
temp folder; its train split (``hpd.bench.split.make_split``, seed 0). Model: ``--model DIR`` (e.g. an SFT run's
``model/``), else a random tiny model (``--size``, seed 0, tokenizer trained on the data), whose episodes mostly
end after one turn of ``--max-new-tokens`` tokens (decode-heavy).
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


def _bench(data: str | None, tmp: Path):
    from hpd.bench.loader import load_bench
    from hpd.bench.split import make_split, select

    if data and data != "builtin":
        bench, source = load_bench(data), str(data)
    else:
        from hpd.bench.builtin import generate

        bench, source = load_bench(generate(tmp / "builtin", seed=0, n_per_domain=8)), "builtin"
    return bench, select(bench.tasks, make_split(bench.tasks, seed=0), "train"), source


def _run(bench, slots, policy, a, in_flight: int) -> tuple[dict, dict]:
    from hpd.methods.rl.config import RewardSettings
    from hpd.methods.rl.rollout import run_groups

    before = dict(policy.stats)
    t0, c0 = time.perf_counter(), time.process_time()
    eps, c = run_groups(bench, slots, policy, group_size=a.group, weights=RewardSettings(),
                        env_kwargs={"k": a.pool_k}, max_turns=a.max_turns, in_flight=in_flight)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    toks = policy.stats["generated_tokens"] - before["generated_tokens"]
    said = {(e.slot, e.g): [t.completion_ids for t in e.turns] for e in eps}
    return ({"seconds": round(dt, 3), "cpu_seconds": round(cpu, 3), "episodes": len(eps), "waves": c["waves"],
             "boundaries": c["boundaries"], "generated_tokens": toks, "episodes_per_s": round(len(eps) / dt, 4),
             "tokens_per_s": round(toks / dt, 1), "mean_reward": round(sum(e.reward for e in eps) / len(eps), 4)},
            said)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="TRAJECT-Bench-shaped folder, or 'builtin' (default)")
    ap.add_argument("--model", default=None, help="a local model folder (default: a random tiny model)")
    ap.add_argument("--size", default="xs", choices=["xs", "s"])
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--max-turns", type=int, default=3)
    ap.add_argument("--pool-k", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    if min(a.tasks, a.group, a.max_new_tokens, a.max_turns, a.pool_k) < 1:
        ap.error("--tasks, --group, --max-new-tokens, --max-turns and --pool-k must be >= 1")
    if a.threads is not None and a.threads < 1:
        ap.error("--threads must be >= 1")
    if a.model and not (Path(a.model) / "config.json").is_file():
        ap.error(f"--model {a.model}: not a model folder (no config.json)")

    import torch

    from hpd.methods.rl.rollout import RecordingPolicy
    from hpd.policy.backends.hf import HFPolicy
    from hpd.policy.tiny import build_tiny

    if a.threads:
        torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        bench, tasks, source = _bench(a.data, tmp)
        if a.model:
            model, label = a.model, a.model
        else:
            model = str(build_tiny(tmp / "tiny", size=a.size, seed=0, data_dir=bench.data_dir))
            label = f"tiny-{a.size} seed 0 (random weights, tokenizer trained on the data)"
        load_start = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
        slots = list(enumerate(tasks[: a.tasks]))
        hf = HFPolicy(model, batch_size=len(slots) * a.group)

        def policy(update: int) -> RecordingPolicy:
            return RecordingPolicy(hf, seed=a.seed, update=update, max_new_tokens=a.max_new_tokens)

        _run(bench, slots[:1], policy(-1), argparse.Namespace(**{**vars(a), "group": 2}), 2)   # warm-up
        batched, said_b = _run(bench, slots, policy(0), a, len(slots) * a.group)
        sequential, said_s = _run(bench, slots, policy(0), a, 1)
        result = {
            "ratio": round(batched["episodes_per_s"] / sequential["episodes_per_s"], 3),
            "ratio_cpu_time": round(sequential["cpu_seconds"] / batched["cpu_seconds"], 3),
            "batched": batched, "sequential": sequential,
            "same_outputs": {"episodes": len(said_b), "identical": sum(said_b[k] == said_s.get(k) for k in said_b)},
            "config": {"tasks": len(slots), "group": a.group, "episodes": len(slots) * a.group,
                       "max_new_tokens": a.max_new_tokens, "max_turns": a.max_turns, "pool_k": a.pool_k,
                       "model": label, "data": source, "sampling": "temperature 1, full vocabulary, per-turn seeds",
                       "torch_threads": torch.get_num_threads(), "device": hf.device,
                       "load_average_start": load_start,
                       "load_average_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None},
        }
        print(json.dumps(result, indent=2))
        if a.out:    # inside the temp folder's lifetime: the manifest checksums the (maybe generated) data
            _write(Path(a.out), result, bench, argv, a.seed)
    return result


def _write(out: Path, result: dict, bench, argv, seed: int) -> None:
    from hpd.bench.loader import data_checksum
    from hpd.runfolder import finish_manifest, new_manifest, write_json

    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "rl_rollout.json", result)
    man = new_manifest("benchmarks/rl_rollout.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                       result["config"], inputs={"data": data_checksum(bench.data_dir)}, seed=seed)
    write_json(out / "manifest.json", finish_manifest(man))


if __name__ == "__main__":
    main()
