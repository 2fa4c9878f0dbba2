"""Load test of ``hpd serve`` on loopback: batched serving vs one-at-a-time serving, in one run.

A tiny model (``--size xs`` by default, random weights, seed 0; or ``--model DIR``) is served twice by
:class:`hpd.serve.app.BackgroundServer` on 127.0.0.1, with the same weights and the same load:
``--clients`` concurrent clients (default 32), each sending ``--requests`` chat requests one after the
other (a system prompt, one tool, a user question that differs per request; greedy, ``max_tokens``
= ``--max-tokens``). ``one_at_a_time`` is the server with ``max_batch=1`` (each request is its own
``generate`` call, as ``hpd serve`` was before batching); ``batched`` is the default engine. The load is
bounded: a fixed number of requests, each with a ``--timeout``.

Prints one JSON object: per run the request count, ``errors`` (non-200 answers, timeouts, bad bodies),
``p50_s``/``p99_s`` latency, ``requests_per_s``, ``tokens_per_s``, ``mean_batch_rows`` (the engine's
rows per ``generate`` call); ``ratio`` = batched requests/s / one-at-a-time requests/s (goal >= 4 at 32
clients); ``same_outputs`` = requests whose greedy completion is identical in both runs. Writes it to
``--out`` (``serve.json`` + ``manifest.json``) when given.

    OMP_NUM_THREADS=1 nice -n 19 python benchmarks/serve.py [--clients 32] [--requests 4] [--max-tokens 32]
                                                            [--size xs|s | --model DIR] [--out DIR]

The clients are asyncio tasks in the main thread (one ``httpx.AsyncClient``); the server runs in a thread
of the same process, so both share one interpreter: the figure includes that contention.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TOOL = {"type": "function", "function": {
    "name": "lookup", "description": "Look up a key in the store.",
    "parameters": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}}}
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]


def request_body(i: int, max_tokens: int) -> dict:
    """Request ``i`` of the load (its question differs from its neighbours')."""
    question = f"Look up {WORDS[i % len(WORDS)]} and {WORDS[(i * 3 + 1) % len(WORDS)]}, then report item {i}."
    return {"model": "hpd", "messages": [{"role": "system", "content": "You are a careful lookup agent."},
                                         {"role": "user", "content": question}],
            "tools": [TOOL], "temperature": 0, "max_tokens": max_tokens}


async def _client(http, base: str, ids: list[int], max_tokens: int, timeout: float, out: dict) -> None:
    for i in ids:
        t0 = time.perf_counter()
        try:
            r = await http.post(f"{base}/chat/completions", json=request_body(i, max_tokens), timeout=timeout)
            data = r.json()
            ok = r.status_code == 200 and "choices" in data
        except Exception as exc:  # a timeout or a broken connection counts as an error
            ok, data = False, {"error": f"{type(exc).__name__}: {exc}"}
        out[i] = {"ok": ok, "latency": time.perf_counter() - t0,
                  "tokens": data.get("usage", {}).get("completion_tokens", 0) if ok else 0,
                  "message": data["choices"][0]["message"] if ok else data}


async def _load(base: str, clients: int, per_client: int, max_tokens: int, timeout: float) -> tuple[dict, float]:
    import httpx

    out: dict = {}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits) as http:
        t0 = time.perf_counter()
        await asyncio.gather(*(_client(http, base, [c + clients * k for k in range(per_client)], max_tokens,
                                       timeout, out) for c in range(clients)))
        return out, time.perf_counter() - t0


def _percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def run_load(policy, *, max_batch: int, clients: int, per_client: int, max_tokens: int, timeout: float) -> tuple[dict, dict]:
    """Serve ``policy`` with ``max_batch`` and drive the load; (figures, per-request results)."""
    from hpd.serve.app import BackgroundServer

    with BackgroundServer(policy, max_batch=max_batch, max_tokens_cap=max_tokens) as srv:
        asyncio.run(_load(srv.base_url, 2, 1, max_tokens, timeout))   # warm-up, not measured
        srv.app.state.server.engine.batches.clear()
        results, seconds = asyncio.run(_load(srv.base_url, clients, per_client, max_tokens, timeout))
        stats = srv.app.state.server.engine.stats()
        rows = list(srv.app.state.server.engine.batches)
    lat = [r["latency"] for r in results.values()]
    toks = sum(r["tokens"] for r in results.values())
    return ({"requests": len(results), "errors": sum(not r["ok"] for r in results.values()),
             "seconds": round(seconds, 3), "p50_s": round(statistics.median(lat), 4),
             "p99_s": round(_percentile(lat, 0.99), 4), "requests_per_s": round(len(results) / seconds, 3),
             "tokens_per_s": round(toks / seconds, 1), "completion_tokens": toks,
             "generate_calls": stats["batches"], "mean_batch_rows": stats["mean_batch_rows"],
             "batch_rows": rows if len(rows) <= 64 else None}, results)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a local model folder (default: a tiny random model)")
    ap.add_argument("--size", default="xs", choices=["xs", "s"])
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=4, help="requests per client, sent one after the other")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per request before it counts as an error")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    if min(a.clients, a.requests, a.max_tokens, a.threads) < 1 or a.timeout <= 0:
        ap.error("--clients, --requests, --max-tokens, --threads and --timeout must be positive")
    if a.model and not (Path(a.model) / "config.json").is_file():
        ap.error(f"--model {a.model}: not a model folder (no config.json)")

    import torch

    from hpd.policy.backends.hf import HFPolicy
    from hpd.policy.tiny import build_tiny

    torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory() as td:
        model = a.model or str(build_tiny(Path(td) / "tiny", size=a.size, seed=0))
        policy = HFPolicy(model, batch_size=max(32, a.clients))
        load = dict(clients=a.clients, per_client=a.requests, max_tokens=a.max_tokens, timeout=a.timeout)
        load_start = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
        single, said_1 = run_load(policy, max_batch=1, **load)
        batched, said_b = run_load(policy, max_batch=max(64, a.clients), **load)
    result = {
        "ratio": round(batched["requests_per_s"] / single["requests_per_s"], 3),
        "errors": single["errors"] + batched["errors"],
        "batched": batched, "one_at_a_time": single,
        "same_outputs": {"requests": len(said_b), "identical": sum(
            said_b[i]["ok"] and said_1.get(i, {}).get("message") == said_b[i]["message"] for i in said_b)},
        "config": {"clients": a.clients, "requests_per_client": a.requests, "max_tokens": a.max_tokens,
                   "model": a.model or f"tiny-{a.size} seed 0 (random weights)", "decoding": "greedy",
                   "torch_threads": torch.get_num_threads(), "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                   "device": policy.device, "load_average_start": load_start,
                   "load_average_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None},
    }
    print(json.dumps(result, indent=2))
    if a.out:
        from hpd.runfolder import finish_manifest, new_manifest, write_json

        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / "serve.json", result)
        man = new_manifest("benchmarks/serve.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                           result["config"], seed=0)
        write_json(out / "manifest.json", finish_manifest(man))
    return result


if __name__ == "__main__":
    main()
