"""The generation engines of a demo cell: hpd's hf backend, or vLLM over merged weights.

:class:`Engines` gives the teacher and each evaluation its generator (:meth:`Engines.generator`):

* ``hf``: a fresh :class:`hpd.policy.backends.hf.HFPolicy` over the base model and the variant's adapter;
* ``vllm``: one vLLM engine at a time. On vLLM's **CPU** platform a variant's LoRA adapter is first merged into
  the base weights (:func:`hpd.export.merge.export_model`, in the run's dtype, into ``<merged>/<variant>/``, kept
  for a resumed run), and the engine runs that plain model. vLLM 0.31's CPU LoRA path applies adapters through a
  torch fallback (``bgmv_shrink``: an einsum over a per-token copy of the adapter's weights) that is slower than
  the hf backend; a merged model has no adapter to apply. The cost is an engine start per variant (about
  half a minute for SmolLM2 here) and the merged weights on disk (270 MB per SmolLM2 variant in bf16).
  On a GPU the adapter goes through ``LoRARequest`` on one engine over the base model, as vLLM serves adapters.

Where the paper is silent: greedy tokens of a merged model can differ from the adapter's (the merge rounds
``W + BA`` to the run's dtype once, the adapter path rounds each product); ``tests/test_demo_engine.py`` states
the agreement measured on the tiny model.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

BACKENDS = ("auto", "hf", "vllm")


def model_and_adapter(base: Path, trained: Path | None) -> tuple[str, str | None]:
    """A trained variant is a PEFT adapter on ``base`` or, under full fine-tuning, a whole model dir."""
    if trained is None:
        return str(base), None
    if (Path(trained) / "adapter_config.json").is_file():
        return str(base), str(trained)
    return str(trained), None


def merged_folder(root: Path, model: str, adapter: str, dtype: str, log: Callable[[str], None] = print) -> Path:
    """``model`` with ``adapter`` merged into its weights, exported once into ``root/<adapter's run name>``
    (the folder above ``adapter``, e.g. ``sft``); a finished export there is reused, an unfinished one rebuilt."""
    from hpd.export.merge import export_model
    from hpd.runfolder import read_manifest

    out = Path(root) / Path(adapter).parent.name
    if (read_manifest(out) or {}).get("status") == "complete":
        return out
    shutil.rmtree(out, ignore_errors=True)
    log(f"  merging {adapter} into {model} for vLLM -> {out}")
    export_model(model, out, adapter=adapter, dtype=dtype, command="hpd demo (merge for vLLM)")
    return out


class Engines:
    """The generators of one cell (module doc). ``backend``: ``hf`` or ``vllm`` (resolved); ``merged``: where
    merged variants go; ``threads``: the vLLM engine's OpenMP threads (``None``: vLLM's own binding)."""

    def __init__(self, backend: str, dtype: str, seed: int, merged: Path, threads: int | None = None,
                 log: Callable[[str], None] = print):
        self.backend, self.dtype, self.seed, self.merged = backend, dtype, seed, Path(merged)
        self.threads, self.log = threads, log
        self._engine = None

    def generator(self, base: Path, trained: Path | None):
        """The policy that generates for ``trained`` (``None``: the base model)."""
        model, adapter = model_and_adapter(base, trained)
        if self.backend == "hf":
            from hpd.policy.backends.hf import HFPolicy

            return HFPolicy(model, adapter=adapter, batch_size=64, dtype=self.dtype)
        from hpd.policy.backends.vllm import vllm_platform

        cpu = vllm_platform() == "cpu"
        if adapter is not None and cpu:
            model, adapter = str(merged_folder(self.merged, model, adapter, self.dtype, self.log)), None
        return self._engine_over(model, lora=not cpu).with_adapter(adapter)

    def _engine_over(self, model: str, lora: bool):
        """The running engine when it serves ``model``, else a new one (the old one stopped first)."""
        if self._engine is not None and self._engine.model_dir == model:
            return self._engine
        self.close()
        from hpd.policy.backends.vllm import VLLMPolicy

        self._engine = VLLMPolicy(model, dtype=self.dtype, enable_lora=lora, seed=self.seed, cpu_threads=self.threads)
        return self._engine

    def close(self) -> None:
        """Stop the running vLLM engine, if any."""
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()
