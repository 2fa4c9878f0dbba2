"""vLLM's CPU engine in this process against vLLM's default of two child processes, on SmolLM2-135M-Instruct.

The vllm backend runs the CPU engine in-process when it is given ``cpu_threads`` (``VLLM_ENABLE_V1_MULTIPROCESSING=0``;
``hpd.policy.backends.vllm``, module doc). Each mode runs in a fresh Python process (vLLM reads the switch once):

* ``engine_first_s``, ``engine_next_s``: building a ``VLLMPolicy`` (the first in the process, which imports vLLM's
  engine code, and a second one after the first is closed), what a demo cell pays per variant;
* ``greedy`` and ``sampled``: the prompts and lengths of ``benchmarks/vllm_cpu.py`` (16 x ~600 tokens, <= 128 new
  tokens, temperature 0 and seeded temperature 1), generated after the engine started.

Prints one JSON object with both modes and the ratios child / in-process (above 1: in-process is faster); writes it
to ``<out>/bench_vllm_engine.json``, with a ``manifest.json``, when ``--out`` is given. Quote the ratios: absolute
times on a shared machine are noisy.

    python benchmarks/vllm_engine.py [--work /tmp/hpd-bench-vllm] [--dtype bfloat16] [--threads 1] [--out DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
MODES = {"child-processes": "1", "in-process": "0"}


def _sibling(name: str):
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def measure(model: Path, dtype: str, threads: int) -> dict:
    """One mode, in this process (the parent set the switch)."""
    from hpd.policy.backends.vllm import VLLMPolicy, in_process

    bench = _sibling("vllm_cpu")
    starts = []
    for _ in range(2):
        t = time.perf_counter()
        policy = VLLMPolicy(str(model), dtype=dtype, cpu_threads=threads, max_model_len=2048)
        starts.append(round(time.perf_counter() - t, 1))
        if len(starts) == 1:
            policy.close()
    prompts = bench._prompts(policy.tokenizer, 16, 600)
    _, greedy = bench._timed(policy, prompts, temperature=0.0, max_new_tokens=128)
    _, sampled = bench._timed(policy, prompts, temperature=1.0, seed=0, max_new_tokens=128)
    inproc = in_process(policy.llm)
    policy.close()
    return {"in_process": inproc, "engine_first_s": starts[0], "engine_next_s": starts[1],
            "greedy": greedy, "sampled": sampled}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="/tmp/hpd-bench-vllm")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None)
    ap.add_argument("--mode", choices=sorted(MODES), default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    model = Path(args.work) / "smollm2"
    if args.mode:
        print("RESULT " + json.dumps(measure(model, args.dtype, args.threads)), flush=True)
        return
    if not (model / "config.json").is_file():
        from hpd.policy.smollm2 import build_smollm2

        build_smollm2(model)
    result: dict = {"model": "SmolLM2-135M-Instruct", "dtype": args.dtype, "threads": args.threads,
                    "load_avg_start": os.getloadavg()[0], "modes": {}}
    for mode, switch in MODES.items():
        env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING=switch)
        run = subprocess.run([sys.executable, __file__, "--mode", mode, "--work", args.work, "--dtype", args.dtype,
                              "--threads", str(args.threads)], env=env, capture_output=True, text=True)
        lines = [x for x in run.stdout.splitlines() if x.startswith("RESULT ")]
        if run.returncode or not lines:
            sys.exit(f"vllm_engine: the {mode} run failed (exit {run.returncode}): {run.stderr.strip()[-500:]}")
        result["modes"][mode] = json.loads(lines[-1][len("RESULT "):])
    child, inproc = result["modes"]["child-processes"], result["modes"]["in-process"]
    seconds = {"engine_first": lambda m: m["engine_first_s"], "engine_next": lambda m: m["engine_next_s"],
               "greedy": lambda m: m["greedy"]["seconds"], "sampled": lambda m: m["sampled"]["seconds"]}
    for name, of in seconds.items():
        result[f"{name}_speedup"] = round(of(child) / of(inproc), 2)
    result["load_avg_end"] = os.getloadavg()[0]
    print(json.dumps(result, indent=1))
    if args.out:
        from hpd.runfolder import finish_manifest, new_manifest, write_json

        write_json(Path(args.out) / "bench_vllm_engine.json", result)
        man = new_manifest("benchmarks/vllm_engine.py " + " ".join(sys.argv[1:]),
                           {"dtype": args.dtype, "threads": args.threads, "modes": MODES})
        write_json(Path(args.out) / "manifest.json", finish_manifest(man, outputs=["bench_vllm_engine.json"]))


if __name__ == "__main__":
    main()
