"""Decode with finished rows dropped (``HFPolicy(prune=True)``, the default) against ``generate`` keeping every
row until the last one finishes (``prune=False``): the teacher's call shape on SmolLM2-135M-Instruct.

Prompts: the control-document prompts of the first ``--boundaries`` train boundaries of the demo's built-in
benchmark (``hpd.demo.Demo.prepare`` into ``--work``: the data, the split and SmolLM2 from its wheel), as the
teacher reads them. Each prompt gets K=2 candidates at temperature 1 over the full vocabulary, 256 new tokens
at most (the demo's teacher settings), seeded, so both runs sample the same tokens. The base model rambles
past the end of its answer on part of the rows (the teacher-choice stage saw 50 of 96 base-model candidates
truncated), which is where the two schedules differ. Prints one JSON object: wall seconds of each run,
``ratio`` = unpruned / pruned seconds, rows computed per step summed (``row_steps``) against what
``generate`` computes, and ``same_outputs`` (rows whose tokens agree; float noise from the changing batch
size may flip a near-tie). Writes it to ``<out>/bench_decode.json`` with a manifest when ``--out`` is given.

    python benchmarks/decode.py [--work /tmp/hpd-bench-decode] [--boundaries 16] [--adapter DIR] [--threads 2]
        [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _prompts(work: Path, n: int) -> tuple[Path, list[str]]:
    from hpd.demo import Demo, config_for_model
    from hpd.train.student import load_tokenizer
    from hpd.views.render import Renderer

    cfg = config_for_model("smollm2", out=work, defect_rate=0.12)
    demo = Demo(cfg, log=lambda s: None)
    _bench, _tasks, base, bds = demo.prepare()
    renderer = Renderer(load_tokenizer(str(base)))
    return base, [renderer.prompt(r["context"], r["document"]) for r in demo.records(bds)[:n]]


def _run(policy, prompts: list[str]) -> tuple[float, list]:
    t0 = time.perf_counter()
    out = policy.generate(prompts, n=2, temperature=1.0, max_new_tokens=256, seed=list(range(len(prompts))))
    return time.perf_counter() - t0, [g for r in out for g in r]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default="/tmp/hpd-bench-decode")
    ap.add_argument("--boundaries", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--adapter", default=None, help="a LoRA adapter on SmolLM2, e.g. a demo's "
                    "train/teacher-warm/adapter (the i-warm teacher)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    from hpd.policy.backends.hf import HFPolicy

    base, prompts = _prompts(Path(a.work), a.boundaries)
    pruned = HFPolicy(str(base), adapter=a.adapter, batch_size=64)
    full = HFPolicy(str(base), batch_size=64, model=pruned.model, tokenizer=pruned.tokenizer, prune=False)
    t_full, g_full = _run(full, prompts)
    t_pruned, g_pruned = _run(pruned, prompts)
    st = pruned.decode_stats
    lengths = [len(g.token_ids) for g in g_pruned]
    doc = {"benchmark": "decode", "model": "SmolLM2-135M-Instruct", "adapter": a.adapter, "rows": len(g_pruned), "threads": a.threads,
           "max_new_tokens": 256, "new_tokens": {"mean": round(sum(lengths) / len(lengths), 1), "max": max(lengths),
                                                 "at_limit": sum(g.finish_reason == "length" for g in g_pruned)},
           "baseline": "generate, every row until the last one finishes (prune=False)",
           "seconds": {"pruned": round(t_pruned, 1), "generate": round(t_full, 1)},
           "ratio": round(t_full / t_pruned, 2),
           "row_steps": {"pruned": st["row_steps"], "generate": st["generate_row_steps"]},
           "compactions": st["compactions"],
           "same_outputs": sum(a_.token_ids == b_.token_ids for a_, b_ in zip(g_pruned, g_full))}
    print(json.dumps(doc, indent=1))
    if a.out:
        from hpd.runfolder import finish_manifest, new_manifest, prepare_out, write_json

        out = prepare_out(a.out)
        write_json(out / "bench_decode.json", doc)
        write_json(out / "manifest.json", finish_manifest(new_manifest("benchmarks/decode.py", vars(a))))


if __name__ == "__main__":
    main()
