"""Adapters merged into their base model's weights.

* :func:`save_merged`: a saved adapter merged and written as a plain Hugging Face model folder, the weights step
  that ``hpd export`` (:mod:`hpd.export.merge`, which adds the model card, the manifest and the adapter copy) and
  the vLLM backend's CPU engine (:func:`hpd.policy.backends.vllm.over_merged_adapter`) share.
* :func:`merged_weights`: a live training model's weights with its LoRA deltas merged, for the RL trainers'
  vLLM rollout engine (``rollout.engine: vllm``, :mod:`hpd.methods.rl.core`).

:func:`save_merged` loads the base in float32, applies and merges the PEFT adapter (``peft``'s
``merge_and_unload``), and casts the result to ``dtype`` (:mod:`hpd.policy.dtype`; ``auto``: bfloat16 where this
machine computes it natively, else float32). The tokenizer files come from the adapter folder when it has its own
tokenizer (what ``hpd train`` saves beside the adapter), else from the base.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Iterator

from hpd.policy.dtype import resolve_dtype

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "vocab.json", "merges.txt", "added_tokens.json")


def merged_model(model: Path, adapter: Path | None, dtype: str = "auto") -> Any:
    """The base model with ``adapter`` merged into its weights (in float32), then cast to ``dtype`` resolved by
    :func:`hpd.policy.dtype.resolve_dtype` (``auto``: for this machine's default device)."""
    import torch
    from transformers import AutoModelForCausalLM

    target = resolve_dtype(dtype)
    merged = AutoModelForCausalLM.from_pretrained(str(model), dtype=torch.float32)
    if adapter is not None:
        from peft import PeftModel

        merged = PeftModel.from_pretrained(merged, str(adapter)).merge_and_unload()
    return merged.to(target)


def copy_tokenizer(model: Path, adapter: Path | None, out: Path) -> Path:
    """Copy the tokenizer files into ``out``; returns the folder they came from."""
    src = adapter if adapter is not None and (adapter / "tokenizer_config.json").is_file() else model
    for name in TOKENIZER_FILES:
        if (src / name).is_file():
            shutil.copy2(src / name, out / name)
    return src


def save_merged(model: str | Path, adapter: str | Path | None, out: str | Path, dtype: str = "auto") -> Path:
    """Write the merged weights (safetensors, ``config.json``, ``generation_config.json``) and the tokenizer files
    into ``out`` (created); returns the tokenizer's source folder."""
    model, out = Path(model), Path(out)
    adapter = Path(adapter) if adapter is not None else None
    if adapter is not None and not (adapter / "adapter_config.json").is_file():
        raise ValueError(f"{adapter} is not a PEFT adapter folder (no adapter_config.json)")
    out.mkdir(parents=True, exist_ok=True)
    merged_model(model, adapter, dtype).save_pretrained(str(out), safe_serialization=True)
    return copy_tokenizer(model, adapter, out)


def merged_weights(model: Any) -> Iterator[tuple[str, Any]]:
    """The weights of a live training model under their Hugging Face names, each LoRA delta merged in out of place
    (``base + get_delta_weight``, in float32; the model's own weights are not touched, unlike peft's
    ``merge_adapter``/``unmerge_adapter``, whose round trip rounds bf16 weights). A model without LoRA layers
    (full fine-tuning) gives its parameters as they are. Tied weights appear once, as ``named_parameters`` gives
    them. For an engine that takes a model's weights (:meth:`hpd.policy.backends.vllm.VLLMPolicy.load_weights`)."""
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    layers = {name: m for name, m in base.named_modules() if isinstance(m, LoraLayer)}
    for name, p in base.named_parameters():
        if ".lora_" in name or ".modules_to_save." in name:
            continue
        owner, _, leaf = name.rpartition(".base_layer.")
        layer = layers.get(owner) if leaf else None
        if layer is None:
            yield name, p.detach()
            continue
        w = p.detach().float()
        for a in layer.active_adapters:
            if a in layer.lora_A and leaf == "weight":
                w = w + layer.get_delta_weight(a).float()
        yield f"{owner}.{leaf}", w
