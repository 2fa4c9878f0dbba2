"""RL rollouts on vLLM against the hf backend: the same GRPO updates with ``rollout.engine=hf`` and ``=vllm``.

Runs ``hpd train --method grpo`` (:func:`hpd.methods.rl.grpo.run`) twice in this process from one config, the first
``--updates`` updates of each (``stop_after``), and reads each run's ``rl.csv``: ``rollout_s`` (sampling the update's
episodes; with vllm it includes writing the merged weights into the engine) and ``train_s`` (log-probs, loss,
backward, optimizer). The first update of each run also pays its engine's start (vLLM's in-process start, the hf
backend's nothing), so the ratios are given over every update and over the updates after the first. Prints one
JSON object: per engine the seconds of each update, then ``rollout_speedup`` = hf rollout seconds / vllm rollout
seconds (``_after_first`` without update 0) and ``update_speedup`` the same over whole updates. With ``--out`` it
also writes ``rl_engine.json`` there, beside the two run folders.

    python benchmarks/rl_engine.py --config configs/methods/grpo-smollm2.yaml --updates 2 --threads 1 \\
        --out DIR model.path=BASE model.adapter=SFT_ADAPTER data.path=DATA data.split_file=SPLIT

Extra ``KEY=VALUE`` arguments are config overrides, as ``hpd train`` takes them. The samples differ between the
engines (their kernels round differently), so episode lengths and hence times differ with the sampled tokens too:
read the episodes' ``turns`` and ``completion_tokens`` beside the seconds. Each update also gives the peak memory
of its rollout and of its training pass (``rollout_peak_gb``, ``train_peak_gb``: :mod:`hpd.train.memory`), and
``--engines hf`` runs one arm alone (no ratios then), for a machine without the memory for both.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
KEYS = ("rollout_s", "train_s", "episodes", "turns", "completion_tokens", "reward", "rollout_peak_gb", "train_peak_gb")


def _run(config: str, overrides: list[str], engine: str, updates: int, out: Path) -> list[dict]:
    from hpd.methods.rl import grpo
    from hpd.methods.rl.log import read_rl_csv

    cfg = grpo.load_config(config, [*overrides, f"rollout.engine={engine}", f"stop_after={updates}",
                                    "logging.progress=false", "logging.tensorboard=false"])
    grpo.run(cfg, out, command=f"benchmarks/rl_engine.py ({engine})")
    return [{k: r.get(k) for k in KEYS} for r in read_rl_csv(out / "rl.csv")]


def _ratio(hf: list[dict], vllm: list[dict], key: str, start: int) -> float | None:
    a, b = sum(r[key] for r in hf[start:]), sum(r[key] for r in vllm[start:])
    return round(a / b, 3) if b > 0 and len(hf) > start else None


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="configs/methods/grpo-smollm2.yaml")
    ap.add_argument("--updates", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--engines", default="hf,vllm", help="the arms to run, in order (hf,vllm; one arm gives no ratio)")
    a, overrides = ap.parse_known_args(argv)
    import torch

    torch.set_num_threads(a.threads)
    root = a.out or Path(tempfile.mkdtemp(prefix="hpd-rl-engine-"))
    runs = {e: _run(a.config, overrides, e, a.updates, root / e) for e in a.engines.split(",")}
    for e in runs:
        for r in runs[e]:
            r["update_s"] = r["rollout_s"] + r["train_s"]
    result = {"config": a.config, "overrides": overrides, "updates": a.updates, "threads": a.threads,
              "per_update": runs, "baseline": "rollout.engine=hf, the same config, in the same process"}
    pairs = (("rollout_s", "rollout_speedup"), ("update_s", "update_speedup")) if {"hf", "vllm"} <= runs.keys() else ()
    for key, name in pairs:
        result[name] = _ratio(runs["hf"], runs["vllm"], key, 0)
        result[f"{name}_after_first"] = _ratio(runs["hf"], runs["vllm"], key, 1)
    if a.out:
        (a.out / "rl_engine.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
