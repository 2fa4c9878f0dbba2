"""bf16 against fp32 on this machine, and vLLM's CPU engine against hpd's hf backend, in one run.

    python benchmarks/precision.py --out DIR [--threads 2] [--updates 4] [--episodes 6] [--teach 16]
                                   [--skip-vllm] [--work DIR] [--only train,prefill,decode,episodes,teach,vllm,compile]

Everything is measured on SmolLM2-135M-Instruct at the demo's shapes (``hpd demo``'s data, split, boundaries and
train config; built into ``--work`` on first use), each pair in the same process, **interleaved** (fp32 then bf16
on the same input, repeated), so load from other processes hits both sides alike:

- ``train_speedup``: ``hpd train`` updates of the demo's SFT run (T view, 8 rows, LoRA r16, prefix batching), two
  trainers side by side on the same batches; the first update of each is a warm-up and is not counted.
  ``loss_max_rel_diff``: the largest relative difference of the two trainers' losses over the same updates.
  With ``--batching auto`` a third trainer, bf16 with padded batching, runs interleaved with them:
  ``train_bf16_padded_speedup`` is fp32 (the demo's batching) over it, and ``train_bf16_padded_loss_max_rel_diff``
  its losses against fp32's.
- ``prefill_speedup``: one no-grad forward over real prompts of the demo (about 2,000 tokens in all).
- ``decode_speedup``: the hf backend's greedy generation, 8 prompts x 64 new tokens.
  ``greedy_identical_share``: the share of those rows whose tokens are identical in both dtypes.
- ``episode_speedup``: ``evaluate_variant`` (native rollouts + Action-Acc) of the base model on ``--episodes``
  held-out tasks; ``episode_identical_share``: the share of episodes whose transcripts are identical.
- ``teach_speedup``: the demo's teacher (base model reading the document; K=2, one attempt) on ``--teach``
  boundaries.
- ``vllm_teach_speedup`` / ``vllm_episode_speedup``: the same two jobs on vLLM's CPU engine against the hf backend,
  both in bf16 (engine start not counted; it is reported as ``vllm_start_s``). ``null`` with the reason in
  ``vllm_error`` where vLLM does not import.
- ``compile_train_speedup`` / ``compile_train_padded_speedup`` / ``compile_decode_speedup`` (stage ``compile``):
  ``torch.compile`` (inductor on the CPU) against the same code eager, all in bf16. Regional compilation
  (:func:`compile_layers`): each decoder layer is compiled with ``dynamic=True``, so that the 30 layers can share
  one compiled code (with a key/value cache they do not: decoding compiled 119 times, four per layer,
  docs/experiments/2026-12-05-precision-quiet.md). Training is measured in the trainer's shared-prefix batching
  (one layer call per trie node, with the node's key/value cache) and in padded batching; decoding in the hf
  backend. The first update and the first generation of each side are the warm-up, and the compiled side's
  warm-up (the compile itself) is reported as ``compile_*_warmup_s``. ``compile_loss_max_rel_diff`` (and
  ``compile_padded_...``) and ``compile_greedy_identical_share`` hold the compiled outputs against eager;
  ``compile_adopt`` says whether each clears the 1.2x the issue asks for, and ``compile_error`` records a
  compile that fails, in one line. ``--only compile-train`` / ``compile-train-padded`` / ``compile-decode``
  runs one part.

Goals (issue "The hardware's real speed"): train >= 1.8, prefill >= 2.0, episodes >= 1.5, vLLM teach >= 3,
vLLM episodes >= 2; ``goals`` says which hold in this run. Writes ``<out>/precision.json`` and a manifest.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
DTYPES = ("float32", "bfloat16")
GOALS = {"train_speedup": 1.8, "prefill_speedup": 2.0, "episode_speedup": 1.5, "vllm_teach_speedup": 3.0,
         "vllm_episode_speedup": 2.0}


def prepared(work: Path):
    """The demo's data, split, base model and boundaries in ``work`` (reused when there)."""
    from hpd.demo import Demo, config_for_model

    demo = Demo(config_for_model("smollm2", out=work, progress=False), log=lambda s: None)
    bench, tasks, base, bds = demo.prepare()
    return demo, bench, tasks, base, bds


def max_rel_diff(a: list[float], b: list[float]) -> float:
    """The largest relative difference of two loss series over the same updates."""
    return max(abs(x - y) / abs(x) for x, y in zip(a, b))


def timed(fn) -> tuple[object, float]:
    t = time.perf_counter()
    r = fn()
    return r, time.perf_counter() - t


# ------------------------------------------------------------------------------------------------ training
def bench_trainer(demo, base: Path, recs: list, out: Path, dtype: str, batching: str):
    """A set-up ``Trainer`` of the demo's SFT run (T view) in ``dtype``, no checkpoints, no probe."""
    from hpd.demo import train_config
    from hpd.train.config import TrainConfig
    from hpd.train.trainer import Trainer

    raw = train_config(demo.cfg, f"bench-{out.name}", {"T": 1}, "reference", base)
    raw["model"]["precision"] = {"float32": "fp32", "bfloat16": "bf16"}[dtype]
    raw["logging"].update(probe_examples=0, progress=False)
    raw["checkpoint"]["every"] = 10 ** 6
    raw["batch"]["batching"] = batching
    shutil.rmtree(out, ignore_errors=True)
    tr = Trainer(recs, TrainConfig.model_validate(raw), out)
    tr.setup()
    return tr


def bench_train(demo, base, bds, out: Path, updates: int, batching: str = "auto") -> dict:
    """fp32 against bf16 in ``batching``, interleaved on the same batches; with ``auto`` (the demo's choice, the
    shared-prefix trie on this CPU) a third trainer, bf16 with padded batching, since the trie's small matmuls
    are where bf16 gains little (docs/experiments/2026-12-03-bf16-training-profile.md)."""
    recs = demo.records(bds)
    sides = {dt: (dt, batching) for dt in DTYPES}
    if batching == "auto":
        sides["bfloat16-padded"] = ("bfloat16", "padded")
    trs = {k: bench_trainer(demo, base, recs, out / k, dt, b) for k, (dt, b) in sides.items()}
    secs, _warm, losses = interleaved_updates(trs, updates)
    res = {"train_speedup": secs["float32"] / secs["bfloat16"], "train_s": secs,
           "loss_max_rel_diff": max_rel_diff(losses["float32"], losses["bfloat16"]),
           "train_losses": losses, "train_updates_timed": updates,
           "train_batching": {k: tr.mode for k, tr in trs.items()}}
    if "bfloat16-padded" in trs:
        res["train_bf16_padded_speedup"] = secs["float32"] / secs["bfloat16-padded"]
        res["train_bf16_padded_loss_max_rel_diff"] = max_rel_diff(losses["float32"], losses["bfloat16-padded"])
    return res


# ------------------------------------------------------------------------------------------- generation
def prompts(base: Path, bds, n: int) -> list[str]:
    from transformers import AutoTokenizer

    from hpd.policy.chat import render_prompt

    tok = AutoTokenizer.from_pretrained(str(base))
    return [render_prompt(tok, b.context) for b in bds[:: max(1, len(bds) // n)][:n]]


def bench_prefill(base: Path, texts: list[str], reps: int = 2) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(base))
    ids, total = [], 0
    for t in texts:                       # the prompts, up to about 2,048 tokens in all
        x = tok(t)["input_ids"][: max(1, 2048 - total)]
        ids.append(torch.tensor([x]))
        total += len(x)
        if total >= 2048:
            break
    models = {dt: AutoModelForCausalLM.from_pretrained(str(base), dtype=getattr(torch, dt)).eval() for dt in DTYPES}
    secs = {dt: 0.0 for dt in DTYPES}
    with torch.no_grad():
        for r in range(reps + 1):
            for dt in DTYPES:
                _, s = timed(lambda: [models[dt](input_ids=x, use_cache=False, logits_to_keep=1) for x in ids])
                secs[dt] += s if r else 0.0
    n_tok = sum(x.shape[1] for x in ids)
    return {"prefill_speedup": secs["float32"] / secs["bfloat16"], "prefill_tokens": n_tok,
            "prefill_tokens_per_s": {dt: reps * n_tok / secs[dt] for dt in DTYPES}}


def generate_pair(pols: dict, texts: list[str], new_tokens: int) -> tuple[dict, dict, float]:
    """Greedy generation of ``texts`` by each of two policies: a short warm-up each, then one timed call each.
    Returns each side's warm-up and timed seconds and the share of rows whose tokens are identical."""
    warm, outs, secs = {}, {}, {}
    for k, pol in pols.items():   # the timed call's batch: a compiled side then meets no new shape (batch 1 is specialised)
        _, warm[k] = timed(lambda: pol.generate(texts, max_new_tokens=4, temperature=0.0))
    for k, pol in pols.items():
        outs[k], secs[k] = timed(lambda: pol.generate(texts, max_new_tokens=new_tokens, temperature=0.0))
    a, b = outs.values()
    return warm, secs, sum(x[0].token_ids == y[0].token_ids for x, y in zip(a, b)) / len(texts)


def bench_decode(base: Path, texts: list[str], new_tokens: int = 64) -> dict:
    from hpd.policy.backends.hf import HFPolicy

    pols = {dt: HFPolicy(str(base), dtype=dt, batch_size=64) for dt in DTYPES}
    _, secs, same = generate_pair(pols, texts, new_tokens)
    return {"decode_speedup": secs["float32"] / secs["bfloat16"], "decode_s": secs,
            "greedy_identical_share": same, "decode_rows": len(texts), "decode_new_tokens": new_tokens}


# --------------------------------------------------------------------------------------- episodes, teach
def run_episodes(demo, bench, tasks, base: Path, out: Path, dtype: str, backend: str = "hf") -> tuple[list, float]:
    from hpd.demo import DEFAULT_EVAL_TURNS
    from hpd.eval.variant import evaluate_variant, make_episode_policy

    shutil.rmtree(out, ignore_errors=True)
    pol = make_episode_policy("model", model=str(base), temperature=0.0, max_new_tokens=demo.cfg.max_new_tokens,
                              batch_size=64, dtype=dtype, backend=backend)
    _, s = timed(lambda: evaluate_variant(bench, tasks, pol, out, pool_k=demo.cfg.pool_k, batch_size=64,
                                          max_turns=demo.cfg.eval_turns or DEFAULT_EVAL_TURNS, action_batch_size=64))
    rows = [json.loads(x) for x in (out / "tasks.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in ("generated_tokens",)} for r in rows], s


def bench_episodes(demo, bench, tasks, base, out: Path) -> dict:
    res = {dt: run_episodes(demo, bench, tasks, base, out / f"eval-{dt}", dt) for dt in DTYPES}
    same = sum(a == b for a, b in zip(res["float32"][0], res["bfloat16"][0]))
    return {"episode_speedup": res["float32"][1] / res["bfloat16"][1],
            "episode_s": {dt: res[dt][1] for dt in DTYPES}, "episode_identical_share": same / len(tasks),
            "episodes": len(tasks)}


def run_teach(items, teacher, out: Path, seed: int = 0) -> float:
    from hpd.teacher.run import TeachConfig, teach

    shutil.rmtree(out, ignore_errors=True)
    cfg = TeachConfig(k=2, attempts=1, fallback="reference", privilege="oracle", seed=seed, batch_boundaries=32)
    return timed(lambda: teach(items, teacher, cfg, out))[1]


def teacher(base: Path, dtype: str, backend: str = "hf", max_new_tokens: int = 256):
    from hpd.teacher.factory import build_teacher

    kw = {"batch_size": 64} if backend == "hf" else {}
    return build_teacher(backend, model=str(base), privilege="oracle", max_new_tokens=max_new_tokens, dtype=dtype,
                         **kw)


def teach_items(demo, bench, bds, n: int) -> list:
    from hpd.demo import replay_config
    from hpd.teacher.boundaries import items_from_boundaries

    return items_from_boundaries(bds[:: max(1, len(bds) // n)][:n], bench, replay_config(demo.cfg))


def bench_teach(items, base, out: Path) -> dict:
    secs = {dt: run_teach(items, teacher(base, dt), out / f"teach-{dt}") for dt in DTYPES}
    return {"teach_speedup": secs["float32"] / secs["bfloat16"], "teach_s": secs, "teach_boundaries": len(items)}


def bench_vllm(demo, bench, tasks, items, base, out: Path, hf: dict) -> dict:
    try:
        t, start = timed(lambda: teacher(base, "bfloat16", backend="vllm"))
    except Exception as e:  # no vllm here: say why, in one line
        return {"vllm_teach_speedup": None, "vllm_episode_speedup": None, "vllm_error": str(e).splitlines()[0]}
    s_teach = run_teach(items, t, out / "teach-vllm")
    del t
    _, s_ep = run_episodes(demo, bench, tasks, base, out / "eval-vllm", "bfloat16", backend="vllm")
    return {"vllm_teach_speedup": hf["teach_s"]["bfloat16"] / s_teach,
            "vllm_episode_speedup": hf["episode_s"]["bfloat16"] / s_ep, "vllm_start_s": start,
            "vllm_teach_s": s_teach, "vllm_episode_s": s_ep}


# --------------------------------------------------------------------------------------------- compile
def interleaved_updates(trs: dict, updates: int) -> tuple[dict, dict, dict]:
    """``updates`` + 1 updates of each trainer, interleaved; the first (warm-up) timed apart."""
    secs, warm, losses = {k: 0.0 for k in trs}, {}, {k: [] for k in trs}
    for u in range(updates + 1):
        for k, tr in trs.items():
            _, s = timed(lambda: tr.step(u))
            if u:
                secs[k] += s
            else:
                warm[k] = s
            losses[k].append(tr.last_loss["T"])
    return secs, warm, losses


def compile_layers(model) -> int:
    """Regional compilation (torch's recipe for repeated blocks, docs.pytorch.org/tutorials/recipes/
    regional_compilation.html): every decoder layer is compiled, ``dynamic=True``, so that alike layers can share
    one compiled code instead of one whole-model graph (a whole-model compile of the update ran past 17 minutes).
    With a key/value cache they do not share it (decoding: 119 compiles, four per layer, from ``layer_idx`` and the
    cache's guards). Returns the number of layers compiled."""
    import torch

    # each layer holds its own layer_idx (the key/value cache's index), a constant dynamo guards on: one compile per
    # layer, past the default limit of 8 (the graphs are alike, so inductor's graph cache serves all but the first)
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 128)
    torch._dynamo.config.accumulated_recompile_limit = max(torch._dynamo.config.accumulated_recompile_limit, 1024)
    for m in model.modules():
        if isinstance(m, torch.nn.ModuleList) and len(m) > 1 and type(m[0]).__name__.endswith("DecoderLayer"):
            for layer in m:
                layer.compile(dynamic=True)
            return len(m)
    raise ValueError(f"no decoder layers found in {type(model).__name__}")


def compile_train(demo, base, bds, out: Path, updates: int, batching: str) -> dict:
    """Eager against regionally compiled, both bf16 in ``batching``; the keys carry ``_padded`` for padded."""
    recs = demo.records(bds)
    trs = {k: bench_trainer(demo, base, recs, out / f"{k}-{batching}", "bfloat16", batching)
           for k in ("eager", "compiled")}
    compile_layers(trs["compiled"].model)
    secs, warm, losses = interleaved_updates(trs, updates)
    tag = "" if batching == "prefix" else f"_{batching}"
    return {f"compile_train{tag}_speedup": secs["eager"] / secs["compiled"], f"compile_train{tag}_s": secs,
            f"compile_train{tag}_warmup_s": warm,
            f"compile{tag}_loss_max_rel_diff": max_rel_diff(losses["eager"], losses["compiled"]),
            f"compile_train{tag}_losses": losses}


def compile_decode(base: Path, texts: list[str], new_tokens: int = 64) -> dict:
    from hpd.policy.backends.hf import HFPolicy

    pols = {k: HFPolicy(str(base), dtype="bfloat16", batch_size=64) for k in ("eager", "compiled")}
    compile_layers(pols["compiled"].model)
    warm, secs, same = generate_pair(pols, texts, new_tokens)
    return {"compile_decode_speedup": secs["eager"] / secs["compiled"], "compile_decode_s": secs,
            "compile_decode_warmup_s": warm, "compile_greedy_identical_share": same}


def bench_compile(demo, base, bds, out: Path, updates: int, texts: list[str],
                  parts: tuple[str, ...] = ("train", "decode")) -> dict:
    """torch.compile against eager, bf16, on a training update and on decoding (``parts``; module doc); a compile
    that fails is recorded in ``compile_error``, not raised."""
    res: dict = {"compile_error": {}}
    jobs = {"train": lambda: compile_train(demo, base, bds, out / "compile", updates, "prefix"),
            "train-padded": lambda: compile_train(demo, base, bds, out / "compile", updates, "padded"),
            "decode": lambda: compile_decode(base, texts)}
    for name, fn in ((k, jobs[k]) for k in parts):
        try:
            res.update(fn())
        except Exception as e:   # inductor needs a C++ compiler and may not lower every op: say which, in one line
            res["compile_error"][name] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:500]
    speedups = {k: res.get(f"compile_{k.replace('-', '_')}_speedup") for k in parts}
    res["compile_adopt"] = {k: x is not None and x >= 1.2 for k, x in speedups.items()}
    return res


def machine() -> dict:
    import torch

    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    model = next((l.split(":", 1)[1].strip() for l in flags.splitlines() if l.startswith("model name")), None)
    return {"cpu": model, "threads": torch.get_num_threads(), "torch": torch.__version__,
            "avx512_bf16": "avx512_bf16" in flags, "amx_bf16": "amx_bf16" in flags}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default=str(Path.home() / "hpd-runs" / "bench-precision"),
                    help="the demo's prepared stages (data, split, SmolLM2, boundaries), reused between runs")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--updates", type=int, default=4, help="timed training updates per dtype (after one warm-up)")
    ap.add_argument("--episodes", type=int, default=6, help="held-out tasks evaluated per dtype")
    ap.add_argument("--teach", type=int, default=16, help="boundaries taught per dtype")
    ap.add_argument("--skip-vllm", action="store_true")
    ap.add_argument("--batching", default="auto", choices=["auto", "prefix", "padded"],
                    help="the trainers' batching (auto: the demo's, prefix on this CPU)")
    ap.add_argument("--only", default=None,
                    help="comma list of train,prefill,decode,episodes,teach,vllm,compile (default: all); "
                         "compile-train, compile-train-padded or compile-decode runs one part of compile")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    demo, bench, tasks, base, bds = prepared(Path(args.work))
    res = {"machine": machine()}
    want = set((args.only or "train,prefill,decode,episodes,teach,vllm,compile").split(","))
    if args.skip_vllm:
        want.discard("vllm")
    if "train" in want:
        res.update(bench_train(demo, base, bds, out / "train", args.updates, args.batching))
    texts = prompts(base, bds, 8)
    if "prefill" in want:
        res.update(bench_prefill(base, texts))
    if "decode" in want:
        res.update(bench_decode(base, texts))
    parts = tuple(k for k in ("train", "train-padded", "decode") if want & {"compile", f"compile-{k}"})
    if parts:
        res.update(bench_compile(demo, base, bds, out, args.updates, texts, parts))
    if want & {"episodes", "vllm"}:
        res.update(bench_episodes(demo, bench, tasks[: args.episodes], base, out))
    items = teach_items(demo, bench, bds, args.teach)
    if want & {"teach", "vllm"}:
        res.update(bench_teach(items, base, out))
    if "vllm" in want:
        res.update(bench_vllm(demo, bench, tasks[: args.episodes], items, base, out, res))
    res["goals"] = {k: (res.get(k) is not None and res[k] >= g) for k, g in GOALS.items()}
    res["goal_values"] = GOALS
    from hpd.runfolder import finish_manifest, new_manifest, write_json

    write_json(out / "precision.json", res)
    man = new_manifest("python benchmarks/precision.py " + " ".join(argv or sys.argv[1:]), vars(args), seed=0)
    write_json(out / "manifest.json", finish_manifest(man, outputs=["precision.json"]))
    print(json.dumps({k: v for k, v in res.items() if not k.endswith("_losses")}, default=str))
    print(f"[precision] {time.time() - t0:.0f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
